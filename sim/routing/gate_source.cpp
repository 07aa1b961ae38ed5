#include "sim/routing/gate_source.hpp"
#include "sim/workload/generated_routing.hpp"
#include "sim/workload/replay_routing.hpp"
#include "sim/workload/shared_prefix_routing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace eldr {

namespace {

// Generated routing: a token's gate probabilities are its palette's softmax per layer, its raw scores
// the palette's logits. The probability table (palettes x layers x experts floats) is built on first
// use: every run makes a gate source, and only the gate variants read it.
class GeneratedGates : public GateSource {
public:
  explicit GeneratedGates(const GeneratedRouting& g) : routing_(g) {}
  bool has_scores() const override { return true; }
  int token_table(const Request& r, int token) const override { return routing_.palette_of(r, token); }
  std::span<const float> table_prob(int table) const override
  {
    const size_t cells = size_t(routing_.shape().layers) * size_t(routing_.shape().experts);
    return {&probabilities()[size_t(table) * cells], cells};
  }
  std::span<const float> table_score(int table) const override { return routing_.palette_logits(table); }
  void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const override
  {
    const RoutingShape& s = routing_.shape();
    const size_t E = size_t(s.experts), K = size_t(s.top_k);
    const int pal  = routing_.palette_of(r, token);
    const float* p = &probabilities()[size_t(pal) * size_t(s.layers) * E];
    const float* z = routing_.palette_logits(pal).data();
    std::span<const uint64_t> masks = routing_.token_experts(r, token);
    for (int l = 0; l < s.layers; ++l) {
      size_t j = size_t(l) * K, end = j + K;
      for (int w = 0; w < s.words_per_layer; ++w)
        for (uint64_t bits = masks[size_t(l * s.words_per_layer + w)]; bits && j < end; bits &= bits - 1) {
          const size_t cell = size_t(l) * E + size_t(w * 64 + std::countr_zero(bits));
          prob[j] = p[cell];
          if (!score.empty())
            score[j] = z[cell];
          ++j;
        }
    }
  }

private:
  const std::vector<float>& probabilities() const
  {
    if (!prob_.empty())
      return prob_;
    const GeneratedRouting& g = routing_;
    const RoutingShape& s     = g.shape();
    const size_t E            = size_t(s.experts);
    prob_.resize(size_t(g.palettes()) * size_t(s.layers) * E);
    for (int p = 0; p < g.palettes(); ++p) {
      std::span<const float> z = g.palette_logits(p);
      for (int l = 0; l < s.layers; ++l) {
        const float* zl = &z[size_t(l) * E];
        float* out      = &prob_[(size_t(p) * size_t(s.layers) + size_t(l)) * E];
        const double zmax = *std::max_element(zl, zl + E);
        double total      = 0;
        for (size_t e = 0; e < E; ++e)
          total += std::exp(double(zl[e]) - zmax);
        for (size_t e = 0; e < E; ++e)
          out[e] = float(std::exp(double(zl[e]) - zmax) / total);
      }
    }
    return prob_;
  }
  const GeneratedRouting& routing_;
  mutable std::vector<float> prob_;
};

// Replayed routing with gate values: the recorded values, already in ascending expert order.
class ReplayGates : public GateSource {
public:
  explicit ReplayGates(const ReplayRouting& r) : routing_(r) {}
  bool has_scores() const override { return false; }
  void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const override
  {
    if (!score.empty())
      throw std::invalid_argument("replayed routing records gate values, not raw gate scores");
    std::span<const float> g = routing_.token_gates(r, token);
    std::copy(g.begin(), g.end(), prob.begin());
  }

private:
  const ReplayRouting& routing_;
};

// Gates of a source whose shared prompt tokens route as another request's: the same remapping.
class SharedPrefixGates : public GateSource {
public:
  SharedPrefixGates(const SharedPrefixRouting& routing, std::unique_ptr<GateSource> inner)
      : routing_(routing), inner_(std::move(inner))
  {
  }
  bool has_scores() const override { return inner_->has_scores(); }
  void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const override
  {
    inner_->token_gates(routing_.owner(r, token), token, prob, score);
  }
  int token_table(const Request& r, int token) const override { return inner_->token_table(routing_.owner(r, token), token); }
  std::span<const float> table_prob(int t) const override { return inner_->table_prob(t); }
  std::span<const float> table_score(int t) const override { return inner_->table_score(t); }

private:
  const SharedPrefixRouting& routing_;
  std::unique_ptr<GateSource> inner_;
};

}  // namespace

std::unique_ptr<GateSource> make_gate_source(const ExpertRoutingSource& routing)
{
  if (const auto* s = dynamic_cast<const SharedPrefixRouting*>(&routing)) {
    auto inner = make_gate_source(s->inner());
    return inner ? std::make_unique<SharedPrefixGates>(*s, std::move(inner)) : nullptr;
  }
  if (const auto* g = dynamic_cast<const GeneratedRouting*>(&routing))
    return std::make_unique<GeneratedGates>(*g);
  if (const auto* r = dynamic_cast<const ReplayRouting*>(&routing); r && r->has_gates())
    return std::make_unique<ReplayGates>(*r);
  return nullptr;
}

bool gates_support(const GateSource* gates, SignatureVariant v)
{
  if (v == SignatureVariant::gate_prob)
    return gates != nullptr;
  if (v == SignatureVariant::gate_score)
    return gates != nullptr && gates->has_scores();
  return true;
}

}  // namespace eldr
