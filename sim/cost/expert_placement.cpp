#include "sim/cost/expert_placement.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace eldr {

namespace {

void check_shape(int experts, int ranks)
{
  if (ranks < 1 || ranks > 255 || experts % ranks != 0)
    throw std::invalid_argument("expert placement: " + std::to_string(experts) + " experts do not split evenly over " +
                                std::to_string(ranks) + " ranks");
}

ExpertPlacement empty_placement(int layers, int experts, int ranks)
{
  check_shape(experts, ranks);
  ExpertPlacement p;
  p.layers  = layers;
  p.experts = experts;
  p.ranks   = ranks;
  p.rank_of.assign(size_t(layers) * size_t(experts), 0);
  return p;
}

}  // namespace

std::vector<uint64_t> ExpertPlacement::rank_masks(int words_per_layer) const
{
  std::vector<uint64_t> m(size_t(layers) * size_t(ranks) * size_t(words_per_layer), 0);
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts; ++e)
      m[(size_t(l) * size_t(ranks) + size_t(rank(l, e))) * size_t(words_per_layer) + size_t(e / 64)] |= uint64_t(1)
                                                                                                        << (e % 64);
  return m;
}

ExpertPlacement contiguous_placement(int layers, int experts, int ranks)
{
  ExpertPlacement p = empty_placement(layers, experts, ranks);
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts; ++e)
      p.rank_of[size_t(l) * size_t(experts) + size_t(e)] = uint8_t(e / (experts / ranks));
  return p;
}

ExpertPlacement random_placement(int layers, int experts, int ranks, uint64_t seed)
{
  ExpertPlacement p = empty_placement(layers, experts, ranks);
  Rng rng(seed, "placement.random");
  std::vector<int> perm(static_cast<size_t>(experts));
  for (int l = 0; l < layers; ++l) {
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size(); i > 1; --i)
      std::swap(perm[i - 1], perm[rng.below(i)]);
    for (int i = 0; i < experts; ++i)
      p.rank_of[size_t(l) * size_t(experts) + size_t(perm[size_t(i)])] = uint8_t(i / (experts / ranks));
  }
  return p;
}

std::vector<int> balanced_partition(std::span<const double> w, int ranks)
{
  const int n = int(w.size());
  check_shape(n, ranks);
  const int cap = n / ranks;
  // Longest processing time first, each item to the lightest rank with room (ties: lowest rank).
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[size_t(a)] > w[size_t(b)]; });
  std::vector<int> rank_of(size_t(n), 0), size(size_t(ranks), 0);
  std::vector<double> load(size_t(ranks), 0);
  for (int i : order) {
    int best = -1;
    for (int r = 0; r < ranks; ++r)
      if (size[size_t(r)] < cap && (best < 0 || load[size_t(r)] < load[size_t(best)]))
        best = r;
    rank_of[size_t(i)] = best;
    ++size[size_t(best)];
    load[size_t(best)] += w[size_t(i)];
  }
  // Swaps between the heaviest rank and another: take the swap that lowers the pair's larger load
  // the most, until none lowers the heaviest rank.
  for (int round = 0; round < 64 * n; ++round) {
    const int hi     = int(std::max_element(load.begin(), load.end()) - load.begin());
    double best_gain = 1e-12 * (1 + load[size_t(hi)]);
    int bi = -1, bj = -1;
    for (int i = 0; i < n; ++i) {
      if (rank_of[size_t(i)] != hi)
        continue;
      for (int j = 0; j < n; ++j) {
        const int r    = rank_of[size_t(j)];
        const double d = w[size_t(i)] - w[size_t(j)];
        if (r == hi || d <= 0)
          continue;
        const double after = std::max(load[size_t(hi)] - d, load[size_t(r)] + d);
        if (load[size_t(hi)] - after > best_gain) {
          best_gain = load[size_t(hi)] - after;
          bi = i, bj = j;
        }
      }
    }
    if (bi < 0)
      break;
    const int r    = rank_of[size_t(bj)];
    const double d = w[size_t(bi)] - w[size_t(bj)];
    load[size_t(hi)] -= d;
    load[size_t(r)] += d;
    std::swap(rank_of[size_t(bi)], rank_of[size_t(bj)]);
  }
  return rank_of;
}

double max_rank_load(std::span<const double> w, std::span<const int> rank_of, int ranks)
{
  std::vector<double> load(size_t(ranks), 0);
  for (size_t i = 0; i < w.size(); ++i)
    load[size_t(rank_of[i])] += w[i];
  return *std::max_element(load.begin(), load.end());
}

ExpertPlacement balanced_placement(std::span<const double> weights, int layers, int experts, int ranks)
{
  ExpertPlacement p = empty_placement(layers, experts, ranks);
  if (weights.size() != size_t(layers) * size_t(experts))
    throw std::invalid_argument("balanced placement: weights must be layers x experts");
  for (int l = 0; l < layers; ++l) {
    const auto part = balanced_partition(weights.subspan(size_t(l) * size_t(experts), size_t(experts)), ranks);
    for (int e = 0; e < experts; ++e)
      p.rank_of[size_t(l) * size_t(experts) + size_t(e)] = uint8_t(part[size_t(e)]);
  }
  return p;
}

double expected_activation(double p, double batch)
{
  return 1.0 - std::pow(1.0 - std::clamp(p, 0.0, 1.0), batch);
}

bool is_placement_policy(const std::string& name)
{
  return name == "contiguous" || name == "random" || name == "balanced";
}

}  // namespace eldr
