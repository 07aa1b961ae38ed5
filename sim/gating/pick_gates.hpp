#pragma once
// A token's own gate values at its picks. The generator draws a token's top-k experts from its
// palette's softmax (Plackett-Luce), which is the law of the top k of the token's own logits z + g,
// g a standard Gumbel per expert: a real gate scores every token differently (docs/routing-model.md).
// Given the picks, sample_pick_gates draws those logits from their law conditional on these being the
// top k, and returns the gate weights at the picks (what an engine applies and reports) and the
// logits themselves (raw scores). Nothing is fitted: the noise is the one the pick law already implies.
#include "sim/common/rng.hpp"

#include <span>
#include <vector>

namespace eldr {

// One layer of a palette as the sampler reads it, computed once per palette and layer.
struct GateLayer {
  std::vector<double> rate;  // exp(z_e - zmax), one per expert
  double zmax = 0;
};
GateLayer gate_layer(std::span<const float> logits);

// picked: the token's distinct picks (expert ids), ascending (the order of its mask bits); prob and
// score: one value per pick, in the order of `picked`. renormalize: prob is the softmax over the picks (norm_topk_prob,
// model_spec.hpp); otherwise the softmax over every expert, taken at the picks.
void sample_pick_gates(const GateLayer& layer, std::span<const int> picked, bool renormalize, Rng& rng,
                       std::span<float> prob, std::span<float> score);

}  // namespace eldr
