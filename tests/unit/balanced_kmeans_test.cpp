// Spherical K-means (sim/routing/eldr/balanced_kmeans.hpp): recovery of separated clusters, balance,
// the vanilla ablation, determinism, warm start, centroid matching, the dot kernels, edge cases.
#include "sim/common/rng.hpp"
#include "sim/routing/eldr/balanced_assignment.hpp"
#include "sim/routing/eldr/balanced_kmeans.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace eldr;

namespace {

double gaussian(Rng& rng)
{
  // Box-Muller; 1 - u keeps the log finite.
  const double u = 1.0 - rng.uniform01(), v = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

void normalise(std::span<float> x)
{
  double n2 = 0;
  for (float v : x)
    n2 += double(v) * double(v);
  const double inv = 1.0 / std::sqrt(n2);
  for (float& v : x)
    v = float(double(v) * inv);
}

DenseMatrix random_directions(Rng& rng, int k, int d)
{
  DenseMatrix m(k, d);
  for (int q = 0; q < k; ++q) {
    for (float& v : m.row(q))
      v = float(gaussian(rng));
    normalise(m.row(q));
  }
  return m;
}

struct Labelled {
  DenseMatrix points;
  std::vector<int> label;
};

// sizes[c] noisy unit vectors around direction c; `noise` is the per-coordinate deviation relative
// to a coordinate of a unit vector (1/sqrt(d)). Points are interleaved, not grouped by label.
Labelled clustered(Rng& rng, const DenseMatrix& dirs, const std::vector<int>& sizes, double noise)
{
  const int d = dirs.cols;
  std::vector<int> label;
  for (size_t c = 0; c < sizes.size(); ++c)
    label.insert(label.end(), size_t(sizes[c]), int(c));
  for (size_t i = label.size(); i > 1; --i)
    std::swap(label[i - 1], label[size_t(rng.below(i))]);
  Labelled out{DenseMatrix(int(label.size()), d), label};
  for (int i = 0; i < out.points.rows; ++i) {
    auto row = out.points.row(i);
    auto dir = dirs.row(label[size_t(i)]);
    for (int j = 0; j < d; ++j)
      row[size_t(j)] = float(dir[size_t(j)] + noise / std::sqrt(double(d)) * gaussian(rng));
    normalise(row);
  }
  return out;
}

std::vector<int> cluster_sizes(const std::vector<int>& assignment, int k)
{
  std::vector<int> s(size_t(k), 0);
  for (int a : assignment)
    ++s[size_t(a)];
  return s;
}

// Fraction of points whose cluster's majority label is their own label.
double purity(const std::vector<int>& assignment, const std::vector<int>& label, int k)
{
  std::vector<std::map<int, int>> counts(static_cast<size_t>(k));
  for (size_t i = 0; i < label.size(); ++i)
    ++counts[size_t(assignment[i])][label[i]];
  int agree = 0;
  for (const auto& c : counts) {
    int best = 0;
    for (const auto& [l, n] : c)
      best = std::max(best, n);
    agree += best;
  }
  return double(agree) / double(label.size());
}

double dot(std::span<const float> a, std::span<const float> b)
{
  double s = 0;
  for (size_t j = 0; j < a.size(); ++j)
    s += double(a[j]) * double(b[j]);
  return s;
}

void check_unit_rows(const DenseMatrix& m)
{
  for (int q = 0; q < m.rows; ++q)
    CHECK(std::sqrt(dot(m.row(q), m.row(q))) == doctest::Approx(1.0).epsilon(1e-5));
}

}  // namespace

TEST_CASE("kmeans: balanced recovers 16 well-separated clusters exactly, 60 points each")
{
  Rng rng(21, "test.kmeans.separated");
  const DenseMatrix dirs = random_directions(rng, 16, 64);
  const auto data        = clustered(rng, dirs, std::vector<int>(16, 60), 0.5);
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    CAPTURE(seed);
    const auto r = fit_spherical_kmeans(data.points, 16, {.seed = seed});
    CHECK(r.converged);
    CHECK(r.iterations <= 10);
    CHECK(purity(r.assignment, data.label, 16) == 1.0);
    CHECK(cluster_sizes(r.assignment, 16) == std::vector<int>(16, 60));
    check_unit_rows(r.centroids);
    // Each centroid lies close to its cluster's true direction.
    for (int q = 0; q < 16; ++q) {
      const int l = data.label[size_t(std::find(r.assignment.begin(), r.assignment.end(), q) - r.assignment.begin())];
      CHECK(dot(r.centroids.row(q), dirs.row(l)) > 0.95);
    }
    // The reported objective is the total cosine distance of what is returned.
    double obj = 0;
    for (int i = 0; i < data.points.rows; ++i)
      obj += 1.0 - dot(data.points.row(i), r.centroids.row(r.assignment[size_t(i)]));
    CHECK(r.objective == doctest::Approx(obj).epsilon(1e-5));
  }
}

TEST_CASE("kmeans: every balanced cluster holds at most ceil(N/K) points")
{
  Rng rng(22, "test.kmeans.caps");
  for (int t = 0; t < 12; ++t) {
    const int k      = 2 + int(rng.below(15));
    const int true_k = 1 + int(rng.below(6));
    std::vector<int> sizes;
    for (int c = 0; c < true_k; ++c)
      sizes.push_back(1 + int(rng.below(80)));  // skewed, and N rarely a multiple of K
    const auto data = clustered(rng, random_directions(rng, true_k, 40), sizes, 1.0);
    const int n     = data.points.rows;
    const auto r    = fit_spherical_kmeans(data.points, k, {.seed = uint64_t(t)});
    const auto s    = cluster_sizes(r.assignment, k);
    CAPTURE(n);
    CAPTURE(k);
    CHECK(*std::max_element(s.begin(), s.end()) <= balanced_capacity(n, k));
  }
}

TEST_CASE("kmeans: vanilla follows a skewed set, balanced splits it evenly")
{
  Rng rng(23, "test.kmeans.skewed");
  const auto data = clustered(rng, random_directions(rng, 2, 32), {90, 10}, 0.3);
  const auto van  = fit_spherical_kmeans(data.points, 2, {.variant = KMeansVariant::vanilla});
  const auto bal  = fit_spherical_kmeans(data.points, 2, {.variant = KMeansVariant::balanced});
  auto vs         = cluster_sizes(van.assignment, 2);
  std::sort(vs.begin(), vs.end());
  CHECK(vs == std::vector<int>{10, 90});
  CHECK(purity(van.assignment, data.label, 2) == 1.0);
  CHECK(cluster_sizes(bal.assignment, 2) == std::vector<int>{50, 50});
  // Balance costs objective: the unconstrained fit is at least as tight.
  CHECK(van.objective < bal.objective);
}

TEST_CASE("kmeans: vanilla keeps the centroid of a cluster that empties")
{
  // Three identical points and K = 2: k-means++ must seed a duplicate, the argmax (lowest index on
  // ties) takes everything into cluster 0, and cluster 1 keeps its seed.
  DenseMatrix pts(3, 4);
  for (int i = 0; i < 3; ++i)
    pts.row(i)[1] = 1.0f;
  const auto r = fit_spherical_kmeans(pts, 2, {.variant = KMeansVariant::vanilla});
  CHECK(r.assignment == std::vector<int>{0, 0, 0});
  CHECK(r.centroids.row(1)[1] == 1.0f);
  CHECK(r.objective == doctest::Approx(0.0));
}

TEST_CASE("kmeans: deterministic for a seed")
{
  Rng rng(24, "test.kmeans.determinism");
  const auto data = clustered(rng, random_directions(rng, 8, 50), std::vector<int>(8, 25), 3.0);
  for (auto variant : {KMeansVariant::balanced, KMeansVariant::vanilla}) {
    const auto a = fit_spherical_kmeans(data.points, 8, {.variant = variant, .seed = 9});
    const auto b = fit_spherical_kmeans(data.points, 8, {.variant = variant, .seed = 9});
    CHECK(a.assignment == b.assignment);
    CHECK(a.centroids.values == b.centroids.values);  // bitwise
    CHECK(a.iterations == b.iterations);
    CHECK(a.objective == b.objective);
  }
  // A different seed seeds differently (the noisy data makes the fits differ somewhere).
  const auto a = fit_spherical_kmeans(data.points, 8, {.seed = 9});
  const auto c = fit_spherical_kmeans(data.points, 8, {.seed = 10});
  CHECK(a.centroids.values != c.centroids.values);
}

TEST_CASE("kmeans: max_iterations bounds the work, the result stays consistent")
{
  Rng rng(25, "test.kmeans.maxit");
  const auto data = clustered(rng, random_directions(rng, 6, 30), std::vector<int>(6, 30), 4.0);
  const auto r    = fit_spherical_kmeans(data.points, 6, {.max_iterations = 1});
  CHECK(r.iterations == 1);
  CHECK_FALSE(r.converged);
  double obj = 0;
  for (int i = 0; i < data.points.rows; ++i)
    obj += 1.0 - dot(data.points.row(i), r.centroids.row(r.assignment[size_t(i)]));
  CHECK(r.objective == doctest::Approx(obj).epsilon(1e-5));
  // More iterations never end worse than one.
  CHECK(fit_spherical_kmeans(data.points, 6).objective <= r.objective + 1e-9);
}

TEST_CASE("kmeans: warm start keeps the slots of the given centroids")
{
  Rng rng(26, "test.kmeans.warm");
  const DenseMatrix dirs = random_directions(rng, 8, 48);
  const auto data        = clustered(rng, dirs, std::vector<int>(8, 30), 0.5);
  // Start from the true directions in a shuffled order, slightly off.
  const std::vector<int> perm = {3, 7, 0, 5, 1, 6, 2, 4};
  DenseMatrix init(8, 48);
  for (int q = 0; q < 8; ++q) {
    for (int j = 0; j < 48; ++j)
      init.row(q)[size_t(j)] = dirs.row(perm[size_t(q)])[size_t(j)] + 0.05f * float(gaussian(rng));
    normalise(init.row(q));
  }
  const auto r = fit_spherical_kmeans_warm(data.points, init);
  CHECK(r.converged);
  for (int i = 0; i < data.points.rows; ++i)
    CHECK(perm[size_t(r.assignment[size_t(i)])] == data.label[size_t(i)]);

  // Restarted from its own result, a converged fit stays put: one assignment step to produce the
  // assignment, a second to see that it did not change.
  const auto again = fit_spherical_kmeans_warm(data.points, r.centroids);
  CHECK(again.iterations == 2);
  CHECK(again.assignment == r.assignment);
  CHECK(again.objective == doctest::Approx(r.objective).epsilon(1e-6));

  // Without the objective (the online refit), stopped by max_iterations: the same fit, objective 0.
  KMeansOptions capped;
  capped.max_iterations = 1;
  const auto with       = fit_spherical_kmeans_warm(data.points, init, capped);
  capped.objective      = false;
  const auto without    = fit_spherical_kmeans_warm(data.points, init, capped);
  CHECK(without.objective == 0);
  CHECK(without.assignment == with.assignment);
  CHECK(without.centroids.values == with.centroids.values);

  // Initial centroids are normalised, but must be non-zero and of the points' dimension.
  DenseMatrix bad(8, 48);
  CHECK_THROWS_AS(fit_spherical_kmeans_warm(data.points, bad), std::invalid_argument);
  CHECK_THROWS_AS(fit_spherical_kmeans_warm(data.points, DenseMatrix(8, 47)), std::invalid_argument);
}

TEST_CASE("kmeans: match_centroids recovers a known permutation")
{
  Rng rng(27, "test.kmeans.match");
  const DenseMatrix old = random_directions(rng, 16, 32);
  std::vector<int> perm(16);
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = perm.size(); i > 1; --i)
    std::swap(perm[i - 1], perm[size_t(rng.below(i))]);
  // New centroid j is old centroid perm[j], drifted.
  DenseMatrix fresh(16, 32);
  for (int j = 0; j < 16; ++j) {
    for (int d = 0; d < 32; ++d)
      fresh.row(j)[size_t(d)] = old.row(perm[size_t(j)])[size_t(d)] + 0.1f * float(gaussian(rng)) / 5.6f;
    normalise(fresh.row(j));
  }
  CHECK(match_centroids(old, fresh) == perm);
  std::vector<int> id(16);
  std::iota(id.begin(), id.end(), 0);
  CHECK(match_centroids(old, old) == id);
  CHECK_THROWS_AS(match_centroids(old, DenseMatrix(15, 32)), std::invalid_argument);
}

TEST_CASE("kmeans: match_centroids maximises the total cosine, not each row greedily")
{
  // New centroid 0 is closest to old 0, but new 1 has nowhere else good to go: the best total is the
  // swap. Old: e0, e1. New 0 = (0.8, 0.6) (cos 0.8 / 0.6), new 1 = (1, 0) (cos 1 / 0).
  // Identity: 0.8 + 0 = 0.8; swap: 0.6 + 1 = 1.6.
  DenseMatrix old(2, 2), fresh(2, 2);
  old.row(0)[0]   = 1;
  old.row(1)[1]   = 1;
  fresh.row(0)[0] = 0.8f;
  fresh.row(0)[1] = 0.6f;
  fresh.row(1)[0] = 1;
  CHECK(match_centroids(old, fresh) == std::vector<int>{1, 0});
}

TEST_CASE("kmeans: the AVX2, AVX-512 and portable dot kernels agree bit for bit")
{
  // AVX-512 (when the CPU has it) from 8 points and 4 centroids, in groups of 16 centroids.
  Rng rng(28, "test.kmeans.kernel");
  for (int d : {1, 7, 8, 13, 64, 6151}) {
    for (int n : {1, 2, 5, 8, 13}) {
      for (int k : {1, 3, 4, 9, 16, 21}) {
        DenseMatrix x(n, d), c(k, d);
        for (float& v : x.values)
          v = float(gaussian(rng));
        for (float& v : c.values)
          v = float(gaussian(rng));
        std::vector<float> a(size_t(n * k)), b(size_t(n * k));
        detail::dot_products(x, c, a, detail::DotKernel::best);
        detail::dot_products(x, c, b, detail::DotKernel::portable);
        CAPTURE(d);
        CHECK(a == b);
        for (int i = 0; i < n; ++i)
          for (int q = 0; q < k; ++q)
            CHECK(double(a[size_t(i * k + q)]) ==
                  doctest::Approx(dot(x.row(i), c.row(q))).epsilon(1e-4).scale(std::sqrt(double(d))));
      }
    }
  }
}

TEST_CASE("kmeans: edge cases")
{
  Rng rng(29, "test.kmeans.edges");
  SUBCASE("N < K: one point per cluster at most, empty clusters keep a (duplicate) seed")
  {
    const DenseMatrix pts = random_directions(rng, 3, 10);
    const auto r          = fit_spherical_kmeans(pts, 5);
    const auto s          = cluster_sizes(r.assignment, 5);
    CHECK(*std::max_element(s.begin(), s.end()) == 1);
    CHECK(r.centroids.rows == 5);
    check_unit_rows(r.centroids);
    CHECK(r.objective == doctest::Approx(0.0).epsilon(1e-6));
  }
  SUBCASE("N = K: every point its own cluster, centroid = the point")
  {
    const DenseMatrix pts = random_directions(rng, 6, 10);
    const auto r          = fit_spherical_kmeans(pts, 6);
    auto sorted           = r.assignment;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == std::vector<int>{0, 1, 2, 3, 4, 5});
    for (int i = 0; i < 6; ++i)
      CHECK(dot(pts.row(i), r.centroids.row(r.assignment[size_t(i)])) == doctest::Approx(1.0).epsilon(1e-6));
  }
  SUBCASE("duplicates: 40 copies of one vector split 10/10/10/10 with identical centroids")
  {
    DenseMatrix pts(40, 5);
    for (int i = 0; i < 40; ++i) {
      pts.row(i)[0] = 0.6f;
      pts.row(i)[3] = 0.8f;
    }
    const auto r = fit_spherical_kmeans(pts, 4);
    CHECK(r.converged);
    CHECK(cluster_sizes(r.assignment, 4) == std::vector<int>{10, 10, 10, 10});
    for (int q = 0; q < 4; ++q)
      CHECK(dot(r.centroids.row(q), pts.row(0)) == doctest::Approx(1.0).epsilon(1e-6));
  }
  SUBCASE("zero rows are handled: assigned within the caps, never seeds, no pull on centroids")
  {
    const DenseMatrix dirs = random_directions(rng, 2, 16);
    auto data              = clustered(rng, dirs, {20, 20}, 0.2);
    DenseMatrix pts(44, 16);
    std::copy(data.points.values.begin(), data.points.values.end(), pts.values.begin());  // rows 40..43 zero
    const auto with    = fit_spherical_kmeans(pts, 2);
    const auto without = fit_spherical_kmeans(data.points, 2);
    CHECK(*std::max_element(with.assignment.begin(), with.assignment.end()) <= 1);
    const auto s = cluster_sizes(with.assignment, 2);
    CHECK(s == std::vector<int>{22, 22});
    CHECK(purity(std::vector<int>(with.assignment.begin(), with.assignment.begin() + 40), data.label, 2) == 1.0);
    // The zero rows add exactly 1 each to the objective and nothing to the centroids.
    CHECK(with.objective == doctest::Approx(without.objective + 4.0).epsilon(1e-6));
    for (int q = 0; q < 2; ++q) {
      double best = -1;
      for (int p = 0; p < 2; ++p)
        best = std::max(best, dot(with.centroids.row(q), without.centroids.row(p)));
      CHECK(best == doctest::Approx(1.0).epsilon(1e-6));
    }
  }
  SUBCASE("rejected: all-zero input, wrong norms, NaN, no points, K <= 0, no iterations")
  {
    CHECK_THROWS_AS(fit_spherical_kmeans(DenseMatrix(5, 4), 2), std::invalid_argument);
    DenseMatrix pts = random_directions(rng, 5, 4);
    pts.row(2)[0] *= 2.0f;
    CHECK_THROWS_AS(fit_spherical_kmeans(pts, 2), std::invalid_argument);
    pts           = random_directions(rng, 5, 4);
    pts.row(1)[3] = std::nanf("");
    CHECK_THROWS_AS(fit_spherical_kmeans(pts, 2), std::invalid_argument);
    pts = random_directions(rng, 5, 4);
    CHECK_THROWS_AS(fit_spherical_kmeans(DenseMatrix(0, 4), 2), std::invalid_argument);
    CHECK_THROWS_AS(fit_spherical_kmeans(pts, 0), std::invalid_argument);
    CHECK_THROWS_AS(fit_spherical_kmeans(pts, 2, {.max_iterations = 0}), std::invalid_argument);
    CHECK_NOTHROW(fit_spherical_kmeans(pts, 2));
  }
}

namespace {

// The fit with bounds (the default) against the one computing every dot: the same in every output.
void check_same_fit(const KMeansResult& bounded, const KMeansResult& plain)
{
  CHECK(bounded.assignment == plain.assignment);
  CHECK(bounded.centroids.values == plain.centroids.values);
  CHECK(bounded.iterations == plain.iterations);
  CHECK(bounded.converged == plain.converged);
  CHECK(bounded.objective == plain.objective);
}

// Inputs for the comparisons: uniform directions, tight and loose clusters, duplicated rows (ties),
// zero rows, and N < K.
std::vector<DenseMatrix> comparison_inputs(Rng& rng, int k, int d)
{
  std::vector<DenseMatrix> out;
  out.push_back(random_directions(rng, 240, d));
  const DenseMatrix dirs = random_directions(rng, k, d);
  for (double noise : {0.3, 1.0, 3.0})
    out.push_back(clustered(rng, dirs, std::vector<int>(size_t(k), 20), noise).points);
  DenseMatrix dup = clustered(rng, dirs, std::vector<int>(size_t(k), 10), 1.0).points;
  for (int i = 1; i < dup.rows; i += 3)
    std::copy_n(dup.row(i - 1).data(), d, dup.row(i).data());
  out.push_back(dup);
  DenseMatrix zeros = clustered(rng, dirs, std::vector<int>(size_t(k), 10), 1.0).points;
  for (int i = 0; i < zeros.rows; i += 7)
    std::fill(zeros.row(i).begin(), zeros.row(i).end(), 0.0f);
  out.push_back(zeros);
  out.push_back(random_directions(rng, k / 2, d));
  return out;
}

}  // namespace

TEST_CASE("kmeans: the bounded fit equals the fit computing every dot")
{
  Rng rng(33, "test.kmeans.bounds");
  for (const int d : {13, 96}) {
    const int k = 8;
    for (const DenseMatrix& pts : comparison_inputs(rng, k, d)) {
      for (const auto variant : {KMeansVariant::balanced, KMeansVariant::vanilla}) {
        CAPTURE(d);
        CAPTURE(pts.rows);
        CAPTURE(int(variant));
        KMeansOptions o;
        o.variant           = variant;
        o.max_iterations    = 30;
        KMeansOptions plain = o;
        plain.bounds        = false;
        const auto cold     = fit_spherical_kmeans(pts, k, o);
        check_same_fit(cold, fit_spherical_kmeans(pts, k, plain));
        // Warm from perturbed centroids, capped at 3 iterations as the online refit is.
        DenseMatrix init = cold.centroids;
        for (float& v : init.values)
          v += 0.1f * float(gaussian(rng)) / std::sqrt(float(d));
        o.max_iterations = plain.max_iterations = 3;
        o.objective = plain.objective = false;
        check_same_fit(fit_spherical_kmeans_warm(pts, init, o), fit_spherical_kmeans_warm(pts, init, plain));
      }
    }
  }
}

TEST_CASE("kmeans: refits carried along a sliding window equal fresh refits")
{
  // A stream of signatures whose cluster directions drift, refitted every 40 points on the last 200,
  // as the online refit does (warm start, 3 iterations, centroids matched back to their slots): the
  // carried fits (the dots of the shared points taken over) return what fits computing every dot do.
  Rng rng(34, "test.kmeans.carry");
  const int k = 8, d = 64, window = 200, step = 40, total = 1200;
  DenseMatrix dirs = random_directions(rng, k, d);
  DenseMatrix stream(total, d);
  for (int i = 0; i < total; ++i) {
    if (i % 100 == 0)
      for (float& v : dirs.values)
        v += 0.2f * float(gaussian(rng)) / std::sqrt(float(d));
    const int c = int(rng.below(uint64_t(k)));
    auto row    = stream.row(i);
    if (i % 53 == 0)
      continue;  // a zero row now and then
    for (int j = 0; j < d; ++j)
      row[size_t(j)] = dirs.row(c)[size_t(j)] + float(gaussian(rng)) / std::sqrt(float(d));
    normalise(row);
    if (i % 29 == 0 && i > 0)
      std::copy_n(stream.row(i - 1).data(), d, row.data());  // duplicates: ties
  }
  for (const auto variant : {KMeansVariant::balanced, KMeansVariant::vanilla}) {
    CAPTURE(int(variant));
    KMeansOptions o;
    o.variant             = variant;
    o.max_iterations      = 3;
    o.objective           = false;
    KMeansOptions plain   = o;
    plain.bounds          = false;
    DenseMatrix centroids = fit_spherical_kmeans(DenseMatrixView(stream.values.data(), window, d), k, plain).centroids;
    WindowCarry carry, checked_carry;
    // The rows' checks made once each, as the online refit makes them, handed to the fits.
    std::vector<PointCheck> checks;
    for (int i = 0; i < total; ++i)
      checks.push_back(check_point(stream.row(i)));
    int refits = 0;
    for (int end = window + step; end <= total; end += step) {
      const int first = end - window;
      const DenseMatrixView pts(stream.values.data() + size_t(first) * size_t(d), window, d);
      carry.first         = first;
      checked_carry.first = first;
      const auto fresh    = fit_spherical_kmeans_warm(pts, centroids, plain);
      const auto with     = fit_spherical_kmeans_warm(pts, centroids, o, &carry);
      const auto checked =
          fit_spherical_kmeans_warm(pts, centroids, o, &checked_carry,
                                    std::span<const PointCheck>(checks).subspan(size_t(first), size_t(window)));
      CAPTURE(end);
      check_same_fit(with, fresh);
      check_same_fit(checked, fresh);
      CHECK(checked_carry.row_hash == carry.row_hash);
      const auto slot = match_centroids(centroids, fresh.centroids);
      for (int j = 0; j < k; ++j)
        std::copy_n(fresh.centroids.row(j).data(), d, centroids.row(slot[size_t(j)]).data());
      carry.reorder(slot);
      checked_carry.reorder(slot);
      ++refits;
    }
    CHECK(refits == 25);
  }
  SUBCASE("a carry whose rows changed (wrong ids) or whose centroids differ is not trusted")
  {
    KMeansOptions o;
    o.max_iterations    = 3;
    KMeansOptions plain = o;
    plain.bounds        = false;
    const DenseMatrixView a(stream.values.data(), window, d),
        b(stream.values.data() + size_t(step) * size_t(d), window, d);
    const DenseMatrix c0 = fit_spherical_kmeans(a, k, plain).centroids;
    WindowCarry carry;
    carry.first = 0;
    fit_spherical_kmeans_warm(a, c0, o, &carry);
    carry.first = 0;  // wrong: b starts at id `step`
    check_same_fit(fit_spherical_kmeans_warm(b, c0, o, &carry), fit_spherical_kmeans_warm(b, c0, plain));
    const DenseMatrix other = random_directions(rng, k, d);
    carry.first             = step;
    check_same_fit(fit_spherical_kmeans_warm(b, other, o, &carry), fit_spherical_kmeans_warm(b, other, plain));
    CHECK_THROWS_AS(carry.reorder(std::vector<int>{0, 1}), std::invalid_argument);
  }
  SUBCASE("a carry is taken over whatever window comes next: longer, shorter, earlier, disjoint")
  {
    // The carried arrays are reused in place when the window slides forward and copied otherwise.
    for (const auto variant : {KMeansVariant::balanced, KMeansVariant::vanilla}) {
      CAPTURE(int(variant));
      KMeansOptions o;
      o.variant            = variant;
      o.max_iterations     = 3;
      KMeansOptions plain  = o;
      plain.bounds         = false;
      const DenseMatrix c0 = fit_spherical_kmeans(DenseMatrixView(stream.values.data(), window, d), k, plain).centroids;
      WindowCarry carry;
      const std::vector<std::pair<int, int>> windows = {{40, 200}, {100, 300},  {120, 100}, {130, 100},
                                                        {0, 150},  {1000, 100}, {1010, 190}};
      for (const auto& [first, rows] : windows) {
        CAPTURE(first);
        const DenseMatrixView pts(stream.values.data() + size_t(first) * size_t(d), rows, d);
        carry.first = first;
        check_same_fit(fit_spherical_kmeans_warm(pts, c0, o, &carry), fit_spherical_kmeans_warm(pts, c0, plain));
        CHECK(carry.rows_first == first);
        CHECK(carry.sim.size() == size_t(rows) * size_t(k));
      }
    }
  }
}

TEST_CASE("spherical k-means: a point's check is the fit's: zero rows flagged, a wrong norm rejected, hashes by bits")
{
  std::vector<float> unit = {0.6f, 0.8f, 0.f}, zero(3, 0.f), longer = {0.6f, 0.8f, 0.1f};
  CHECK_FALSE(check_point(unit).zero);
  CHECK(check_point(zero).zero);
  CHECK_THROWS_AS(check_point(longer), std::invalid_argument);
  CHECK_THROWS_AS(check_point(std::span<const float>()), std::invalid_argument);
  std::vector<float> swapped = {0.8f, 0.6f, 0.f};
  CHECK(check_point(unit).hash == check_point(std::vector<float>(unit)).hash);
  CHECK(check_point(unit).hash != check_point(swapped).hash);
  // Handed to a fit: one check per point, and all-zero points still rejected as a whole.
  DenseMatrix pts(2, 3);
  std::copy(unit.begin(), unit.end(), pts.row(0).begin());
  std::copy(swapped.begin(), swapped.end(), pts.row(1).begin());
  const std::vector<PointCheck> checks = {check_point(pts.row(0)), check_point(pts.row(1))};
  CHECK_THROWS_AS(fit_spherical_kmeans_warm(pts, pts, {}, nullptr, std::span<const PointCheck>(checks).first(1)),
                  std::invalid_argument);
  const std::vector<PointCheck> zeros(2, PointCheck{true, 0});
  CHECK_THROWS_AS(fit_spherical_kmeans_warm(pts, pts, {}, nullptr, zeros), std::invalid_argument);
  CHECK(fit_spherical_kmeans_warm(pts, pts, {}, nullptr, checks).assignment == std::vector<int>{0, 1});
}
