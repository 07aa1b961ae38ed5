// The vLLM responses importer (eldrsim trace import vllm): nested lists, base64 .npy, usage, arrivals,
// checked against models/deepseek-v2-lite.json.
#include "fuzz_common.hpp"
#include "sim/trace/trace_importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  eldr::VllmImportOptions o;
  o.input      = eldr::fuzz::write_input("vllm.jsonl", data, size);
  o.out_dir    = eldr::fuzz::scratch_dir() + "/vllm-trace";
  o.model_file = ELDR_SOURCE_DIR "/models/deepseek-v2-lite.json";
  return eldr::fuzz::expect_clean([&] { eldr::import_vllm(o); });
}
