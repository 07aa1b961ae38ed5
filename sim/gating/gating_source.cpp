#include "sim/gating/gating_source.hpp"

#include <stdexcept>

namespace eldr {

TokenLaw GatingSource::token_law(const Request&, int) const
{
  throw std::logic_error("this routing source has no per-token law: expected unions need generated or uniform routing");
}

__attribute__((target_clones("avx2", "default"))) void accumulate(std::span<uint64_t> union_masks,
                                                                  std::span<const uint64_t> token)
{
  uint64_t* __restrict dst       = union_masks.data();
  const uint64_t* __restrict src = token.data();
  for (size_t i = 0; i < union_masks.size(); ++i)
    dst[i] |= src[i];
}

__attribute__((target_clones("avx2", "default"))) void or_records(const uint64_t* pool, std::span<const size_t> offsets,
                                                                  size_t words, std::span<uint64_t> union_masks)
{
  constexpr size_t kAhead  = 8;
  uint64_t* __restrict dst = union_masks.data();
  const size_t n           = offsets.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n)
      for (size_t line = 0; line < words; line += 8)
        __builtin_prefetch(pool + offsets[i + kAhead] + line);
    const uint64_t* __restrict src = pool + offsets[i];
    for (size_t w = 0; w < words; ++w)
      dst[w] |= src[w];
  }
}

}  // namespace eldr
