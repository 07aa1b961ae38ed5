// balanced_assignment (sim/routing/eldr/balanced_assignment.hpp): exactness against hand-computed cases,
// brute force on tiny instances and Boost.Graph's min-cost flow on random ones; capacities; errors.
#include "sim/common/rng.hpp"
#include "sim/routing/eldr/balanced_assignment.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/successive_shortest_path_nonnegative_weights.hpp>  // before find_flow_cost: it needs its named params

#include <boost/graph/find_flow_cost.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace eldr;

namespace {

// The oracle: min-cost max-flow on source -> point (cap 1) -> cluster (cap 1, cost c) -> sink
// (cap capacity[k]). Boost's successive shortest paths needs integer costs, so instances are integer.
struct OracleResult {
  long flow = 0;
  long cost = 0;
  std::vector<int> cluster;
};

OracleResult boost_min_cost_flow(const std::vector<long>& cost, int n, int k, const std::vector<int>& cap)
{
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph  = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, long,
                      boost::property<boost::edge_residual_capacity_t, long,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor,
                                                      boost::property<boost::edge_weight_t, long>>>>>;
  const int source = n + k, sink = n + k + 1;
  Graph g(size_t(n + k + 2));
  auto capacity = get(boost::edge_capacity, g);
  auto reverse  = get(boost::edge_reverse, g);
  auto weight   = get(boost::edge_weight, g);
  auto residual = get(boost::edge_residual_capacity, g);
  auto add      = [&](int u, int v, long c, long w) {
    auto e      = add_edge(size_t(u), size_t(v), g).first;
    auto r      = add_edge(size_t(v), size_t(u), g).first;
    capacity[e] = c;
    capacity[r] = 0;
    weight[e]   = w;
    weight[r]   = -w;
    reverse[e]  = r;
    reverse[r]  = e;
    return e;
  };
  std::vector<Traits::edge_descriptor> source_edges, point_edges;
  for (int i = 0; i < n; ++i)
    source_edges.push_back(add(source, i, 1, 0));
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < k; ++c)
      point_edges.push_back(add(i, n + c, 1, cost[size_t(i) * size_t(k) + size_t(c)]));
  for (int c = 0; c < k; ++c)
    add(n + c, sink, cap[size_t(c)], 0);
  boost::successive_shortest_path_nonnegative_weights(g, size_t(source), size_t(sink));

  OracleResult r;
  r.cost = boost::find_flow_cost(g);
  for (auto e : source_edges)
    r.flow += capacity[e] - residual[e];
  r.cluster.assign(size_t(n), -1);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < k; ++c)
      if (residual[point_edges[size_t(i) * size_t(k) + size_t(c)]] == 0)
        r.cluster[size_t(i)] = c;
  return r;
}

std::vector<double> as_double(const std::vector<long>& v)
{
  return {v.begin(), v.end()};
}

// Every point in a cluster, no cluster over capacity, total_cost = the sum it claims.
void check_feasible(const BalancedAssignment& a, const std::vector<double>& cost, int n, int k,
                    const std::vector<int>& cap)
{
  REQUIRE(a.cluster.size() == size_t(n));
  std::vector<int> size(size_t(k), 0);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const int c = a.cluster[size_t(i)];
    REQUIRE(c >= 0);
    REQUIRE(c < k);
    ++size[size_t(c)];
    total += cost[size_t(i) * size_t(k) + size_t(c)];
  }
  for (int c = 0; c < k; ++c)
    CHECK(size[size_t(c)] <= cap[size_t(c)]);
  CHECK(a.total_cost == doctest::Approx(total).epsilon(1e-12));
}

// The optimum by enumeration of all K^N assignments (tiny instances only).
double brute_force(const std::vector<double>& cost, int n, int k, const std::vector<int>& cap)
{
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> a(size_t(n), 0), size(size_t(k), 0);
  std::function<void(int, double)> rec = [&](int i, double acc) {
    if (i == n) {
      best = std::min(best, acc);
      return;
    }
    for (int c = 0; c < k; ++c) {
      if (size[size_t(c)] == cap[size_t(c)])
        continue;
      ++size[size_t(c)];
      rec(i + 1, acc + cost[size_t(i) * size_t(k) + size_t(c)]);
      --size[size_t(c)];
    }
  };
  rec(0, 0.0);
  return best;
}

// Random capacities summing to at least n: the balanced default, uneven ones with spare, exactly n
// (every cluster full at the end), and some zero capacities.
std::vector<int> random_capacities(Rng& rng, int n, int k, int kind)
{
  std::vector<int> cap(size_t(k), 0);
  if (kind == 0) {
    std::fill(cap.begin(), cap.end(), balanced_capacity(n, k));
    return cap;
  }
  // Spread n (plus some spare for kind 1) over the clusters at random.
  const int total = kind == 1 ? n + int(rng.below(uint64_t(n / 2 + 2))) : n;
  for (int u = 0; u < total; ++u)
    ++cap[size_t(rng.below(uint64_t(k)))];
  return cap;
}

// `lists` with each allowed pair's cost from the N x K matrix.
AllowedLists priced_lists(const AllowedLists& lists, const std::vector<double>& cost, int n, int k)
{
  AllowedLists r = lists;
  for (int i = 0; i < n; ++i)
    for (int e = lists.first[size_t(i)]; e < lists.first[size_t(i) + 1]; ++e)
      r.cost.push_back(cost[size_t(i) * size_t(k) + size_t(lists.allowed[size_t(e)])]);
  return r;
}

}  // namespace

TEST_CASE("balanced assignment: hand-computed cases")
{
  SUBCASE("two clusters of two: the cheapest detour, not the greedy order")
  {
    // Every point prefers cluster 0; two must go to cluster 1, and the cheapest detours are points
    // 1 (+1) and 3 (+2): total 3. Filling cluster 0 in index order would cost 5 + 2 = 7.
    const std::vector<double> cost = {0, 10, 0, 1, 0, 5, 0, 2};
    const auto a                   = balanced_assignment(cost, 4, 2);
    CHECK(a.cluster == std::vector<int>{0, 1, 0, 1});
    CHECK(a.total_cost == 3);
  }
  SUBCASE("a 3 x 3 assignment problem with a unique optimum")
  {
    // Permutations: 012 -> 6, 021 -> 11, 102 -> 5, 120 -> 9, 201 -> 7, 210 -> 6.
    const std::vector<double> cost = {4, 1, 3, 2, 0, 5, 3, 2, 2};
    const auto a                   = balanced_assignment(cost, 3, 3);
    CHECK(a.cluster == std::vector<int>{1, 0, 2});
    CHECK(a.total_cost == 5);
  }
  SUBCASE("a move chain: the new point displaces a point that displaces another")
  {
    // cap 1 each. Points 0 and 2 both want cluster 0; point 2 would pay 9 elsewhere, so point 0
    // gives way to cluster 1, which pushes point 1 on to cluster 2.
    // Optimum: 2 -> 0 (0), 0 -> 1 (1), 1 -> 2 (1): total 2 (the other five permutations cost >= 9).
    const std::vector<double> cost = {0, 1, 9, 9, 0, 1, 0, 9, 9};
    const auto a                   = balanced_assignment(cost, 3, 3);
    CHECK(a.cluster == std::vector<int>{1, 2, 0});
    CHECK(a.total_cost == 2);
  }
  SUBCASE("uneven capacities with spare; a zero capacity is never used")
  {
    const std::vector<double> cost = {0, 1, 2, 0, 1, 2, 0, 1, 2};
    const std::vector<int> cap     = {0, 2, 5};
    const auto a                   = balanced_assignment(cost, 3, 3, cap);
    check_feasible(a, cost, 3, 3, cap);
    CHECK(a.total_cost == 1 + 1 + 2);
  }
  SUBCASE("one cluster, and no points")
  {
    const std::vector<double> cost = {0.5, 0.25, 2};
    const auto a                   = balanced_assignment(cost, 3, 1);
    CHECK(a.cluster == std::vector<int>{0, 0, 0});
    CHECK(a.total_cost == 2.75);
    CHECK(balanced_assignment(std::vector<double>{}, 0, 4).cluster.empty());
  }
  SUBCASE("all costs equal: any balanced split, deterministic")
  {
    const std::vector<double> cost(30, 1.0);
    const auto a = balanced_assignment(cost, 10, 3);
    check_feasible(a, cost, 10, 3, {4, 4, 4});
    CHECK(a.cluster == balanced_assignment(cost, 10, 3).cluster);
  }
}

TEST_CASE("balanced assignment: capacity helper")
{
  CHECK(balanced_capacity(1000, 16) == 63);
  CHECK(balanced_capacity(960, 16) == 60);
  CHECK(balanced_capacity(3, 5) == 1);
  CHECK(balanced_capacity(0, 5) == 0);
  CHECK_THROWS_AS(balanced_capacity(10, 0), std::invalid_argument);
}

TEST_CASE("balanced assignment: bad input is rejected")
{
  const std::vector<double> cost = {0, 1, 1, 0};
  CHECK_THROWS_AS(balanced_assignment(cost, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(balanced_assignment(cost, 3, 2), std::invalid_argument);  // size mismatch
  CHECK_THROWS_AS(balanced_assignment(cost, 2, 2, std::vector<int>{1}), std::invalid_argument);
  CHECK_THROWS_AS(balanced_assignment(cost, 2, 2, std::vector<int>{1, 0}), std::invalid_argument);
  CHECK_THROWS_AS(balanced_assignment(cost, 2, 2, std::vector<int>{3, -1}), std::invalid_argument);
  const std::vector<double> nan = {0, std::nan(""), 1, 0};
  CHECK_THROWS_AS(balanced_assignment(nan, 2, 2), std::invalid_argument);
  const std::vector<double> inf = {0, 1, std::numeric_limits<double>::infinity(), 0};
  CHECK_THROWS_AS(balanced_assignment(inf, 2, 2), std::invalid_argument);
}

TEST_CASE("balanced assignment: equals brute force on 300 tiny instances")
{
  Rng rng(7, "test.assignment.tiny");
  int bound = 0;  // instances whose capacities keep some point from its cheapest cluster
  for (int t = 0; t < 300; ++t) {
    const int n = 1 + int(rng.below(7));
    const int k = 1 + int(rng.below(3));
    // Half of them with few distinct costs (many ties), half with doubles.
    std::vector<double> cost(size_t(n) * size_t(k));
    for (auto& c : cost)
      c = t % 2 ? double(rng.below(4)) : 2.0 * rng.uniform01();
    const auto cap = random_capacities(rng, n, k, t % 3);
    const auto a   = balanced_assignment(cost, n, k, cap);
    check_feasible(a, cost, n, k, cap);
    const double optimum = brute_force(cost, n, k, cap);
    CHECK(a.total_cost == doctest::Approx(optimum).epsilon(1e-12));
    double greedy = 0;
    for (int i = 0; i < n; ++i)
      greedy += *std::min_element(cost.begin() + long(i) * k, cost.begin() + long(i + 1) * k);
    bound += optimum > greedy + 1e-9;
  }
  MESSAGE(bound << " of 300 tiny instances needed non-greedy placements");
  CHECK(bound > 50);
}

TEST_CASE("balanced assignment: equals Boost.Graph's min-cost flow on 240 random instances")
{
  // Integer costs, as Boost's successive shortest paths requires: cosine distances in [0, 2] scaled
  // by 1e6 and rounded (the production case), small integers (massive ties), and clustered costs
  // (points that agree on a favourite cluster, so the capacities bind hard). On integer-valued
  // doubles every step of balanced_assignment is exact, so the totals must be equal, not close.
  Rng rng(11, "test.assignment.oracle");
  int with_moves = 0;
  for (int t = 0; t < 240; ++t) {
    const int n    = 1 + int(rng.below(t < 200 ? 120 : 400));
    const int k    = 1 + int(rng.below(t % 4 == 0 ? 24 : 16));
    const int kind = t % 3;
    std::vector<long> icost(size_t(n) * size_t(k));
    const int style = (t / 3) % 3;
    for (int i = 0; i < n; ++i) {
      const int favourite = int(rng.below(uint64_t(std::max(1, k / 3))));  // skewed popularity
      for (int c = 0; c < k; ++c) {
        long v = 0;
        if (style == 0)
          v = std::lround(2.0 * rng.uniform01() * 1e6);
        else if (style == 1)
          v = long(rng.below(5));
        else
          v = std::lround((c == favourite ? 0.2 : 0.9 + rng.uniform01()) * 1e6);
        icost[size_t(i) * size_t(k) + size_t(c)] = v;
      }
    }
    const auto cap    = random_capacities(rng, n, k, kind);
    const auto cost   = as_double(icost);
    const auto mine   = balanced_assignment(cost, n, k, cap);
    const auto oracle = boost_min_cost_flow(icost, n, k, cap);
    REQUIRE(oracle.flow == n);
    check_feasible(mine, cost, n, k, cap);
    CHECK(mine.total_cost == double(oracle.cost));
    // Where the optimum is unique the assignments agree too; count instances where the capacity
    // made some point leave its cheapest cluster (so the test exercises more than argmin).
    for (int i = 0; i < n; ++i) {
      const long* row = icost.data() + size_t(i) * size_t(k);
      if (row[mine.cluster[size_t(i)]] != *std::min_element(row, row + k)) {
        ++with_moves;
        break;
      }
    }
  }
  MESSAGE(with_moves << " of 240 oracle instances needed non-greedy placements");
  CHECK(with_moves > 150);
}

TEST_CASE("balanced assignment: equals Boost.Graph at production size (N = 1000, K = 16)")
{
  Rng rng(5, "test.assignment.large");
  const int n = 1000, k = 16;
  std::vector<long> icost(size_t(n) * size_t(k));
  for (int i = 0; i < n; ++i) {
    const int favourite = int(rng.below(6));
    for (int c = 0; c < k; ++c)
      icost[size_t(i) * size_t(k) + size_t(c)] =
          std::lround((c == favourite ? 0.3 * rng.uniform01() : 0.5 + 1.5 * rng.uniform01()) * 1e6);
  }
  const std::vector<int> cap(size_t(k), balanced_capacity(n, k));
  const auto cost = as_double(icost);
  const auto mine = balanced_assignment(cost, n, k);
  check_feasible(mine, cost, n, k, cap);
  CHECK(mine.total_cost == double(boost_min_cost_flow(icost, n, k, cap).cost));
}

TEST_CASE("balanced assignment: equals Boost.Graph where the capacities bind hard, dense and sparse")
{
  // Points of a few kinds that all rank the clusters alike, capacities summing to n or a little more:
  // late points reach a cluster with room only along long paths, whose moves take the cheapest
  // movers out of clusters and put them into others (the solver's table of cheapest moves is
  // updated and found again all along). The sparse instances forbid each point all but a few
  // clusters near its kind; Boost sees those pairs at a cost no optimum can afford.
  Rng rng(17, "test.assignment.tight");
  constexpr long forbidden = 1'000'000'000'000;
  for (int t = 0; t < 12; ++t) {
    const int n = 300 + int(rng.below(300)), k = 8 + int(rng.below(24));
    const int kinds = 2 + int(rng.below(4));
    std::vector<long> icost(size_t(n) * size_t(k));
    std::vector<double> sparse(icost.size());
    std::vector<long> isparse(icost.size());
    for (int i = 0; i < n; ++i) {
      const int kind = int(rng.below(uint64_t(kinds)));
      for (int c = 0; c < k; ++c) {
        const long v =
            std::lround(((c + kind) % k < k / 2 ? 0.1 + 0.05 * ((c + kind) % k) : 1.0) * 1e6 + 1e5 * rng.uniform01());
        const bool allowed                         = (c + kind) % k < k / 2 + 2 || rng.below(4) == 0;
        icost[size_t(i) * size_t(k) + size_t(c)]   = v;
        sparse[size_t(i) * size_t(k) + size_t(c)]  = allowed ? double(v) : std::numeric_limits<double>::infinity();
        isparse[size_t(i) * size_t(k) + size_t(c)] = allowed ? v : forbidden;
      }
    }
    std::vector<int> cap = random_capacities(rng, n, k, t % 2 ? 0 : 2);
    CAPTURE(t);
    const auto cost   = as_double(icost);
    const auto dense  = balanced_assignment(cost, n, k, cap);
    const auto oracle = boost_min_cost_flow(icost, n, k, cap);
    check_feasible(dense, cost, n, k, cap);
    CHECK(dense.total_cost == double(oracle.cost));
    const auto mine          = balanced_assignment_allowed(sparse, n, k, cap);
    const auto sparse_oracle = boost_min_cost_flow(isparse, n, k, cap);
    REQUIRE(sparse_oracle.cost < forbidden);  // the allowed pairs hold an assignment
    REQUIRE(mine.has_value());
    check_feasible(*mine, sparse, n, k, cap);
    CHECK(mine->total_cost == double(sparse_oracle.cost));
  }
}

TEST_CASE("balanced assignment: near-optimal on non-integer costs (Boost on the rounded matrix)")
{
  // Double costs: the optimum of the 1e9-rounded matrix bounds ours within N * 0.5e-9 either way.
  Rng rng(13, "test.assignment.double");
  for (int t = 0; t < 20; ++t) {
    const int n = 50 + int(rng.below(150)), k = 2 + int(rng.below(15));
    std::vector<double> cost(size_t(n) * size_t(k));
    std::vector<long> icost(cost.size());
    for (size_t e = 0; e < cost.size(); ++e) {
      cost[e]  = 2.0 * rng.uniform01();
      icost[e] = std::lround(cost[e] * 1e9);
    }
    const std::vector<int> cap(size_t(k), balanced_capacity(n, k));
    const auto mine     = balanced_assignment(cost, n, k);
    const double oracle = double(boost_min_cost_flow(icost, n, k, cap).cost) * 1e-9;
    CHECK(std::abs(mine.total_cost - oracle) <= 1e-9 * n);
  }
}

namespace {

// Every feasible assignment, enumerated: the optimum, how many assignments reach it (integer costs:
// exactly) and the least cost of any other assignment. +infinity entries are not allowed.
struct Enumerated {
  double best   = std::numeric_limits<double>::infinity();
  int at_best   = 0;
  double second = std::numeric_limits<double>::infinity();
};

Enumerated enumerate(const std::vector<double>& cost, int n, int k, const std::vector<int>& cap)
{
  Enumerated e;
  std::vector<int> size(size_t(k), 0);
  std::function<void(int, double)> rec = [&](int i, double acc) {
    if (i == n) {
      if (acc < e.best) {
        e.second  = e.best;
        e.best    = acc;
        e.at_best = 1;
      } else if (acc == e.best) {
        ++e.at_best;
      } else {
        e.second = std::min(e.second, acc);
      }
      return;
    }
    for (int c = 0; c < k; ++c) {
      const double v = cost[size_t(i) * size_t(k) + size_t(c)];
      if (size[size_t(c)] == cap[size_t(c)] || std::isinf(v))
        continue;
      ++size[size_t(c)];
      rec(i + 1, acc + v);
      --size[size_t(c)];
    }
  };
  rec(0, 0.0);
  return e;
}

}  // namespace

TEST_CASE("balanced assignment: is_unique_optimum agrees with enumeration on 400 tiny instances")
{
  Rng rng(31, "test.assignment.unique");
  int unique = 0, tied = 0;
  for (int t = 0; t < 400; ++t) {
    const int n = 1 + int(rng.below(6));
    const int k = 1 + int(rng.below(4));
    // Integer costs (many ties: unique means every other assignment costs at least 1 more) or
    // doubles. The margin is per move of a point; a cycle moves at most k + 1 points.
    const bool integer = t % 2 == 0;
    std::vector<double> cost(size_t(n) * size_t(k));
    for (auto& c : cost)
      c = integer ? double(rng.below(3)) : 2.0 * rng.uniform01();
    const auto cap      = random_capacities(rng, n, k, t % 3);
    const double margin = 1e-3;
    const auto a        = balanced_assignment(cost, n, k, cap);
    const Enumerated e  = enumerate(cost, n, k, cap);
    CAPTURE(t);
    const bool expect = e.at_best == 1 && e.second >= e.best + margin * (k + 1);
    if (expect || e.at_best > 1)
      CHECK(is_unique_optimum(cost, n, k, cap, a.cluster, margin) == expect);
    unique += expect;
    tied += !expect;
    // Any other assignment that fits is not the unique optimum when the solver's is.
    std::vector<int> other                = a.cluster;
    other[size_t(rng.below(uint64_t(n)))] = int(rng.below(uint64_t(k)));
    if (other != a.cluster && expect)
      CHECK_FALSE(is_unique_optimum(cost, n, k, cap, other, margin));
  }
  MESSAGE(unique << " unique optima, " << tied << " ties");
  CHECK(unique > 100);
  CHECK(tied > 50);
  // Ties the tests above may miss: identical rows in two clusters, and zero rows with room in two.
  const std::vector<double> twins = {0.25, 0.75, 0.25, 0.75};
  CHECK_FALSE(is_unique_optimum(twins, 2, 2, std::vector<int>{1, 1}, std::vector<int>{0, 1}, 1e-9));
  const std::vector<double> flat = {1, 1, 1, 1, 1, 1};
  CHECK_FALSE(is_unique_optimum(flat, 2, 3, std::vector<int>{1, 1, 1}, std::vector<int>{0, 1}, 1e-9));
  CHECK(is_unique_optimum(std::vector<double>{0, 1, 1, 0}, 2, 2, std::vector<int>{1, 1}, std::vector<int>{0, 1}, 1e-9));
  CHECK_FALSE(is_unique_optimum(std::vector<double>{0, 1, 1, 0}, 2, 2, std::vector<int>{1, 1}, std::vector<int>{0, 0},
                                1e-9));  // over capacity
  CHECK_THROWS_AS(is_unique_optimum(twins, 2, 2, std::vector<int>{1, 1}, std::vector<int>{0, 2}, 1e-9),
                  std::invalid_argument);
}

TEST_CASE("balanced assignment: the sparse solver reaches the optimum over the allowed pairs")
{
  Rng rng(32, "test.assignment.sparse");
  const double inf = std::numeric_limits<double>::infinity();
  int infeasible   = 0;
  for (int t = 0; t < 400; ++t) {
    const int n = 1 + int(rng.below(6));
    const int k = 1 + int(rng.below(4));
    std::vector<double> cost(size_t(n) * size_t(k));
    for (auto& c : cost)
      c = rng.below(3) == 0 ? inf : (t % 2 ? double(rng.below(4)) : 2.0 * rng.uniform01());
    const auto cap     = random_capacities(rng, n, k, t % 3);
    const auto a       = balanced_assignment_allowed(cost, n, k, cap);
    const Enumerated e = enumerate(cost, n, k, cap);
    CAPTURE(t);
    REQUIRE(a.has_value() == (e.best < inf));
    if (!a) {
      ++infeasible;
      continue;
    }
    check_feasible(*a, cost, n, k, cap);
    CHECK(a->total_cost == doctest::Approx(e.best).epsilon(1e-12));
  }
  CHECK(infeasible > 20);
  // With every pair allowed it is the dense solver, tie rule included.
  for (int t = 0; t < 50; ++t) {
    std::vector<double> cost(size_t(12) * 4);
    for (auto& c : cost)
      c = double(rng.below(3));
    const auto cap = random_capacities(rng, 12, 4, 0);
    CHECK(balanced_assignment_allowed(cost, 12, 4, cap)->cluster == balanced_assignment(cost, 12, 4, cap).cluster);
  }
}

TEST_CASE("balanced assignment: the sparse solver given its allowed lists returns what it finds alone")
{
  // The lists name each point's finite entries: the same instance, so the same assignment, duals and
  // cost bit for bit (the solver reads the same pairs in the same order). Sizes as the K-means step
  // hands it: a few allowed clusters a point, some points with every cluster (zero rows).
  Rng rng(35, "test.assignment.lists");
  const double inf = std::numeric_limits<double>::infinity();
  int solved = 0, infeasible = 0;
  for (int t = 0; t < 60; ++t) {
    const int n = 1 + int(rng.below(400)), k = 1 + int(rng.below(40));
    std::vector<double> cost(size_t(n) * size_t(k));
    AllowedLists lists;
    for (int i = 0; i < n; ++i) {
      const bool all = rng.below(20) == 0;
      for (int c = 0; c < k; ++c) {
        const bool allowed                      = all || rng.below(uint64_t(t % 3 == 0 ? 8 : 3)) == 0;
        cost[size_t(i) * size_t(k) + size_t(c)] = allowed ? (t % 2 ? double(rng.below(5)) : rng.uniform01()) : inf;
        if (allowed)
          lists.allowed.push_back(c);
      }
      lists.first.push_back(int(lists.allowed.size()));
    }
    // The lists alone, with their costs (what the K-means step hands): no matrix at all.
    const AllowedLists priced = priced_lists(lists, cost, n, k);
    const auto cap            = random_capacities(rng, n, k, t % 3);
    const auto alone          = balanced_assignment_allowed(cost, n, k, cap);
    const auto given          = balanced_assignment_allowed(cost, n, k, cap, lists);
    const auto bare           = balanced_assignment_lists(n, k, cap, priced);
    CAPTURE(t);
    REQUIRE(alone.has_value() == given.has_value());
    REQUIRE(alone.has_value() == bare.has_value());
    if (!alone) {
      ++infeasible;
      continue;
    }
    ++solved;
    CHECK(given->cluster == alone->cluster);
    CHECK(given->duals == alone->duals);
    CHECK(given->total_cost == alone->total_cost);
    CHECK(bare->cluster == alone->cluster);
    CHECK(bare->duals == alone->duals);
    CHECK(bare->total_cost == alone->total_cost);
  }
  CHECK(solved > 20);
  CHECK(infeasible > 5);

  // Malformed lists are refused.
  const std::vector<double> cost = {0, inf, 1, 2};
  const std::vector<int> cap     = {1, 1};
  auto refused                   = [&](std::vector<int> first, std::vector<int> allowed) {
    AllowedLists l;
    l.first   = std::move(first);
    l.allowed = std::move(allowed);
    CHECK_THROWS_AS(balanced_assignment_allowed(cost, 2, 2, cap, l), std::invalid_argument);
  };
  refused({0, 1}, {0});           // one offset short
  refused({1, 1, 3}, {0, 0, 1});  // does not start at 0
  refused({0, 1, 4}, {0, 0, 1});  // the last offset is past the list's end
  refused({0, 2, 1}, {0, 1});     // offsets decrease
  refused({0, 5, 3}, {0, 0, 1});  // an offset past the list
  refused({0, 1, 3}, {0, 1, 1});  // not increasing within a point
  refused({0, 1, 3}, {0, 0, 2});  // cluster out of range
  AllowedLists ok;
  ok.first     = {0, 1, 3};
  ok.allowed   = {0, 0, 1};
  const auto a = balanced_assignment_allowed(cost, 2, 2, cap, ok);
  REQUIRE(a.has_value());
  CHECK(a->cluster == std::vector<int>{0, 1});
  ok.allowed.push_back(-7);  // past first[n]: not read
  CHECK(balanced_assignment_allowed(cost, 2, 2, cap, ok)->cluster == a->cluster);

  // Lists alone: a cost for every allowed pair, each finite; duals, when given, one per cluster.
  ok.allowed.pop_back();
  ok.cost = {0, 1};
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, cap, ok), std::invalid_argument);  // one cost short
  ok.cost = {0, 1, inf};
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, cap, ok), std::invalid_argument);
  ok.cost = {0, 1, std::nan("")};
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, cap, ok), std::invalid_argument);
  ok.cost = {0, 1, 2};
  CHECK(balanced_assignment_lists(2, 2, cap, ok)->cluster == a->cluster);
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, cap, ok, std::vector<double>{0}), std::invalid_argument);
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, std::vector<int>{1}, ok), std::invalid_argument);
}

TEST_CASE("balanced assignment: the warm-started sparse solver reaches the cold solver's optimum")
{
  // Integer costs, so optima compare exactly. Warm duals as the K-means step hands them: the cold
  // duals of a perturbed copy of the instance (the previous iteration's), or random ones. Where the
  // cold optimum is unique (every other assignment at least 1 dearer), the warm one is the same.
  Rng rng(36, "test.assignment.warm");
  const double inf = std::numeric_limits<double>::infinity();
  int solved = 0, infeasible = 0, unique = 0;
  for (int t = 0; t < 120; ++t) {
    const int n = 1 + int(rng.below(300)), k = 1 + int(rng.below(40));
    std::vector<double> cost(size_t(n) * size_t(k)), near(cost.size());
    AllowedLists lists;
    for (int i = 0; i < n; ++i) {
      const bool all = rng.below(10) == 0;
      for (int c = 0; c < k; ++c) {
        const bool allowed = all || t % 4 == 0 || rng.below(3) == 0;
        const size_t e     = size_t(i) * size_t(k) + size_t(c);
        cost[e]            = allowed ? double(rng.below(t % 2 ? 5 : 1000)) : inf;
        near[e]            = allowed ? cost[e] + double(rng.below(3)) : inf;
        if (allowed)
          lists.allowed.push_back(c);
      }
      lists.first.push_back(int(lists.allowed.size()));
    }
    const auto cap  = random_capacities(rng, n, k, t % 3);
    const auto cold = balanced_assignment_allowed(cost, n, k, cap, lists);
    std::vector<double> warm(static_cast<size_t>(k));
    if (t % 3 == 0) {
      for (double& w : warm)
        w = double(rng.below(2000)) - 1000.0;
    } else if (const auto before = balanced_assignment_allowed(near, n, k, cap, lists)) {
      warm = before->duals;
    }
    const auto hot = balanced_assignment_lists(n, k, cap, priced_lists(lists, cost, n, k), warm);
    CAPTURE(t);
    REQUIRE(cold.has_value() == hot.has_value());
    if (!cold) {
      ++infeasible;
      continue;
    }
    ++solved;
    CHECK(hot->total_cost == cold->total_cost);
    std::vector<int> size(size_t(k), 0);
    for (int i = 0; i < n; ++i) {
      const int c = hot->cluster[size_t(i)];
      REQUIRE(c >= 0);
      REQUIRE(c < k);
      CHECK(cost[size_t(i) * size_t(k) + size_t(c)] < inf);
      ++size[size_t(c)];
    }
    for (int c = 0; c < k; ++c)
      CHECK(size[size_t(c)] <= cap[size_t(c)]);
    if (is_unique_optimum(cost, n, k, cap, cold->cluster, 0.5)) {
      ++unique;
      CHECK(hot->cluster == cold->cluster);
    }
  }
  CHECK(solved > 40);
  CHECK(infeasible > 5);
  CHECK(unique > 10);

  const std::vector<double> cost = {0, 1, 1, 0};
  AllowedLists all;
  all.first                  = {0, 2, 4};
  all.allowed                = {0, 1, 0, 1};
  all.cost                   = cost;
  const std::vector<int> cap = {1, 1};
  CHECK(balanced_assignment_lists(2, 2, cap, all, std::vector<double>{5, -3})->cluster == std::vector<int>{0, 1});
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, cap, all, std::vector<double>{0}), std::invalid_argument);
  CHECK_THROWS_AS(balanced_assignment_lists(2, 2, cap, all, std::vector<double>{0, inf}), std::invalid_argument);
}
