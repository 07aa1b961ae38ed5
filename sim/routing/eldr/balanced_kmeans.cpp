// Spherical K-means (balanced and vanilla), k-means++ seeding and centroid matching. The time goes
// into the N x K dot products (D up to ~6k), so they get a register-blocked AVX2/FMA kernel with a
// portable twin that computes bit-identical results.
#include "sim/routing/eldr/balanced_kmeans.hpp"

#include "sim/common/rng.hpp"
#include "sim/routing/eldr/balanced_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <immintrin.h>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace eldr {
namespace {

// ---------------------------------------------------------------------------------------------
// Dot products. Every dot is accumulated the same way in both kernels: 8 lanes of fused
// multiply-adds over the first floor(D/8)*8 coordinates, a fixed pairwise sum of the lanes, then
// fused multiply-adds over the tail. Only the blocking differs, and blocking does not change a dot.

inline float finish_dot(const float lanes[8], const float* x, const float* c, int from, int d)
{
  float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (int j = from; j < d; ++j)
    s = std::fma(x[j], c[j], s);
  return s;
}

// P points x C centroids per block: each loaded chunk of a point serves C centroids and each chunk
// of a centroid P points. 3 x 4 (12 accumulators, 3 point chunks, one centroid chunk at a time in
// 16 ymm registers) measured 3.2 ms for 1000 x 16 x 6144 against 4.5 ms for 2 x 4 or 4 x 4.
template <int P, int C> void block_portable(const float* const* x, const float* const* c, int d, float* out, size_t ldo)
{
  float acc[P][C][8] = {};
  const int d8       = d & ~7;
  for (int j = 0; j < d8; j += 8)
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < C; ++q)
        for (int l = 0; l < 8; ++l)
          acc[p][q][l] = std::fma(x[p][j + l], c[q][j + l], acc[p][q][l]);
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < C; ++q)
      out[size_t(p) * ldo + size_t(q)] = finish_dot(acc[p][q], x[p], c[q], d8, d);
}

// (The attribute, not only the pragma: clang ignores `#pragma GCC target` on templates.)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
template <int P, int C> __attribute__((target("avx2,fma"))) void
block_avx2(const float* const* x, const float* const* c, int d, float* out, size_t ldo)
{
  __m256 acc[P][C];
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < C; ++q)
      acc[p][q] = _mm256_setzero_ps();
  const int d8 = d & ~7;
  for (int j = 0; j < d8; j += 8) {
    __m256 xv[P];
    for (int p = 0; p < P; ++p)
      xv[p] = _mm256_loadu_ps(x[p] + j);
    for (int q = 0; q < C; ++q) {
      const __m256 cv = _mm256_loadu_ps(c[q] + j);
      for (int p = 0; p < P; ++p)
        acc[p][q] = _mm256_fmadd_ps(xv[p], cv, acc[p][q]);
    }
  }
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < C; ++q) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[p][q]);
      out[size_t(p) * ldo + size_t(q)] = finish_dot(lanes, x[p], c[q], d8, d);
    }
}
#pragma GCC pop_options

bool cpu_has_avx2_fma()
{
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

template <int P, int C>
void block(bool avx, const float* const* x, const float* const* c, int d, float* out, size_t ldo)
{
  if (avx)
    block_avx2<P, C>(x, c, d, out, ldo);
  else
    block_portable<P, C>(x, c, d, out, ldo);
}

// Rows [i, i + P) of out = those P points against every centroid.
template <int P> void point_block(bool avx, DenseMatrixView xs, DenseMatrixView cs, int i, float* out)
{
  const int d = xs.cols, k = cs.rows;
  const float* x[P];
  for (int p = 0; p < P; ++p)
    x[p] = xs.data + size_t(i + p) * size_t(d);
  auto crow = [&](int q) { return cs.data + size_t(q) * size_t(d); };
  float* o  = out + size_t(i) * size_t(k);
  int q     = 0;
  for (; q + 4 <= k; q += 4) {
    const float* c[4] = {crow(q), crow(q + 1), crow(q + 2), crow(q + 3)};
    block<P, 4>(avx, x, c, d, o + q, size_t(k));
  }
  for (; q < k; ++q) {
    const float* c[1] = {crow(q)};
    block<P, 1>(avx, x, c, d, o + q, size_t(k));
  }
}

// The same dots with the centroids transposed, 16 to a 512-bit register: accumulator [p][l] holds
// lane l (coordinates j = l mod 8) of point p against 16 centroids, so each dot still gets its 8
// lanes of fused multiply-adds in coordinate order, then finish_dot: bit-identical to block_avx2 with
// half the instructions, and one centroid load serves P points. ct is d x 16 (centroids g .. g + 15).
template <int P> __attribute__((target("avx512f"))) void
block_avx512(const float* const* x, const float* ct, const float* const* c, int k, int d, float* out, size_t ldo)
{
  __m512 acc[P][8];
  for (int p = 0; p < P; ++p)
    for (int l = 0; l < 8; ++l)
      acc[p][l] = _mm512_setzero_ps();
  const int d8 = d & ~7;
  for (int j = 0; j < d8; j += 8)
    for (int l = 0; l < 8; ++l) {
      const __m512 cv = _mm512_load_ps(ct + size_t(j + l) * 16);
      for (int p = 0; p < P; ++p)
        acc[p][l] = _mm512_fmadd_ps(_mm512_set1_ps(x[p][j + l]), cv, acc[p][l]);
    }
  for (int p = 0; p < P; ++p) {
    alignas(64) float lanes[8][16];
    for (int l = 0; l < 8; ++l)
      _mm512_store_ps(lanes[l], acc[p][l]);
    for (int q = 0; q < k; ++q) {
      const float pair[8]              = {lanes[0][q], lanes[1][q], lanes[2][q], lanes[3][q],
                                          lanes[4][q], lanes[5][q], lanes[6][q], lanes[7][q]};
      out[size_t(p) * ldo + size_t(q)] = finish_dot(pair, x[p], c[q], d8, d);
    }
  }
}

bool cpu_has_avx512f()
{
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// dots() on AVX-512: centroids in groups of 16, transposed once per call.
void dots_avx512(DenseMatrixView xs, DenseMatrixView cs, float* out)
{
  const int d = xs.cols, k = cs.rows;
  thread_local std::vector<float> buffer;  // d x 16 floats from a 64-byte boundary
  buffer.resize(size_t(d) * 16 + 16);
  float* ct = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64 / sizeof(float);
  for (int g = 0; g < k; g += 16) {
    const int kg = std::min(16, k - g);
    std::fill(ct, ct + size_t(d) * 16, 0.f);
    const float* c[16];
    for (int q = 0; q < kg; ++q) {
      c[q] = cs.data + size_t(g + q) * size_t(d);
      for (int j = 0; j < d; ++j)
        ct[size_t(j) * 16 + size_t(q)] = c[q][j];
    }
    auto x_rows = [&](int i, auto& x) {
      for (size_t p = 0; p < std::size(x); ++p)
        x[p] = xs.data + size_t(i + int(p)) * size_t(d);
    };
    int i = 0;
    for (; i + 3 <= xs.rows; i += 3) {
      const float* x[3];
      x_rows(i, x);
      block_avx512<3>(x, ct, c, kg, d, out + size_t(i) * size_t(k) + size_t(g), size_t(k));
    }
    for (; i < xs.rows; ++i) {
      const float* x[1];
      x_rows(i, x);
      block_avx512<1>(x, ct, c, kg, d, out + size_t(i) * size_t(k) + size_t(g), size_t(k));
    }
  }
}

// out (rows x k, row-major) = X C^T.
void dots(DenseMatrixView xs, DenseMatrixView cs, float* out, bool avx)
{
  // (AVX-512 pays a transpose of the centroids per call: worth it from a few points and centroids.)
  if (avx && cs.rows >= 4 && xs.rows >= 8 && cpu_has_avx512f()) {
    dots_avx512(xs, cs, out);
    return;
  }
  int i = 0;
  for (; i + 3 <= xs.rows; i += 3)
    point_block<3>(avx, xs, cs, i, out);
  if (xs.rows - i == 2)
    point_block<2>(avx, xs, cs, i, out);
  else if (xs.rows - i == 1)
    point_block<1>(avx, xs, cs, i, out);
}

float dot1(const float* x, const float* c, int d)
{
  float r;
  block<1, 1>(cpu_has_avx2_fma(), &x, &c, d, &r, 1);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Input checks.

[[noreturn]] void bad(const std::string& what)
{
  throw std::invalid_argument("spherical k-means: " + what);
}

// Returns, per row, whether it is all-zero; throws unless every row is a unit vector or zero.
std::vector<char> check_points(DenseMatrixView pts)
{
  if (pts.rows <= 0)
    bad("no points to cluster");
  if (pts.cols <= 0)
    bad("points have dimension " + std::to_string(pts.cols));
  if (!pts.data)
    bad("null point data");
  std::vector<char> zero(size_t(pts.rows), 0);
  bool any_nonzero = false;
  for (int i = 0; i < pts.rows; ++i) {
    const float* x  = pts.data + size_t(i) * size_t(pts.cols);
    const double n2 = dot1(x, x, pts.cols);
    if (n2 == 0.0) {
      zero[size_t(i)] = 1;
      continue;
    }
    if (!(std::abs(std::sqrt(n2) - 1.0) <= 1e-3))
      bad("point " + std::to_string(i) + " has norm " + std::to_string(std::sqrt(n2)) +
          ": rows must be L2-normalised (or all-zero)");
    any_nonzero = true;
  }
  if (!any_nonzero)
    bad("every point is the zero vector");
  return zero;
}

void check_options(const KMeansOptions& o)
{
  if (o.max_iterations <= 0)
    bad("max_iterations must be positive, got " + std::to_string(o.max_iterations));
}

// ---------------------------------------------------------------------------------------------
// The iterations.

// s += sign * x (sign = +-1, so the product is exact), element-wise in double: the same IEEE
// operations with or without AVX2 (no FMA in either target, so nothing can be contracted), hence the
// vectorised version is bit-identical to the plain one.
__attribute__((target("avx2"))) void add_row_avx2(double* s, const float* x, int d, double sign)
{
  for (int j = 0; j < d; ++j)
    s[j] += sign * double(x[j]);
}

void add_row(double* s, const float* x, int d, double sign)
{
  if (cpu_has_avx2_fma()) {
    add_row_avx2(s, x, d, sign);
    return;
  }
  for (int j = 0; j < d; ++j)
    s[j] += sign * double(x[j]);
}

// k-means++ (Arthur & Vassilvitskii): first seed uniform, each next seed drawn with probability
// proportional to its distance to the nearest seed so far. For unit vectors |x - c|^2 = 2 (1 - cos),
// so weighting by the cosine distance is exactly the classical D^2 weighting. Zero rows never seed.
DenseMatrix kmeanspp_seeds(DenseMatrixView pts, int k, const std::vector<char>& zero, uint64_t seed)
{
  Rng rng(seed, "kmeans.init");
  const int n = pts.rows, d = pts.cols;
  std::vector<int> nonzero;
  for (int i = 0; i < n; ++i)
    if (!zero[size_t(i)])
      nonzero.push_back(i);

  DenseMatrix seeds(k, d);
  std::vector<double> nearest(size_t(n), 0.0);  // cosine distance to the nearest seed; 0 for zero rows
  std::vector<float> sim(static_cast<size_t>(n));
  const bool avx = cpu_has_avx2_fma();
  for (int s = 0; s < k; ++s) {
    int pick     = -1;
    double total = 0;
    if (s > 0)
      for (double w : nearest)
        total += w;
    if (total > 0) {
      // Walk the cumulative weights; the last positive weight catches rounding at the top end.
      const double r = rng.uniform01() * total;
      double acc     = 0;
      for (int i = 0; i < n; ++i) {
        if (nearest[size_t(i)] <= 0)
          continue;
        pick = i;
        acc += nearest[size_t(i)];
        if (acc > r)
          break;
      }
    } else {
      // First seed, or every point coincides with a seed (fewer distinct directions than K).
      pick = nonzero[size_t(rng.below(nonzero.size()))];
    }
    std::copy_n(pts.data + size_t(pick) * size_t(d), size_t(d), seeds.row(s).data());
    dots(pts, DenseMatrixView(seeds.row(s).data(), 1, d), sim.data(), avx);
    for (int i = 0; i < n; ++i) {
      if (zero[size_t(i)])
        continue;
      const double dist  = std::max(0.0, 1.0 - double(sim[size_t(i)]));
      nearest[size_t(i)] = s == 0 ? dist : std::min(nearest[size_t(i)], dist);
    }
  }
  return seeds;
}

KMeansResult iterate(DenseMatrixView pts, const std::vector<char>& zero, DenseMatrix centroids, const KMeansOptions& o)
{
  const int n = pts.rows, d = pts.cols, k = centroids.rows;
  const bool avx = cpu_has_avx2_fma();
  KMeansResult r;
  r.assignment.assign(size_t(n), -1);
  std::vector<float> sim(size_t(n) * size_t(k));
  std::vector<double> cost(o.variant == KMeansVariant::balanced ? size_t(n) * size_t(k) : 0);
  std::vector<int> next(static_cast<size_t>(n));
  std::vector<double> sum(size_t(k) * size_t(d), 0.0);
  std::vector<int> members(size_t(k), 0);  // non-zero points per cluster
  std::vector<char> touched(static_cast<size_t>(k));
  // Centroids the last centroid step rewrote: only their columns of `sim` need new dots (a dot does not
  // depend on the blocking or on the other centroids, so the others' are what a full pass would give).
  std::vector<char> moved(static_cast<size_t>(k), 1);
  std::vector<int> moved_ids;
  DenseMatrix moved_rows;
  std::vector<float> moved_sim;
  auto update_sim = [&] {
    moved_ids.clear();
    for (int q = 0; q < k; ++q)
      if (moved[size_t(q)])
        moved_ids.push_back(q);
    std::fill(moved.begin(), moved.end(), 0);
    if (int(moved_ids.size()) == k) {
      dots(pts, centroids, sim.data(), avx);
      return;
    }
    if (moved_ids.empty())
      return;
    const int m = int(moved_ids.size());
    moved_rows  = DenseMatrix(m, d);
    for (int a = 0; a < m; ++a)
      std::copy_n(centroids.row(moved_ids[size_t(a)]).data(), d, moved_rows.row(a).data());
    moved_sim.resize(size_t(n) * size_t(m));
    dots(pts, moved_rows, moved_sim.data(), avx);
    for (int i = 0; i < n; ++i)
      for (int a = 0; a < m; ++a)
        sim[size_t(i) * size_t(k) + size_t(moved_ids[size_t(a)])] = moved_sim[size_t(i) * size_t(m) + size_t(a)];
  };

  for (int it = 1; it <= o.max_iterations; ++it) {
    update_sim();
    if (o.variant == KMeansVariant::balanced) {
      for (size_t e = 0; e < cost.size(); ++e)
        cost[e] = 1.0 - double(sim[e]);
      next = balanced_assignment(cost, n, k).cluster;
    } else {
      for (int i = 0; i < n; ++i) {
        const float* si = sim.data() + size_t(i) * size_t(k);
        next[size_t(i)] = int(std::max_element(si, si + k) - si);  // first maximum: lowest index
      }
    }
    r.iterations = it;
    if (next == r.assignment) {
      r.converged = true;
      break;
    }
    r.assignment.swap(next);

    // Centroid step: the normalised mean maximises the summed cosine of a fixed cluster. The sums
    // (double) are updated by the points that changed cluster only: after the first iterations few
    // do, and re-summing N x D floats per iteration was a fifth of the fit. A cluster with no
    // non-zero point keeps its centroid (its sum is reset to exact zeros, not left as rounding dust).
    std::fill(touched.begin(), touched.end(), 0);
    for (int i = 0; i < n; ++i) {
      const int from = next[size_t(i)], to = r.assignment[size_t(i)];  // `next` now holds the previous
      if (from == to || zero[size_t(i)])
        continue;
      const float* x = pts.data + size_t(i) * size_t(d);
      if (from >= 0) {
        add_row(sum.data() + size_t(from) * size_t(d), x, d, -1.0);
        --members[size_t(from)];
        touched[size_t(from)] = 1;
      }
      add_row(sum.data() + size_t(to) * size_t(d), x, d, 1.0);
      ++members[size_t(to)];
      touched[size_t(to)] = 1;
    }
    for (int q = 0; q < k; ++q) {
      if (!touched[size_t(q)])
        continue;
      double* s = sum.data() + size_t(q) * size_t(d);
      if (members[size_t(q)] == 0) {
        std::fill(s, s + d, 0.0);
        continue;
      }
      double n2 = 0;
      for (int j = 0; j < d; ++j)
        n2 += s[j] * s[j];
      if (!(n2 > 0))
        continue;  // points that cancel out exactly: keep the centroid
      const double inv = 1.0 / std::sqrt(n2);
      float* c         = centroids.row(q).data();
      for (int j = 0; j < d; ++j)
        c[j] = float(s[j] * inv);
      moved[size_t(q)] = 1;
    }
  }

  // The objective of what is returned: when converged the centroids already match the assignment
  // and `sim` holds their dots; otherwise the last centroid step moved them.
  r.objective = 0;
  if (o.objective) {
    if (!r.converged)
      update_sim();
    for (int i = 0; i < n; ++i)
      r.objective += 1.0 - double(sim[size_t(i) * size_t(k) + size_t(r.assignment[size_t(i)])]);
  }
  r.centroids = std::move(centroids);
  return r;
}

}  // namespace

KMeansResult fit_spherical_kmeans(DenseMatrixView points, int k, const KMeansOptions& options)
{
  if (k <= 0)
    bad("K must be positive, got " + std::to_string(k));
  check_options(options);
  const std::vector<char> zero = check_points(points);
  return iterate(points, zero, kmeanspp_seeds(points, k, zero, options.seed), options);
}

KMeansResult fit_spherical_kmeans_warm(DenseMatrixView points, DenseMatrixView initial, const KMeansOptions& options)
{
  check_options(options);
  const std::vector<char> zero = check_points(points);
  if (initial.rows <= 0 || !initial.data)
    bad("no initial centroids");
  if (initial.cols != points.cols)
    bad("initial centroids have dimension " + std::to_string(initial.cols) + ", points " + std::to_string(points.cols));
  DenseMatrix c(initial.rows, initial.cols);
  for (int q = 0; q < initial.rows; ++q) {
    const auto in = initial.row(q);
    double n2     = 0;
    for (float v : in)
      n2 += double(v) * double(v);
    if (!(n2 > 0) || !std::isfinite(n2))
      bad("initial centroid " + std::to_string(q) + " is zero or not finite");
    const double inv = 1.0 / std::sqrt(n2);
    for (int j = 0; j < initial.cols; ++j)
      c.row(q)[size_t(j)] = float(double(in[size_t(j)]) * inv);
  }
  return iterate(points, zero, std::move(c), options);
}

std::vector<int> match_centroids(DenseMatrixView old_centroids, DenseMatrixView new_centroids)
{
  if (old_centroids.rows != new_centroids.rows || old_centroids.cols != new_centroids.cols)
    bad("match_centroids: shapes differ (" + std::to_string(old_centroids.rows) + " x " +
        std::to_string(old_centroids.cols) + " vs " + std::to_string(new_centroids.rows) + " x " +
        std::to_string(new_centroids.cols) + ")");
  const int k = new_centroids.rows;
  if (k == 0)
    return {};
  std::vector<float> sim(size_t(k) * size_t(k));
  dots(new_centroids, old_centroids, sim.data(), cpu_has_avx2_fma());
  std::vector<double> cost(sim.size());
  for (size_t e = 0; e < sim.size(); ++e)
    cost[e] = 1.0 - double(sim[e]);
  const std::vector<int> one(size_t(k), 1);
  return balanced_assignment(cost, k, k, one).cluster;
}

namespace detail {
void dot_products(DenseMatrixView points, DenseMatrixView centroids, std::span<float> out, DotKernel kernel)
{
  if (points.cols != centroids.cols)
    bad("dot_products: dimensions differ");
  if (out.size() != size_t(points.rows) * size_t(centroids.rows))
    bad("dot_products: output has the wrong size");
  dots(points, centroids, out.data(), kernel == DotKernel::best && cpu_has_avx2_fma());
}
}  // namespace detail

}  // namespace eldr
