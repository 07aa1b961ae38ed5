// The Mooncake JSONL importer (eldrsim trace import mooncake).
#include "fuzz_common.hpp"
#include "sim/trace/trace_importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  eldr::RequestTraceImportOptions o;
  o.input   = eldr::fuzz::write_input("mooncake.jsonl", data, size);
  o.out_dir = eldr::fuzz::scratch_dir() + "/mooncake-trace";
  return eldr::fuzz::expect_clean([&] { eldr::import_mooncake(o); });
}
