// The Azure 2023 CSV importer (eldrsim trace import azure).
#include "fuzz_common.hpp"
#include "sim/trace/trace_importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  eldr::RequestTraceImportOptions o;
  o.input   = eldr::fuzz::write_input("azure.csv", data, size);
  o.out_dir = eldr::fuzz::scratch_dir() + "/azure-trace";
  return eldr::fuzz::expect_clean([&] { eldr::import_azure(o); });
}
