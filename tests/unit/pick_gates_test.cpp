// sample_pick_gates (sim/gating/pick_gates.hpp) against the direct construction it replaces: draw a
// token's own logits z + Gumbel for every expert, keep the draws whose top k are the given picks, and
// average their softmax (over every expert, or renormalized over the picks) and logits at the picks.
// Both are Monte Carlo; the tolerances are a few
// standard errors of the difference.
#include "sim/common/rng.hpp"
#include "sim/gating/pick_gates.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace eldr;

namespace {

struct Moments {
  std::vector<double> prob, prob2, score;
  long n = 0;
};

// Rejection by brute force: only the draws whose top-k set is `picked` count.
Moments brute_force(const std::vector<float>& z, const std::vector<int>& picked, bool renormalize, long wanted,
                    uint64_t seed)
{
  const size_t E = z.size(), k = picked.size();
  Moments m{std::vector<double>(k), std::vector<double>(k), std::vector<double>(k)};
  Rng rng(seed);
  std::vector<double> v(E);
  std::vector<size_t> order(E);
  while (m.n < wanted) {
    for (size_t e = 0; e < E; ++e)
      v[e] = z[e] - std::log(-std::log1p(-rng.uniform01()) + 1e-300);  // z + standard Gumbel
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + long(k), order.end(),
                      [&](size_t a, size_t b) { return v[a] > v[b]; });
    std::vector<int> top(order.begin(), order.begin() + long(k));
    std::sort(top.begin(), top.end());
    if (top != picked)
      continue;
    double total = 0;
    for (size_t e = 0; e < E; ++e)
      if (!renormalize || std::binary_search(picked.begin(), picked.end(), int(e)))
        total += std::exp(v[e]);
    for (size_t j = 0; j < k; ++j) {
      const double p = std::exp(v[size_t(picked[j])]) / total;
      m.prob[j] += p;
      m.prob2[j] += p * p;
      m.score[j] += v[size_t(picked[j])];
    }
    ++m.n;
  }
  return m;
}

Moments sampled(const std::vector<float>& z, const std::vector<int>& picked, bool renormalize, long n, uint64_t seed)
{
  const size_t k = picked.size();
  Moments m{std::vector<double>(k), std::vector<double>(k), std::vector<double>(k)};
  Rng rng(seed);
  std::vector<float> prob(k), score(k);
  const GateLayer layer = gate_layer(z);
  for (; m.n < n; ++m.n) {
    sample_pick_gates(layer, picked, renormalize, rng, prob, score);
    for (size_t j = 0; j < k; ++j) {
      m.prob[j] += prob[j];
      m.prob2[j] += double(prob[j]) * prob[j];
      m.score[j] += score[j];
    }
  }
  return m;
}

void check_against_brute_force(const std::vector<float>& z, const std::vector<int>& picked, bool renormalize)
{
  const long n = 40000;
  Moments a = brute_force(z, picked, renormalize, n, 11), b = sampled(z, picked, renormalize, n, 12);
  for (size_t j = 0; j < picked.size(); ++j) {
    const double ma = a.prob[j] / n, mb = b.prob[j] / n;
    const double var = std::max(a.prob2[j] / n - ma * ma, 1e-12);
    const double se  = std::sqrt(2 * var / n);
    CAPTURE(j);
    CHECK(std::abs(ma - mb) < 5 * se);
    CHECK(std::abs(a.prob2[j] / n - b.prob2[j] / n) < 0.05 * a.prob2[j] / n + 1e-6);  // the spread, too
    CHECK(std::abs(a.score[j] / n - b.score[j] / n) < 0.03);
  }
}

}  // namespace

TEST_CASE("pick gates: the conditional law of a token's own logits, against brute-force rejection")
{
  // Flat, peaked and mixed palettes; picks that are likely and unlikely under them; the softmax over
  // every expert and the one renormalized over the picks.
  for (bool renormalize : {false, true}) {
    CAPTURE(renormalize);
    check_against_brute_force({0, 0, 0, 0, 0, 0}, {1, 4}, renormalize);
    check_against_brute_force({2.0f, 1.0f, 0.5f, 0, -0.5f, -1.0f, -2.0f}, {0, 1, 3}, renormalize);
    check_against_brute_force({2.0f, 1.0f, 0.5f, 0, -0.5f, -1.0f, -2.0f}, {2, 5}, renormalize);
    check_against_brute_force({4.0f, 0, 0, 0, 0, 0, 0, 0}, {0, 3}, renormalize);
  }
}

TEST_CASE("pick gates: probabilities are positive, sum below 1 over the picks, and follow the palette")
{
  // 128 experts, top 8, a peaked palette: the favourite's mean probability is above the others'.
  std::vector<float> z(128);
  Rng zr(3);
  for (float& v : z)
    v = float(1.5 * std::sqrt(-2 * std::log1p(-zr.uniform01())) * std::cos(6.283185307179586 * zr.uniform01()));
  std::vector<int> picked(8);
  std::iota(picked.begin(), picked.end(), 0);
  z[0] = 6;  // a favourite among the picks
  Rng rng(5);
  std::vector<float> prob(8), score(8);
  const GateLayer layer = gate_layer(z);
  double fav = 0, rest = 0;
  for (int i = 0; i < 2000; ++i) {
    sample_pick_gates(layer, picked, false, rng, prob, score);
    double sum = 0;
    for (size_t j = 0; j < 8; ++j) {
      REQUIRE(prob[j] > 0);
      sum += prob[j];
      CHECK(std::isfinite(score[j]));
    }
    CHECK(sum < 1.0 + 1e-6);
    fav += prob[0];
    rest += (sum - prob[0]) / 7;
  }
  CHECK(fav > 2 * rest);

  // Renormalized over the picks, a token's weights sum to 1 in every layer; the scores are the same
  // logits (only the weights' denominator changes).
  for (int i = 0; i < 200; ++i) {
    sample_pick_gates(layer, picked, true, rng, prob, score);
    CHECK(std::accumulate(prob.begin(), prob.end(), 0.0) == doctest::Approx(1.0).epsilon(1e-5));
  }

  // Every expert picked: nothing to beat, the probabilities sum to 1.
  std::vector<float> all{0.3f, -0.2f, 1.0f};
  std::vector<int> every{0, 1, 2};
  std::vector<float> p3(3), s3(3);
  sample_pick_gates(gate_layer(all), every, false, rng, p3, s3);
  CHECK(p3[0] + p3[1] + p3[2] == doctest::Approx(1.0).epsilon(1e-5));

  // Same stream, same values: deterministic.
  Rng a(9), b(9);
  std::vector<float> pa(8), pb(8), sa(8), sb(8);
  sample_pick_gates(layer, picked, false, a, pa, sa);
  sample_pick_gates(layer, picked, false, b, pb, sb);
  CHECK(pa == pb);
  CHECK(sa == sb);

  // Picks that are not distinct ids of the layer are an error.
  std::vector<int> twice{1, 1};
  std::vector<float> p2(2), s2(2);
  CHECK_THROWS_AS(sample_pick_gates(gate_layer(all), twice, false, rng, p2, s2), std::invalid_argument);
  std::vector<int> outside{0, 3};
  CHECK_THROWS_AS(sample_pick_gates(gate_layer(all), outside, true, rng, p2, s2), std::invalid_argument);
}
