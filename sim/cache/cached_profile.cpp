#include "sim/cache/cached_profile.hpp"

namespace eldr {

PromptProfile cached_prompt_profile(const GatingSource& routing, const Request& r, std::span<const BlockOrigin> cached,
                                    int block_tokens, bool signature_cache, ProfileFields fields,
                                    const GateSource* gates, std::span<const int> only_layers)
{
  PromptProfile profile = empty_profile(routing.shape(), fields);
  if (signature_cache)
    for (const BlockOrigin& o : cached)
      add_tokens(routing, *o.request, o.first_token, o.first_token + block_tokens, profile, gates, only_layers);
  add_tokens(routing, r, int(cached.size()) * block_tokens, r.prompt_tokens, profile, gates, only_layers);
  return profile;
}

}  // namespace eldr
