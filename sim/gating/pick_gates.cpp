#include "sim/gating/pick_gates.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace eldr {

GateLayer gate_layer(std::span<const float> logits)
{
  GateLayer g;
  if (logits.empty())
    throw std::invalid_argument("gate_layer: a layer needs at least one expert");
  g.zmax = *std::max_element(logits.begin(), logits.end());
  g.rate.resize(logits.size());
  for (size_t e = 0; e < logits.size(); ++e)
    g.rate[e] = std::exp(double(logits[e]) - g.zmax);
  return g;
}

// The exponential race: x_e = exp(-(z_e - zmax + g_e)) is exponential with rate w_e = exp(z_e - zmax),
// independently per expert, and the top k by logit are the k smallest x. Given that the picks S are
// those k, the smallest x among the others, m, has the density
//   f(m) ~ exp(-C m) prod_{e in S} (1 - exp(-w_e m)),   C = the others' total rate;
// given m, a pick's x is Exp(w_e) truncated to [0, m], one of the others (drawn in proportion to w)
// has x = m, and the rest m + Exp(w_e) (memorylessness). m is drawn by rejection from
// Gamma(a + 1, C) ~ m^a exp(-C m): each of the a "small" picks' factors is bounded by w_e m and each
// other's by 1, so a proposal is accepted with prod_small (1 - exp(-w_e m)) / (w_e m) times
// prod_other (1 - exp(-w_e m)), at most 1. A pick goes to the bound 1 when its rate is large against
// the typical m (about a / C), which keeps the acceptance high for peaked palettes. Renormalized
// over the picks, the weights need only the picks' x, so the others are not drawn.
void sample_pick_gates(const GateLayer& layer, std::span<const int> picked, bool renormalize, Rng& rng,
                       std::span<float> prob, std::span<float> score)
{
  const std::vector<double>& rate = layer.rate;
  const size_t E = rate.size(), k = picked.size();
  if (k == 0 || k > E || prob.size() != k || (!score.empty() && score.size() != k))
    throw std::invalid_argument("sample_pick_gates: picks and outputs do not match the layer");
  // Per pick: its rate, whether it is "small" (see above), 1 - exp(-w m) at the accepted m, its x.
  // Kept across calls: the sampler runs once per palette record and layer.
  thread_local std::vector<double> w, hit, x;
  thread_local std::vector<char> small;
  thread_local std::vector<size_t> by_rate;
  w.resize(k), hit.resize(k), x.resize(k), small.assign(k, 1);
  double C = 0;  // the others' total rate, summed apart (not as total minus picks: they may hold most of it)
  for (size_t j = 0, e = 0; j <= k; ++j) {
    const size_t next = j < k ? size_t(picked[j]) : E;
    if (j < k && (picked[j] < 0 || next >= E || (j > 0 && picked[j] <= picked[j - 1])))
      throw std::invalid_argument("sample_pick_gates: picks must be distinct expert ids of the layer, ascending");
    for (; e < next; ++e)
      C += rate[e];
    if (j < k)
      w[j] = rate[next], e = next + 1;
  }

  double m = INFINITY;  // no other expert: nothing to beat
  if (C > 0) {
    // The largest rates first go to the bound 1 while w a / C > 1 (a: the small ones left).
    by_rate.resize(k);
    std::iota(by_rate.begin(), by_rate.end(), size_t(0));
    std::sort(by_rate.begin(), by_rate.end(),
              [](size_t i, size_t j) { return w[i] > w[j] || (w[i] == w[j] && i < j); });
    size_t a = k;
    for (size_t i = 0; i < k && w[by_rate[i]] * double(a) / C > 1; ++i, --a)
      small[by_rate[i]] = 0;
    constexpr int kMaxTries = 100000;  // acceptance is far above 1e-5 for any palette the generator makes
    for (int tries = 0;; ++tries) {
      // Gamma(a + 1, C): -log of a product of a + 1 uniforms, over C; a log per 16 factors keeps the
      // product above the smallest double.
      double u = 1, log_u = 0;
      for (size_t i = 0; i <= a; ++i) {
        u *= 1 - rng.uniform01();
        if (i % 16 == 15)
          log_u += std::log(u), u = 1;
      }
      m             = -(log_u + std::log(u)) / C;
      double accept = 1;
      for (size_t j = 0; j < k; ++j) {
        const double y = w[j] * m;
        hit[j]         = -std::expm1(-y);
        accept *= small[j] ? hit[j] / y : hit[j];
      }
      if (rng.uniform01() < accept || tries == kMaxTries)
        break;
    }
  }
  double denominator = 0;
  for (size_t j = 0; j < k; ++j) {
    const double u = rng.uniform01();
    x[j]           = std::isinf(m) ? rng.exponential(w[j]) : -std::log1p(-u * hit[j]) / w[j];
    denominator += 1 / x[j];
  }
  if (C > 0 && !renormalize) {
    // The others: the one at m, drawn by rate, then every other one beyond it.
    double target = rng.uniform01() * C, seen = 0;
    size_t at_m = E, last_other = E;
    for (size_t j = 0, e = 0; j <= k && at_m == E; ++j) {
      const size_t next = j < k ? size_t(picked[j]) : E;
      for (; e < next && at_m == E; ++e)
        if ((seen += rate[e]) > target)
          at_m = e;
        else
          last_other = e;
      e = next + 1;
    }
    if (at_m == E)  // rounding left the target past the last sum
      at_m = last_other;
    denominator += 1 / m;
    for (size_t j = 0, e = 0; j <= k; ++j) {
      const size_t next = j < k ? size_t(picked[j]) : E;
      for (; e < next; ++e)
        if (e != at_m)
          denominator += 1 / (m + rng.exponential(rate[e]));
      e = next + 1;
    }
  }
  for (size_t j = 0; j < k; ++j) {
    prob[j] = float(1 / x[j] / denominator);
    if (!score.empty())
      score[j] = float(layer.zmax - std::log(x[j]));
  }
}

}  // namespace eldr
