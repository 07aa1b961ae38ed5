#include "sim/workload/expert_routing.hpp"

namespace eldr {

__attribute__((target_clones("avx2", "default"))) void accumulate(std::span<uint64_t> union_masks,
                                                                   std::span<const uint64_t> token)
{
  uint64_t* __restrict dst       = union_masks.data();
  const uint64_t* __restrict src = token.data();
  for (size_t i = 0; i < union_masks.size(); ++i)
    dst[i] |= src[i];
}

}  // namespace eldr
