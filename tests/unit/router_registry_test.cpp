// Decode routers (sim/routing): random, round_robin, jsq, p2c (built-in compositions) and the factory.
#include "sim/config/experiment.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "tests/support/router_workload.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

using namespace eldr;

namespace {

// A built-in router by name, with the run seed `seed`.
std::unique_ptr<DecodeRouter> built_in(const std::string& name, uint64_t seed = 0)
{
  return make_decode_router(name, RouterSetup{16, seed, &test::two_label_workload()});
}

DecodeLoadView view(const std::vector<int>& loads)
{
  return DecodeLoadView{std::span<const int>(loads)};
}

std::vector<int> draws(DecodeRouter& r, const std::vector<int>& loads, int n)
{
  Request req;
  std::vector<int> out;
  for (int i = 0; i < n; ++i)
    out.push_back(r.choose(req, view(loads)));
  return out;
}

// Pearson chi-square statistic of observed counts against a uniform expectation.
double chi_square_uniform(const std::vector<long>& counts)
{
  long n = 0;
  for (long c : counts)
    n += c;
  const double e = double(n) / double(counts.size());
  double x2      = 0;
  for (long c : counts)
    x2 += (double(c) - e) * (double(c) - e) / e;
  return x2;
}
}  // namespace

TEST_CASE("routers: round robin cycles 0..K-1 regardless of load")
{
  auto r_                = built_in("round_robin");
  DecodeRouter& r        = *r_;
  std::vector<int> loads = {9, 0, 5, 3, 7};
  auto got               = draws(r, loads, 23);
  for (int i = 0; i < 23; ++i)
    CHECK(got[size_t(i)] == i % 5);
  CHECK(r.name() == "round_robin");
}

TEST_CASE("routers: jsq picks a least-loaded worker")
{
  auto r_         = built_in("jsq", 1);
  DecodeRouter& r = *r_;
  Request req;
  CHECK(r.choose(req, view({3, 1, 4, 1, 5, 9, 2, 6})) != 0);
  for (int i = 0; i < 200; ++i) {
    int w = r.choose(req, view({3, 1, 4, 1, 5, 9, 2, 6}));
    CHECK((w == 1 || w == 3));
  }
  CHECK(r.choose(req, view({5, 5, 5, 0})) == 3);
  CHECK(r.choose(req, view({0, 5, 5, 5})) == 0);
  CHECK(r.choose(req, view({7})) == 0);
}

TEST_CASE("routers: jsq spreads ties uniformly")
{
  auto r_         = built_in("jsq", 42);
  DecodeRouter& r = *r_;
  // Workers 1, 4, 6 and 7 tie at the minimum; 40k draws.
  std::vector<int> loads = {2, 0, 3, 1, 0, 5, 0, 0};
  std::vector<long> counts(8, 0);
  for (int w : draws(r, loads, 40000))
    ++counts[size_t(w)];
  CHECK(counts[0] == 0);
  CHECK(counts[2] == 0);
  CHECK(counts[3] == 0);
  CHECK(counts[5] == 0);
  std::vector<long> tied = {counts[1], counts[4], counts[6], counts[7]};
  // 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
  CHECK(chi_square_uniform(tied) < 16.27);
  for (long c : tied)
    CHECK(std::abs(double(c) - 10000) < 500);

  // All tied: every worker is chosen, uniformly.
  std::vector<long> all(16, 0);
  for (int w : draws(r, std::vector<int>(16, 3), 32000))
    ++all[size_t(w)];
  // 15 degrees of freedom: P(chi2 > 37.70) = 0.001.
  CHECK(chi_square_uniform(all) < 37.70);
}

TEST_CASE("routers: p2c never picks the more loaded of its pair and never the strict maximum")
{
  auto r_         = built_in("p2c", 7);
  DecodeRouter& r = *r_;
  // Distinct loads: the choice is the less loaded of two distinct workers, so the most loaded worker
  // (index 3) can never win: whichever worker it is paired with is less loaded.
  std::vector<int> loads = {4, 1, 6, 1000, 2, 0, 3, 5};
  std::vector<long> counts(8, 0);
  for (int w : draws(r, loads, 80000))
    ++counts[size_t(w)];
  CHECK(counts[3] == 0);
  // Worker i wins exactly when it is drawn and its partner is more loaded. With distinct loads, rank
  // i (0 = least loaded) wins with probability 2 * (K - 1 - rank) / (K (K - 1)). K = 8 -> 56ths:
  // least loaded (worker 5) 14/56, worker 1: 12/56, worker 4: 10/56, worker 6: 8/56, worker 0: 6/56, ...
  const std::vector<int> rank_of = {4, 1, 6, 7, 2, 0, 3, 5};  // rank of each worker's load
  for (int w = 0; w < 8; ++w) {
    double p = 2.0 * (8 - 1 - rank_of[size_t(w)]) / 56.0;
    CAPTURE(w);
    CHECK(double(counts[size_t(w)]) / 80000 == doctest::Approx(p).epsilon(0.08));
  }

  // One hugely loaded worker among equals: it could only win a pair against a worker at least as
  // loaded, and since the two draws are distinct its partner is always another, less loaded worker.
  // So it is never chosen, unless it is the only worker (K = 1, below).
  std::vector<int> hot(16, 2);
  hot[5] = 1000;
  for (int w : draws(r, hot, 20000))
    CHECK(w != 5);
}

TEST_CASE("routers: p2c keeps the first draw on a tie and both draws are distinct workers")
{
  // With all loads equal p2c returns its first draw: uniform over all workers.
  auto r_         = built_in("p2c", 3);
  DecodeRouter& r = *r_;
  std::vector<long> counts(8, 0);
  for (int w : draws(r, std::vector<int>(8, 1), 40000))
    ++counts[size_t(w)];
  CHECK(chi_square_uniform(counts) < 24.32);  // 7 dof, p = 0.001

  // Two workers with distinct loads: the two draws must be the two workers, so the less loaded always wins
  // (a repeated draw of the loaded worker would return it).
  auto two_         = built_in("p2c", 9);
  DecodeRouter& two = *two_;
  for (int w : draws(two, {5, 1}, 2000))
    CHECK(w == 1);
  for (int w : draws(two, {0, 1}, 2000))
    CHECK(w == 0);
  auto one_         = built_in("p2c", 9);
  DecodeRouter& one = *one_;
  CHECK(draws(one, {4}, 10) == std::vector<int>(10, 0));
}

TEST_CASE("routers: random is roughly uniform and ignores load")
{
  auto r_         = built_in("random", 11);
  DecodeRouter& r = *r_;
  std::vector<int> loads(16, 0);
  loads[0] = 1000;
  std::vector<long> counts(16, 0);
  for (int w : draws(r, loads, 64000))
    ++counts[size_t(w)];
  CHECK(chi_square_uniform(counts) < 37.70);  // 15 dof, p = 0.001
  CHECK(counts[0] > 3500);                    // the loaded worker still gets its 1/16
}

TEST_CASE("routers: same seed gives the same sequence and different seeds differ")
{
  std::vector<int> loads = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (const std::string name : {"random", "jsq", "p2c"}) {
    CAPTURE(name);
    auto a  = make_decode_router(name, RouterSetup{16, 5, &test::two_label_workload()});
    auto b  = make_decode_router(name, RouterSetup{16, 5, &test::two_label_workload()});
    auto c  = make_decode_router(name, RouterSetup{16, 6, &test::two_label_workload()});
    auto sa = draws(*a, loads, 500);
    auto sb = draws(*b, loads, 500);
    auto sc = draws(*c, loads, 500);
    CHECK(sa == sb);
    CHECK(sa != sc);
  }
}

TEST_CASE("routers: the factory builds every listed router and rejects unknown names")
{
  for (const auto& name : decode_router_names()) {
    if (name == "eldr") {
      // ELDR fits on the experiment's calibration routing (tests/unit/eldr_router_test.cpp).
      CHECK_THROWS_AS(make_decode_router(name, RouterSetup{3, 1, &test::two_label_workload()}), std::invalid_argument);
      continue;
    }
    auto r = make_decode_router(name, RouterSetup{3, 1, &test::two_label_workload()});
    REQUIRE(r);
    CHECK(r->name() == name);
    // Every router returns a valid index.
    std::vector<int> loads = {3, 0, 2};
    for (int w : draws(*r, loads, 50))
      CHECK((w >= 0 && w < 3));
  }
  CHECK_THROWS_AS(make_decode_router("foo", RouterSetup{16, 1, nullptr}), std::invalid_argument);
  CHECK_THROWS_AS(make_decode_router("", RouterSetup{16, 1, nullptr}), std::invalid_argument);
  CHECK_THROWS_AS(make_decode_router("JSQ", RouterSetup{16, 1, nullptr}), std::invalid_argument);
}
