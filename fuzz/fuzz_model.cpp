// A model file (models/*.json).
#include "fuzz_common.hpp"
#include "sim/config/model_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("model.json", data, size);
  return eldr::fuzz::expect_clean([&] { eldr::load_model(path); });
}
