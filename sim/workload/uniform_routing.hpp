#pragma once
// The no-locality reference: every token picks top_k distinct experts uniformly at random at every
// layer, independently of its request, label and position.
#include "sim/config/model_spec.hpp"
#include "sim/workload/expert_routing.hpp"

#include <vector>

namespace eldr {

class UniformRouting : public ExpertRoutingSource {
public:
  // Tokens draw whole-token records (all layers) from a pool of `pool_size` independently sampled
  // records, indexed by a hash of (request, token). With 2^14 records two tokens of a decode batch of
  // 80 share one in ~20% of steps, and a shared record removes under 0.1 of an expert from that
  // step's union at that size (see docs/model.md): the bias is far below the model's other errors,
  // while sampling 8 x 48 fresh experts per token would dominate the run time.
  UniformRouting(const ModelSpec& model, uint64_t seed, int pool_size = 1 << 14);

  const RoutingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request& r, int token) const override;

private:
  RoutingShape shape_;
  uint64_t pool_mask_;
  std::vector<uint64_t> pool_;
};

}  // namespace eldr
