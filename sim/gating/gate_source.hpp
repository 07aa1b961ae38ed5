#pragma once
// Gate values of the experts tokens pick, for the gate_prob and gate_score signature variants.
#include "sim/gating/gating_source.hpp"
#include "sim/workload/request.hpp"

#include <memory>
#include <span>
#include <string>

namespace eldr {

// A token's gate values, one per pick, layer-major, each layer's picks in ascending expert id (the
// order of the set bits of the token's masks): layers x top_k floats each.
struct TokenGates {
  std::span<const float> prob;
  std::span<const float> score;  // empty when the source has no raw scores
  // The picks' expert ids, as prob (empty: the caller reads them off the token's masks). A source that
  // keeps them spares a sum over the picks the walk over mask bits, whose exits mispredict.
  std::span<const uint16_t> experts;
};

// The gate values of the experts a token picked: what the gate_prob and gate_score variants sum.
class GateSource {
 public:
  virtual ~GateSource() = default;
  // Whether raw gate scores (the router's logits) are known; probabilities always are.
  virtual bool has_scores() const = 0;
  // Token `token` of `r`. The values stay valid as long as the gate source and its routing do.
  virtual TokenGates token_gates(const Request& r, int token) const = 0;
};

// The gates of a routing source, or nullptr when it has none:
//   GeneratedGating: the token's own gate values (sim/gating/pick_gates.hpp): probability = the
//     softmax over the layer of its own logits (its palette's plus the Gumbel noise its picks imply),
//     taken at the picked expert and, for a norm_topk_prob model, renormalized over the picks;
//     score = that logit (docs/routing-model.md). Both available.
//   ReplayGating with gate values in its file: probability = the recorded gate value (the weight the
//     engine applied, DESIGN/trace-format 7.1); no raw scores (the format does not carry logits).
//   ReplayGating without gates, UniformGating, anything else: nullptr.
// The returned object refers to `routing`, which must outlive it.
std::unique_ptr<GateSource> make_gate_source(const GatingSource& routing);

// Where a generated source's gate values, once drawn, are kept for other processes (a sweep's points
// and fits: the directory they share for routing sources); empty (the default): drawn in this process
// only. Within a process the values are drawn once per palette whatever the directory. A palette's
// values are taken from a file only when it records exactly the inputs they are drawn from (its
// logits and records, by content, the seed, the shape and norm_topk_prob), so results do not change.
void set_gate_cache_dir(const std::string& dir);
// Palettes whose values this process drew (not found in this process or the directory), and
// forgetting this process's values (as a fresh process starts): for tests of the cache.
size_t gate_palettes_drawn();
void forget_gate_tables();

}  // namespace eldr
