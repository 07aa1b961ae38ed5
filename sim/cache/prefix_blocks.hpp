#pragma once
// From a workload's prompt block hashes (any block size: 16 tokens generated, 512 for Mooncake) to
// the keys of a model's KV blocks (16 tokens, 64 for GPT-OSS-120B), the ids a BlockCache indexes.
// Only full prompt blocks are keyed (vLLM caches nothing else). KV block i (tokens [iB, (i+1)B)) is
// keyed by the hash of the workload block that holds its last token, mixed with its end: equal
// workload hashes mean an equal prefix through that block, so equal keys mean an equal prefix
// through (i+1)B. Blocks the hashes do not cover belong to this request alone.
#include "sim/workload/request.hpp"

#include <cstdint>
#include <vector>

namespace eldr {

// Full KV blocks of a prompt: the cacheable ones.
inline int full_blocks(int prompt_tokens, int block_tokens)
{
  return prompt_tokens / block_tokens;
}
// KV blocks a request holds at the end of its decode: prompt + output, rounded up.
inline int total_blocks(int tokens, int block_tokens)
{
  return (tokens + block_tokens - 1) / block_tokens;
}

// The keys of `r`'s full prompt blocks of `block_tokens` tokens (into `keys`, replaced).
void prompt_block_keys(const Workload& w, const Request& r, int block_tokens, std::vector<uint64_t>& keys);

// How many leading blocks a prefill may take from the cache when `cached` are there: vLLM always
// computes at least the prompt's last token (it needs its logits), so a fully cached prompt
// recomputes its last block.
inline long usable_prefix_blocks(long cached, int prompt_tokens, int block_tokens)
{
  const long most = (prompt_tokens - 1) / block_tokens;
  return cached < most ? cached : most;
}

}  // namespace eldr
