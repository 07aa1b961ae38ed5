// An experiment config (configs/*.json): parsing, overrides, cross-field validation, the files it names.
#include "fuzz_common.hpp"
#include "sim/config/experiment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("config.json", data, size);
  return eldr::fuzz::expect_clean([&] { eldr::load_experiment(path); });
}
