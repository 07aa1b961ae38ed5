#pragma once
// The signature cache: per-block expert counts for a router that routes on the prompt's experts and
// profiles cached blocks (DecodeRouter::profiles_cached_blocks). With prefix caching a prefill worker does not
// run a prompt's cached blocks, so it does not see their expert choices. The signature cache keeps,
// per cached KV block, the [layer x expert] counts of the tokens that filled it (int8: a block has at
// most 64 tokens), allocated and evicted with the block; a request's prompt profile is then the sum
// of its cached blocks' counts and its computed tail's, exactly the profile without caching. Without
// the signature cache only the computed tail is counted.
//
// A block's counts are a function of its tokens, and the routing source reproduces a token's choices
// on demand, so the simulator keeps what filled each block (BlockOrigin) instead of the 6 KiB array.
#include "sim/cache/block_cache.hpp"
#include "sim/gating/prompt_profile.hpp"

#include <span>

namespace eldr {

// The prompt profile of r whose first cached.size() blocks of `block_tokens` came from the cache,
// filled by `cached[i]`; the rest of the prompt is computed now.
PromptProfile cached_prompt_profile(const GatingSource& routing, const Request& r, std::span<const BlockOrigin> cached,
                                    int block_tokens, bool signature_cache, ProfileFields fields = {},
                                    const GateSource* gates = nullptr, std::span<const int> only_layers = {});

// Bytes of one block's counts: an int8 per (layer, expert).
inline double signature_block_bytes(int layers, int experts)
{
  return double(layers) * double(experts);
}

}  // namespace eldr
