#pragma once
// Exact capacity-constrained ("balanced") assignment: put each of N points into one of K clusters so
// that no cluster holds more than its capacity and the total cost is minimal. It is the assignment
// step of ELDR's balanced K-means (docs/design.md sections 1 and 4) and, with capacity 1, the centroid
// matching of the online refit. It is exact (a min-cost flow optimum, checked against Boost.Graph in
// tests/unit/balanced_assignment_test.cpp) and fast for small K (a few ms at N = 2000, K = 16).
#include <optional>
#include <span>
#include <vector>

namespace eldr {

struct BalancedAssignment {
  std::vector<int> cluster;   // cluster[i] in [0, K): where point i goes
  double total_cost = 0;      // sum over i of cost[i][cluster[i]]
  std::vector<double> duals;  // per cluster, the solver's final potential: cost[i][cluster[i]] - duals[cluster[i]]
                              // <= cost[i][b] - duals[b] for every b (up to rounding)
};

// ceil(n / k): the capacity that makes K clusters as even as N points allow.
int balanced_capacity(int n, int k);

// cost is N x K row-major (cost[i * k + c] = cost of point i in cluster c), every entry finite;
// capacity has K entries, each >= 0, summing to >= N. Deterministic (no randomness; equal costs are
// resolved by index). Throws std::invalid_argument on malformed input.
BalancedAssignment balanced_assignment(std::span<const double> cost, int n, int k, std::span<const int> capacity);
// Every cluster holds at most balanced_capacity(n, k) points.
BalancedAssignment balanced_assignment(std::span<const double> cost, int n, int k);

// The same solver on a sparse instance: cost +infinity marks a pair that may not be used (the rest as
// above). Empty when no assignment within the capacities uses allowed pairs only.
std::optional<BalancedAssignment> balanced_assignment_allowed(std::span<const double> cost, int n, int k,
                                                              std::span<const int> capacity);

// A sparse instance's allowed pairs as lists: point i may use clusters allowed[first[i], first[i + 1]),
// in increasing order, at cost[e] for the pair allowed[e] (the solver reads costs only from here: a
// point's are contiguous, where in the N x K matrix each was a cache miss at 256 clusters). A caller
// that knows them (the K-means step builds them entry by entry) spares the solver a pass over the
// N x K matrix to find them.
struct AllowedLists {
  std::vector<int> first{0};  // n + 1 offsets into allowed
  std::vector<int> allowed;   // entries past first[n] are not read (a buffer may be kept at its largest)
  std::vector<double> cost;   // as allowed; may be left empty where the matrix is given (filled from it)
};

// The same with the lists given: they must name exactly the finite entries of cost (what the
// overload above finds; the other entries +infinity); their costs are taken from the matrix. Throws
// std::invalid_argument when the lists are malformed (wrong length, out of range, not increasing);
// their agreement with cost is not checked.
std::optional<BalancedAssignment> balanced_assignment_allowed(std::span<const double> cost, int n, int k,
                                                              std::span<const int> capacity, const AllowedLists& lists);

// The sparse instance given by its lists alone (their costs filled, every one finite). With `warm`
// (K finite entries), started from the duals of a nearby instance, e.g. the previous K-means
// iteration's: the points that are already where those duals put them at least reduced cost stay,
// and only the others are inserted by shortest paths, so a small change costs little work. An
// optimum as above, but where the optimum is not unique it may be another one than the cold solve's
// (the K-means step takes it only when is_unique_optimum proves it unique).
std::optional<BalancedAssignment> balanced_assignment_lists(int n, int k, std::span<const int> capacity,
                                                            const AllowedLists& lists,
                                                            std::span<const double> warm = {});

// Whether `cluster` (within `capacity`) is the only optimum of `cost`, every other assignment costing
// at least `margin` more: then every exact solver returns it, whatever its tie rule. It checks that
// the residual graph on the K clusters (moving a point from a to b, a cluster with room to the sink,
// the sink to a non-empty cluster) has no cycle costing less than `margin` per point it moves
// (Bellman-Ford: O(N K + K^3)). False for any tie (e.g. a zero row with room in two clusters).
bool is_unique_optimum(std::span<const double> cost, int n, int k, std::span<const int> capacity,
                       std::span<const int> cluster, double margin);

}  // namespace eldr
