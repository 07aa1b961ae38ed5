#pragma once
// The no-locality reference: every token picks top_k distinct experts uniformly at random at every
// layer, independently of its request, label and position.
#include "sim/common/huge_page_buffer.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/gating/gating_source.hpp"

#include <vector>

namespace eldr {

class UniformGating : public GatingSource {
 public:
  // Tokens draw whole-token records (all layers) from a pool of independently sampled records,
  // indexed by a hash of (request, token). The pool is sized to stay in a core's L2 cache (the batch
  // union is then bound by ORs, not memory latency): `pool_bytes` rounded down to a power of two of
  // records, 2048 for Qwen3-30B-A3B. Two tokens of a step that share a record lose one token's marginal
  // contribution to the union: E[loss] ~ C(B,2)/P * k * (1-k/E)^(B-1), at most ~0.3 of an expert
  // (0.25%) at any batch size for that pool (docs/model.md); sampling 8 x 48 fresh experts per
  // token instead would dominate the run time.
  explicit UniformGating(const ModelSpec& model, uint64_t seed, size_t pool_bytes = size_t(3) << 19);

  const GatingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request& r, int token) const override;
  void accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const override;
  bool has_token_laws() const override { return true; }
  // Every token's law: the pool's record frequencies (near top_k / experts everywhere).
  TokenLaw token_law(const Request&, int) const override { return {frequency_.data(), frequency_.data(), 0.0f}; }

 private:
  size_t record_of(const Request& r, int token) const;
  GatingShape shape_;
  uint64_t pool_mask_ = 0;
  HugePageBuffer pool_;           // [record][words]
  std::vector<float> frequency_;  // [layer][expert]: share of the pool's records that pick the expert
};

}  // namespace eldr
