// A hardware file (models/hardware/*.json).
#include "fuzz_common.hpp"
#include "sim/config/hardware.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("hardware.json", data, size);
  return eldr::fuzz::expect_clean([&] { eldr::load_hardware(path); });
}
