#pragma once
// Gate values of the experts tokens pick, for the gate_prob and gate_score signature variants.
#include "sim/routing/signature_variant.hpp"
#include "sim/workload/expert_routing.hpp"
#include "sim/workload/request.hpp"

#include <memory>
#include <span>

namespace eldr {

// The gate values of the experts a token picked: what the gate_prob and gate_score variants sum.
class GateSource {
public:
  static constexpr size_t kMaxGateTables = 64;
  virtual ~GateSource() = default;
  // Whether raw gate scores (the router's logits) are known; probabilities always are.
  virtual bool has_scores() const = 0;
  // Token `token` of `r`, one value per pick, layer-major, each layer's picks in ascending expert id
  // (the order of the set bits of the token's masks): `prob` and `score` hold layers x top_k floats
  // each. `score` may be empty (not wanted); it must be when !has_scores().
  virtual void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const = 0;

  // Optional fast path, for sources whose gate values depend on a token only through one of a few
  // dense tables (generated routing: its palette). The table of token `token`, or -1 (none: the
  // default); a request's tokens may use at most kMaxGateTables tables (shared prompt blocks route as
  // their first holder's tokens, so a prompt may mix a few requests' tables). Then gate sums are per-table counts times
  // the table, instead of a gather per pick.
  virtual int token_table(const Request&, int) const { return -1; }
  // A table's gate probabilities and raw scores, [layer][expert] (scores empty without has_scores()).
  virtual std::span<const float> table_prob(int) const { return {}; }
  virtual std::span<const float> table_score(int) const { return {}; }
};

// The gates of a routing source, or nullptr when it has none:
//   GeneratedRouting: probability = softmax over the layer of the token's palette logits, taken at the
//     picked expert; score = that logit (docs/routing-model.md). Both available.
//   ReplayRouting with gate values in its file: probability = the recorded gate value (the weight the
//     engine applied, DESIGN/trace-format 7.1); no raw scores (the format does not carry logits).
//   ReplayRouting without gates, UniformRouting, anything else: nullptr.
// The returned object refers to `routing`, which must outlive it.
std::unique_ptr<GateSource> make_gate_source(const ExpertRoutingSource& routing);

// Whether signatures of `v` can be built with `gates` (nullptr = no gate source): counts-based
// variants always; gate_prob needs a gate source; gate_score one with scores.
bool gates_support(const GateSource* gates, SignatureVariant v);

}  // namespace eldr
