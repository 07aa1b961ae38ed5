// ELDR's clustering: the exact balanced assignment (docs/design.md section 4: ~1-20 ms at N = 1000-2000,
// K = 16) and the balanced spherical K-means fit of 1000 calibration signatures of Qwen3-30B-A3B's
// shape (48 layers x 128 experts = 6144 dimensions, K = 16), the K-means share of the offline-fit
// budget (IDF + layer mask + K-means of 1000 requests: 0.5 s in the ELDR issue, 1 s in docs/design.md).
#include "sim/common/rng.hpp"
#include "sim/routing/eldr/balanced_assignment.hpp"
#include "sim/routing/eldr/balanced_kmeans.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace eldr::bench {
namespace {

double gaussian(Rng& rng)
{
  const double u = 1.0 - rng.uniform01(), v = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

// Cosine distances of N noisy points to K centroids, the matrix one balanced K-means iteration
// solves: points of 8 latent kinds (so the caps bind: 16 clusters share 8 kinds unevenly).
std::vector<double> clustered_costs(int n, int k)
{
  Rng rng(1, "bench.kmeans.costs");
  const int d = 64;
  auto unit   = [&](std::vector<double> v) {
    double n2 = 0;
    for (double x : v)
      n2 += x * x;
    for (double& x : v)
      x /= std::sqrt(n2);
    return v;
  };
  std::vector<std::vector<double>> kinds, cents;
  for (int q = 0; q < 8; ++q) {
    std::vector<double> v(static_cast<size_t>(d));
    for (double& x : v)
      x = gaussian(rng);
    kinds.push_back(unit(v));
  }
  for (int q = 0; q < k; ++q) {
    std::vector<double> v = kinds[size_t(q % 8)];
    for (double& x : v)
      x += 0.15 * gaussian(rng);
    cents.push_back(unit(v));
  }
  std::vector<double> cost(size_t(n) * size_t(k));
  for (int i = 0; i < n; ++i) {
    std::vector<double> x = kinds[size_t(rng.below(i % 3 ? 3 : 8))];  // skewed: kinds 0-2 dominate
    for (double& v : x)
      v += 0.15 * gaussian(rng);
    x = unit(x);
    for (int q = 0; q < k; ++q) {
      double s = 0;
      for (int j = 0; j < d; ++j)
        s += x[size_t(j)] * cents[size_t(q)][size_t(j)];
      cost[size_t(i) * size_t(k) + size_t(q)] = 1.0 - s;
    }
  }
  return cost;
}

// Uniform random costs in [0, 2]: no structure, the most augmenting work per point.
std::vector<double> uniform_costs(int n, int k)
{
  Rng rng(2, "bench.kmeans.uniform");
  std::vector<double> cost(size_t(n) * size_t(k));
  for (double& c : cost)
    c = 2.0 * rng.uniform01();
  return cost;
}

void BM_BalancedAssignment(benchmark::State& state, bool clustered)
{
  const int n = int(state.range(0)), k = int(state.range(1));
  const auto cost = clustered ? clustered_costs(n, k) : uniform_costs(n, k);
  for (auto _ : state) {
    auto a = balanced_assignment(cost, n, k);
    benchmark::DoNotOptimize(a.total_cost);
  }
}
BENCHMARK_CAPTURE(BM_BalancedAssignment, clustered, true)
    ->ArgNames({"N", "K"})
    ->Args({1000, 16})
    ->Args({2000, 16})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BalancedAssignment, uniform, false)
    ->ArgNames({"N", "K"})
    ->Args({1000, 16})
    ->Args({2000, 16})
    ->Unit(benchmark::kMillisecond);

// is_unique_optimum on a clustered instance's optimum: the balanced K-means step's proof that the
// assignment it found on bounds is the only optimum. At K = 256 (a 16x cluster's window of 8000
// signatures) its O(N K) pass over the costs is most of it; the check succeeds (no negative cycle), so
// Bellman-Ford runs to the end.
void BM_IsUniqueOptimum(benchmark::State& state)
{
  const int n = int(state.range(0)), k = int(state.range(1));
  const auto cost            = clustered_costs(n, k);
  const BalancedAssignment a = balanced_assignment(cost, n, k);
  const std::vector<int> caps(size_t(k), balanced_capacity(n, k));
  for (auto _ : state)
    benchmark::DoNotOptimize(is_unique_optimum(cost, n, k, caps, a.cluster, 1e-9));
}
BENCHMARK(BM_IsUniqueOptimum)->ArgNames({"N", "K"})->Args({2000, 64})->Args({8000, 256})->Unit(benchmark::kMillisecond);

// n counts x IDF signatures of `layers` x 128 experts, built like ELDR's: `domains` task domains with
// their own per-layer expert popularity, each request a prompt of 32-512 tokens x top-8 with its own
// tilt of the popularity; counts ~ Poisson-like around length x 8 x p; IDF over the set; L2.
DenseMatrix make_signatures(int n, int layers, int domains)
{
  const int experts = 128, d = layers * experts;
  Rng rng(3, "bench.kmeans.signatures");
  std::vector<double> profile(size_t(domains) * size_t(d));
  for (double& p : profile)
    p = std::exp(1.5 * gaussian(rng));
  DenseMatrix counts(n, d);
  std::vector<double> p(static_cast<size_t>(experts));
  for (int i = 0; i < n; ++i) {
    const double tokens = double(32 + rng.below(481)) * 8;
    const double* prof  = profile.data() + size_t(i % domains) * size_t(d);
    for (int l = 0; l < layers; ++l) {
      double total = 0;
      for (int e = 0; e < experts; ++e)
        total += p[size_t(e)] = prof[l * experts + e] * std::exp(0.7 * gaussian(rng));
      for (int e = 0; e < experts; ++e) {
        const double lambda = tokens * p[size_t(e)] / total;
        counts.row(i)[size_t(l * experts + e)] =
            float(std::max(0.0, std::round(lambda + std::sqrt(lambda) * gaussian(rng))));
      }
    }
  }
  std::vector<int> df(size_t(d), 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j)
      df[size_t(j)] += counts.row(i)[size_t(j)] > 0;
  for (int i = 0; i < n; ++i) {
    double n2 = 0;
    for (int j = 0; j < d; ++j) {
      float& v = counts.row(i)[size_t(j)];
      v        = float(v * std::log((n + 1.0) / (df[size_t(j)] + 1.0)));
      n2 += double(v) * v;
    }
    for (float& v : counts.row(i))
      v = float(v / std::sqrt(n2));
  }
  return counts;
}

// 1000 of Qwen3-30B-A3B's full shape (48 layers), 4 domains.
const DenseMatrix& signatures()
{
  static const DenseMatrix m = make_signatures(1000, 48, 4);
  return m;
}

double nonzero_share(const DenseMatrix& m)
{
  size_t nz = 0;
  for (float v : m.values)
    nz += v != 0.0f;
  return double(nz) / double(m.values.size());
}

void BM_KMeansFit(benchmark::State& state, KMeansVariant variant)
{
  const DenseMatrix& x = signatures();
  const int k          = int(state.range(0));
  KMeansResult r;
  for (auto _ : state) {
    r = fit_spherical_kmeans(x, k, {.variant = variant, .seed = 1});
    benchmark::DoNotOptimize(r.objective);
  }
  state.counters["iterations"] = r.iterations;
  state.counters["converged"]  = r.converged;
  state.counters["objective"]  = r.objective;
  state.counters["nonzero"]    = nonzero_share(x);
}
BENCHMARK_CAPTURE(BM_KMeansFit, balanced, KMeansVariant::balanced)
    ->ArgName("K")
    ->Arg(16)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KMeansFit, vanilla, KMeansVariant::vanilla)->ArgName("K")->Arg(16)->Unit(benchmark::kMillisecond);

// The online refit's unit of work: a window of 500 signatures (5 s at 100 req/s), warm-started from
// the offline centroids, then matched back to the workers.
void BM_KMeansWarmRefit(benchmark::State& state)
{
  const DenseMatrix& x = signatures();
  const int n          = int(state.range(0));
  const auto offline   = fit_spherical_kmeans(x, 16);
  const DenseMatrixView window(x.values.data() + size_t(x.rows - n) * size_t(x.cols), n, x.cols);
  KMeansResult r;
  for (auto _ : state) {
    r          = fit_spherical_kmeans_warm(window, offline.centroids);
    auto slots = match_centroids(offline.centroids, r.centroids);
    benchmark::DoNotOptimize(slots.data());
  }
  state.counters["iterations"] = r.iterations;
}
BENCHMARK(BM_KMeansWarmRefit)->ArgName("window")->Arg(500)->Unit(benchmark::kMillisecond);

// The online refit of a 4x cluster (64 decode workers, 400 req/s: a 2000-signature window, 400 new
// per refit, 8 mask layers): five successive refits sliding over a stream, each warm-started from the
// last one's centroids, 3 iterations. bounds:0 computes every dot and solves on every cost; bounds:1
// (the default) computes the dots that can matter and takes the shared points' over from the last
// refit. Both give the same centroids.
void BM_KMeansRefitWindow(benchmark::State& state)
{
  static const DenseMatrix stream = make_signatures(4000, 8, 24);
  const int k = 64, window = 2000, step = 400, d = stream.cols;
  KMeansOptions o;
  o.max_iterations = 3;
  o.objective      = false;
  o.bounds         = state.range(0) != 0;
  const DenseMatrix start =
      fit_spherical_kmeans(DenseMatrixView(stream.values.data(), window, d), k, {.bounds = false}).centroids;
  for (auto _ : state) {
    DenseMatrix c = start;
    WindowCarry carry;
    for (int first = step; first + window <= stream.rows; first += step) {
      carry.first  = first;
      const auto r = fit_spherical_kmeans_warm(
          DenseMatrixView(stream.values.data() + size_t(first) * size_t(d), window, d), c, o, &carry);
      const auto slot = match_centroids(c, r.centroids);
      for (int j = 0; j < k; ++j)
        std::copy_n(r.centroids.row(j).data(), d, c.row(slot[size_t(j)]).data());
      carry.reorder(slot);
    }
    benchmark::DoNotOptimize(c.values.data());
  }
}
BENCHMARK(BM_KMeansRefitWindow)->ArgName("bounds")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eldr::bench
