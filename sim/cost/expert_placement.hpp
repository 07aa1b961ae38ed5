#pragma once
// Which GPU (rank) of an expert-parallel decode instance holds each routed expert, per MoE layer.
// Inside an EP group a MoE layer waits for its slowest rank, so where experts sit decides how much of
// a batch's expert locality turns into time. Policies: contiguous (experts 0..E/R-1 on rank 0, ...),
// random (a seeded permutation per layer), and balanced: given each expert's expected load, split
// every layer's experts into R groups of E/R that minimise the largest group load (a balanced number
// partition: longest-processing-time first under the equal-size constraint, then pairwise swaps
// between the heaviest rank and the others while they lower it; tested against brute force).
//
// Plain C++ (no SimGrid).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace eldr {

struct ExpertPlacement {
  int layers  = 0;
  int experts = 0;
  int ranks   = 1;
  std::vector<uint8_t> rank_of;  // [layer][expert]

  int rank(int layer, int expert) const { return rank_of[size_t(layer) * size_t(experts) + size_t(expert)]; }
  // Bit masks of each rank's experts, [layer][rank][word] with `words_per_layer` words per mask (the
  // layout of gating_source.hpp), so a rank's distinct experts are popcount(union & mask).
  std::vector<uint64_t> rank_masks(int words_per_layer) const;
};

ExpertPlacement contiguous_placement(int layers, int experts, int ranks);
ExpertPlacement random_placement(int layers, int experts, int ranks, uint64_t seed);
// weights: [layer][expert] expected loads (e.g. expected_activation below).
ExpertPlacement balanced_placement(std::span<const double> weights, int layers, int experts, int ranks);

// One layer: the rank of each of the n = weights.size() items, n/ranks per rank (n divisible by ranks).
std::vector<int> balanced_partition(std::span<const double> weights, int ranks);
// The largest per-rank sum of weights.
double max_rank_load(std::span<const double> weights, std::span<const int> rank_of, int ranks);

// The chance that an expert that a token picks with probability p is active in a step of `batch`
// tokens: 1 - (1 - p)^batch. A memory-bound rank's time grows with its active experts, so this is the
// load a placement balances.
double expected_activation(double p, double batch);

// "contiguous", "random", "balanced".
bool is_placement_policy(const std::string& name);

}  // namespace eldr
