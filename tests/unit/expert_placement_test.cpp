// Expert placement on expert-parallel instances (sim/cost/expert_placement.hpp): the policies by
// hand, and the balanced partition against brute force on small cases.
#include "sim/common/rng.hpp"
#include "sim/cost/cluster_placement.hpp"
#include "sim/cost/expert_placement.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

using namespace eldr;

namespace {

// The optimal largest rank load over every split of w into `ranks` groups of equal size.
double brute_force_optimum(const std::vector<double>& w, int ranks)
{
  const int n = int(w.size()), cap = n / ranks;
  std::vector<int> rank_of(static_cast<size_t>(n), -1), size(static_cast<size_t>(ranks), 0);
  double best                    = INFINITY;
  std::function<void(int)> place = [&](int i) {
    if (i == n) {
      best = std::min(best, max_rank_load(w, rank_of, ranks));
      return;
    }
    for (int r = 0; r < ranks; ++r) {
      if (size[size_t(r)] == cap)
        continue;
      rank_of[size_t(i)] = r;
      ++size[size_t(r)];
      place(i + 1);
      --size[size_t(r)];
      if (size[size_t(r)] == 0)
        break;  // empty ranks are interchangeable: try only the first
    }
  };
  place(0);
  return best;
}

}  // namespace

TEST_CASE("placement: contiguous and random give each rank experts / ranks experts per layer")
{
  const ExpertPlacement c = contiguous_placement(2, 8, 4);
  CHECK(c.rank(0, 0) == 0);
  CHECK(c.rank(0, 1) == 0);
  CHECK(c.rank(1, 2) == 1);
  CHECK(c.rank(1, 7) == 3);
  const auto masks = c.rank_masks(1);
  REQUIRE(masks.size() == 2 * 4);
  CHECK(masks[0] == 0b11);
  CHECK(masks[3] == 0b11000000);
  CHECK(masks[4 + 1] == 0b1100);

  const ExpertPlacement r = random_placement(3, 128, 4, 7);
  for (int l = 0; l < 3; ++l) {
    std::vector<int> count(4, 0);
    for (int e = 0; e < 128; ++e)
      ++count[size_t(r.rank(l, e))];
    CHECK(count == std::vector<int>{32, 32, 32, 32});
  }
  CHECK(random_placement(3, 128, 4, 7).rank_of == r.rank_of);  // seeded
  CHECK(random_placement(3, 128, 4, 8).rank_of != r.rank_of);
  const auto rm = r.rank_masks(2);
  for (int l = 0; l < 3; ++l) {  // the masks of a layer cover every expert exactly once
    uint64_t lo = 0, hi = 0;
    int bits = 0;
    for (int k = 0; k < 4; ++k) {
      const uint64_t a = rm[(size_t(l) * 4 + size_t(k)) * 2], b = rm[(size_t(l) * 4 + size_t(k)) * 2 + 1];
      CHECK((lo & a) == 0);
      CHECK((hi & b) == 0);
      lo |= a, hi |= b;
      bits += std::popcount(a) + std::popcount(b);
      CHECK(std::popcount(a) + std::popcount(b) == 32);
    }
    CHECK(bits == 128);
  }
  CHECK_THROWS_AS(contiguous_placement(1, 10, 4), std::invalid_argument);
}

TEST_CASE("placement: the balanced partition by hand")
{
  // 4 items on 2 ranks of 2: {5, 1} and {4, 2} -> 6 (contiguous would give 9).
  const std::vector<double> w{5, 4, 2, 1};
  const auto part = balanced_partition(w, 2);
  CHECK(max_rank_load(w, part, 2) == 6);
  CHECK(std::count(part.begin(), part.end(), 0) == 2);
  // Hot experts spread out: the 4 hottest of 8 land on 4 different ranks.
  const std::vector<double> hot{9, 9, 9, 9, 1, 1, 1, 1};
  const auto p4 = balanced_partition(hot, 4);
  std::vector<int> first(p4.begin(), p4.begin() + 4);
  std::sort(first.begin(), first.end());
  CHECK(first == std::vector<int>{0, 1, 2, 3});
  CHECK(max_rank_load(hot, p4, 4) == 10);
}

TEST_CASE("placement: the balanced partition against brute force on random small cases")
{
  Rng rng(11);
  int optimal = 0, cases = 0;
  double worst = 1;
  for (int trial = 0; trial < 300; ++trial) {
    const int ranks = 2 + int(rng.below(3));            // 2..4
    const int n     = ranks * (2 + int(rng.below(2)));  // 2 or 3 per rank: at most 12 items
    std::vector<double> w(static_cast<size_t>(n));
    for (double& x : w)  // skewed like expert popularity
      x = std::exp(2.0 * rng.uniform01());
    const auto part = balanced_partition(w, ranks);
    std::vector<int> size(size_t(ranks), 0);
    for (int r : part)
      ++size[size_t(r)];
    CHECK(std::all_of(size.begin(), size.end(), [&](int s) { return s == n / ranks; }));
    const double got = max_rank_load(w, part, ranks);
    const double opt = brute_force_optimum(w, ranks);
    CHECK(got >= opt - 1e-9);
    worst = std::max(worst, got / opt);
    optimal += got <= opt + 1e-9;
    ++cases;
  }
  INFO("optimal in " << optimal << " of " << cases << ", worst ratio " << worst);
  CHECK(worst < 1.10);
  CHECK(optimal >= cases * 8 / 10);
}

TEST_CASE("placement: balanced placement per layer beats contiguous on skewed loads")
{
  // Layer loads where the hot experts are the low ids: contiguous piles them on rank 0.
  std::vector<double> w(32);
  for (int l = 0; l < 2; ++l)
    for (int e = 0; e < 16; ++e)
      w[size_t(l) * 16 + size_t(e)] = expected_activation(e < 4 ? 0.4 : 0.02, 32);
  const ExpertPlacement b = balanced_placement(w, 2, 16, 4);
  const ExpertPlacement c = contiguous_placement(2, 16, 4);
  for (int l = 0; l < 2; ++l) {
    std::span<const double> lw(w.data() + l * 16, 16);
    std::vector<int> rb(16), rc(16);
    for (int e = 0; e < 16; ++e)
      rb[size_t(e)] = b.rank(l, e), rc[size_t(e)] = c.rank(l, e);
    CHECK(max_rank_load(lw, rb, 4) < max_rank_load(lw, rc, 4));
  }
  CHECK(expected_activation(0.5, 2) == doctest::Approx(0.75));
  CHECK(expected_activation(0, 100) == 0);
}

TEST_CASE("placement: activation weights from decode counts per token, by hand")
{
  // 100 decode tokens; an expert picked 50 times has p = 0.5: weight at B = 2 is 1 - 0.5^2 = 0.75;
  // picked 0 times: 0; 100 times (every token): 1. No tokens: all zero.
  const std::vector<double> counts{50, 0, 100};
  const std::vector<double> w = activation_weights(counts, 100, 2);
  CHECK(w[0] == doctest::Approx(0.75));
  CHECK(w[1] == 0);
  CHECK(w[2] == doctest::Approx(1));
  CHECK(activation_weights(counts, 0, 2) == std::vector<double>(3, 0));
}
