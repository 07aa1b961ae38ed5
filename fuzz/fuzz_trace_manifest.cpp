// A trace manifest (trace.json of a trace directory, docs/trace-format.md).
#include "fuzz_common.hpp"
#include "sim/trace/trace_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("trace.json", data, size);
  return eldr::fuzz::expect_clean([&] { eldr::read_trace_manifest(path); });
}
