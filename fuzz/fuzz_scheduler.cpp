// An llm-d scheduler configuration (configs/scheduler/*.yaml), then the composed section it maps to.
#include "fuzz_common.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/routing/registry/plugin_table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("scheduler.yaml", data, size);
  return eldr::fuzz::expect_clean([&] {
    eldr::Json section = eldr::read_endpoint_picker_config(path);
    section["name"]    = "composed";
    eldr::read_composition(section, path);
  });
}
