// A trace's requests file (requests.jsonl), read against a fixed manifest: 4 labels, 16-token prefix
// blocks, a routing file of 48 layers x 128 experts, top-8.
#include "fuzz_common.hpp"
#include "sim/trace/trace_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  static const eldr::TraceManifest manifest = [] {
    eldr::TraceManifest m;
    m.labels              = {"code", "math", "medical", "legal"};
    m.prefix_block_tokens = 16;
    m.model               = eldr::TraceModel{"qwen3-30b-a3b", 48, 128, 8};
    m.routing_file        = "routing.bin";
    return m;
  }();
  const std::string path = eldr::fuzz::write_input("requests.jsonl", data, size);
  return eldr::fuzz::expect_clean([&] { eldr::read_trace_requests(path, manifest); });
}
