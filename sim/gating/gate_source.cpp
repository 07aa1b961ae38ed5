#include "sim/gating/gate_source.hpp"
#include "sim/common/rng.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/gating/pick_gates.hpp"
#include "sim/gating/replay_gating.hpp"
#include "sim/gating/shared_prefix_gating.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace eldr {

namespace {

// Generated routing: a token's gate values are its own (pick_gates.hpp): the softmax of its own
// logits, the palette's plus the Gumbel noise its top-k law implies, at its picks (renormalized over
// them for a norm_topk_prob model), and those logits.
// They are drawn a palette at a time, on the first read of one of its tokens (only the gate variants
// read them, and mostly of prompt palettes), each palette from its own stream, so the values do not
// depend on the order of use.
class GeneratedGates : public GateSource {
 public:
  explicit GeneratedGates(const GeneratedGating& g) : routing_(g), tables_(size_t(g.palettes())) {}
  bool has_scores() const override { return true; }
  TokenGates token_gates(const Request& r, int token) const override
  {
    const size_t rec = routing_.record_of(r, token), R = size_t(routing_.records_per_palette());
    const size_t n  = size_t(routing_.shape().layers) * size_t(routing_.shape().top_k);
    const Table& t  = table(rec / R);
    const size_t at = (rec % R) * n;
    return {{&t.prob[at], n}, {&t.score[at], n}};
  }

 private:
  struct Table {
    std::vector<float> prob, score;  // [record][layer][pick], picks in ascending expert id
  };
  const Table& table(size_t palette) const
  {
    Table& t = tables_[palette];
    if (!t.prob.empty())
      return t;
    const GatingShape& s = routing_.shape();
    const size_t E = size_t(s.experts), K = size_t(s.top_k), R = size_t(routing_.records_per_palette());
    t.prob.resize(R * size_t(s.layers) * K);
    t.score.resize(t.prob.size());
    Rng rng(splitmix64(stream_seed(routing_.seed(), "routing.generated.gates") + palette));
    std::span<const float> z = routing_.palette_logits(int(palette));
    std::vector<GateLayer> layers;
    for (int l = 0; l < s.layers; ++l)
      layers.push_back(gate_layer(z.subspan(size_t(l) * E, E)));
    const uint64_t* pool = routing_.record_experts(palette * R).data();
    std::vector<int> picked;
    for (size_t rec = 0; rec < R; ++rec)
      for (int l = 0; l < s.layers; ++l) {
        picked.clear();
        const uint64_t* masks = pool + rec * size_t(s.words()) + size_t(l * s.words_per_layer);
        for (int w = 0; w < s.words_per_layer; ++w)
          for (uint64_t bits = masks[w]; bits; bits &= bits - 1)
            picked.push_back(w * 64 + std::countr_zero(bits));
        const size_t at = (rec * size_t(s.layers) + size_t(l)) * K;
        sample_pick_gates(layers[size_t(l)], picked, routing_.norm_topk_prob(), rng, std::span(&t.prob[at], K),
                          std::span(&t.score[at], K));
      }
    return t;
  }

  const GeneratedGating& routing_;
  mutable std::vector<Table> tables_;  // by palette
};

// Replayed routing with gate values: the recorded values, already in ascending expert order.
class ReplayGates : public GateSource {
 public:
  explicit ReplayGates(const ReplayGating& r) : routing_(r) {}
  bool has_scores() const override { return false; }
  TokenGates token_gates(const Request& r, int token) const override { return {routing_.token_gates(r, token), {}}; }

 private:
  const ReplayGating& routing_;
};

// Gates of a source whose shared prompt tokens route as another request's: the same remapping.
class SharedPrefixGates : public GateSource {
 public:
  SharedPrefixGates(const SharedPrefixGating& routing, std::unique_ptr<GateSource> inner)
      : routing_(routing), inner_(std::move(inner))
  {
  }
  bool has_scores() const override { return inner_->has_scores(); }
  TokenGates token_gates(const Request& r, int token) const override
  {
    return inner_->token_gates(routing_.owner(r, token), token);
  }

 private:
  const SharedPrefixGating& routing_;
  std::unique_ptr<GateSource> inner_;
};

}  // namespace

std::unique_ptr<GateSource> make_gate_source(const GatingSource& routing)
{
  if (const auto* s = dynamic_cast<const SharedPrefixGating*>(&routing)) {
    auto inner = make_gate_source(s->inner());
    return inner ? std::make_unique<SharedPrefixGates>(*s, std::move(inner)) : nullptr;
  }
  if (const auto* g = dynamic_cast<const GeneratedGating*>(&routing))
    return std::make_unique<GeneratedGates>(*g);
  if (const auto* r = dynamic_cast<const ReplayGating*>(&routing); r && r->has_gates())
    return std::make_unique<ReplayGates>(*r);
  return nullptr;
}

}  // namespace eldr
