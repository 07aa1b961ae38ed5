#include "sim/gating/uniform_gating.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <bit>

namespace eldr {

UniformGating::UniformGating(const ModelSpec& model, uint64_t seed, size_t pool_bytes)
{
  shape_.layers          = model.layers;
  shape_.experts         = model.experts;
  shape_.top_k           = model.top_k;
  shape_.words_per_layer = (model.experts + 63) / 64;
  const size_t record    = size_t(shape_.words()) * sizeof(uint64_t);
  const size_t pool_size = std::bit_floor(std::max<size_t>(pool_bytes / record, 256));
  pool_mask_             = uint64_t(pool_size - 1);
  pool_                  = HugePageBuffer(pool_size * size_t(shape_.words()));

  Rng rng(seed, "routing.uniform");
  std::vector<int> perm(size_t(model.experts));
  for (size_t rec = 0; rec < size_t(pool_size); ++rec)
    for (int l = 0; l < shape_.layers; ++l) {
      uint64_t* mask = &pool_[rec * shape_.words() + size_t(l) * shape_.words_per_layer];
      // Partial Fisher-Yates: the first top_k entries are a uniform k-subset.
      for (int e = 0; e < model.experts; ++e)
        perm[size_t(e)] = e;
      for (int i = 0; i < model.top_k; ++i) {
        int j = i + int(rng.below(uint64_t(model.experts - i)));
        std::swap(perm[size_t(i)], perm[size_t(j)]);
        mask[perm[size_t(i)] / 64] |= uint64_t(1) << (perm[size_t(i)] % 64);
      }
    }
  frequency_.assign(size_t(shape_.layers) * size_t(model.experts), 0.f);
  for (size_t rec = 0; rec < pool_size; ++rec)
    for (int l = 0; l < shape_.layers; ++l)
      for (int w = 0; w < shape_.words_per_layer; ++w)
        for (uint64_t bits = pool_[rec * shape_.words() + size_t(l * shape_.words_per_layer + w)]; bits;
             bits &= bits - 1)
          frequency_[size_t(l) * size_t(model.experts) + size_t(64 * w + std::countr_zero(bits))] += 1.f;
  for (float& f : frequency_)
    f /= float(pool_size);  // exact in float: a count over a power of two
}

size_t UniformGating::record_of(const Request& r, int token) const
{
  return size_t(splitmix64(r.routing_seed + uint64_t(token) * 0x9e3779b97f4a7c15ULL) & pool_mask_);
}

std::span<const uint64_t> UniformGating::token_experts(const Request& r, int token) const
{
  return {&pool_[record_of(r, token) * shape_.words()], size_t(shape_.words())};
}

void UniformGating::accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const
{
  accumulate_records(
      pool_.data(), size_t(shape_.words()), tokens.size(),
      [&](size_t i) { return record_of(*tokens[i].request, tokens[i].position); }, union_masks);
}

}  // namespace eldr
