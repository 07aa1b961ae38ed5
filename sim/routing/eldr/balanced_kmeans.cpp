// Spherical K-means (balanced and vanilla), k-means++ seeding and centroid matching. The time goes
// into the N x K dot products (D up to ~6k), so they get a register-blocked AVX2/FMA kernel with a
// portable twin that computes bit-identical results.
#include "sim/routing/eldr/balanced_kmeans.hpp"

#include "sim/common/rng.hpp"
#include "sim/routing/eldr/balanced_assignment.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
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

// A multiply-xorshift hash of a row's bits, 4 independent lanes of 64-bit words (a byte-wise hash
// took longer than the dots it saves): a carried row is taken over only if it is the same.
uint64_t row_hash(const float* row, int cols)
{
  const size_t bytes = size_t(cols) * sizeof(float);
  const auto* b      = reinterpret_cast<const unsigned char*>(row);
  uint64_t h[4]      = {1, 2, 3, 4};
  uint64_t w[4]      = {};
  size_t j           = 0;
  auto mix           = [](uint64_t x, uint64_t y) {
    x = (x ^ y) * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
  };
  for (; j + 32 <= bytes; j += 32) {
    std::memcpy(w, b + j, 32);
    for (int l = 0; l < 4; ++l)
      h[l] = mix(h[l], w[l]);
  }
  uint64_t tail = 0;
  for (; j < bytes; ++j)
    tail = (tail << 8) | b[j];
  return mix(mix(mix(mix(h[0], h[1]), h[2]), h[3]), tail);
}

// The checks of one row (`at`: its index, for the message; -1 none): throws unless it is a unit
// vector or zero. The hash only when asked (a window of rows is larger than L2: read once).
PointCheck check_row(const float* x, int cols, int at, bool hash)
{
  PointCheck c;
  const double n2 = dot1(x, x, cols);
  if (hash)
    c.hash = row_hash(x, cols);
  c.zero = n2 == 0.0;
  if (!c.zero && !(std::abs(std::sqrt(n2) - 1.0) <= 1e-3))
    bad((at >= 0 ? "point " + std::to_string(at) : std::string("a point")) + " has norm " +
        std::to_string(std::sqrt(n2)) + ": rows must be L2-normalised (or all-zero)");
  return c;
}

void check_shape(DenseMatrixView pts)
{
  if (pts.rows <= 0)
    bad("no points to cluster");
  if (pts.cols <= 0)
    bad("points have dimension " + std::to_string(pts.cols));
  if (!pts.data)
    bad("null point data");
}

// Returns, per row, whether it is all-zero; throws unless every row is a unit vector or zero. With
// `hashes`, also each row's row_hash, in the same pass. `checked` (empty: none) holds the rows'
// checks done beforehand (check_point): the rows are then not read at all.
std::vector<char> check_points(DenseMatrixView pts, std::vector<uint64_t>* hashes = nullptr,
                               std::span<const PointCheck> checked = {})
{
  check_shape(pts);
  if (!checked.empty() && checked.size() != size_t(pts.rows))
    bad(std::to_string(checked.size()) + " point checks for " + std::to_string(pts.rows) + " points");
  std::vector<char> zero(size_t(pts.rows), 0);
  if (hashes)
    hashes->resize(size_t(pts.rows));
  bool any_nonzero = false;
  for (int i = 0; i < pts.rows; ++i) {
    const PointCheck c = checked.empty()
                             ? check_row(pts.data + size_t(i) * size_t(pts.cols), pts.cols, i, hashes != nullptr)
                             : checked[size_t(i)];
    if (hashes)
      (*hashes)[size_t(i)] = c.hash;
    zero[size_t(i)] = c.zero;
    any_nonzero |= !c.zero;
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

// The N x K similarities of a fit, each computed when an assignment needs it. Entry (i, q) holds the
// dot of point i with some earlier version of centroid q; it is exact when that version is the
// current one. Otherwise the true dot lies within slack(i, q) of it: |x.c - x.c'| <= |x| |c - c'|,
// |c - c'| is at most the distance centroid q has travelled since (the sum of its moves), and each
// of the two computed dots is within the float rounding of its D/8-term lanes. A dot depends only on
// the two vectors (not on the blocking or the kernel), so an entry computed late equals the one a
// full pass would have given.
class LazySims {
 public:
  LazySims(DenseMatrixView pts, const std::vector<char>& zero, int k)
      : pts_(pts), zero_(zero), k_(k), avx_(cpu_has_avx2_fma()),
        // (D/8 + D%8 + 3) roundings along a dot's path, each relative to sum |x_j c_j| <= |x| |c|
        // (both at most 1.001), doubled for the two dots compared and with room to spare.
        rounding_(2.0 * (double(pts.cols / 8 + pts.cols % 8) + 8.0) * 0x1p-24 * 1.01)
  {
    travelled_.resize(size_t(k));
    for (auto& t : travelled_)
      t.assign(1, 0.0);
    current_.assign(size_t(k), 0);
  }

  const float* row(int i) const { return sim_.data() + size_t(i) * size_t(k_); }
  // Zero rows have dot 0 with every centroid, whatever its version.
  bool exact(int i, int q) const { return zero_[size_t(i)] || version_[at(i, q)] == current_[size_t(q)]; }
  // Centroid q was rewritten with new values `distance` away from the old ones.
  void moved(int q, double distance)
  {
    auto& t = travelled_[size_t(q)];
    t.push_back(t.back() + distance * (1 + 1e-6) + 1e-30);
    current_[size_t(q)] = int(t.size()) - 1;
  }

  // Every entry unknown (a fit with nothing carried).
  void fresh()
  {
    sim_.assign(size_t(pts_.rows) * size_t(k_), 0.0f);
    version_.assign(sim_.size(), -1);
  }

  // Takes over the carried entries of the rows it shares with the previous fit (same id, same hash;
  // `hashes`: row_hash of each row); a centroid that differs from the carried one adds the distance
  // between them to its travel. The carry's arrays are reused in place, its shared rows moved to
  // their new positions: at 256 clusters a fresh N x K pair was 16 MB a refit to allocate and clear.
  void take(WindowCarry& carry, const DenseMatrix& centroids, std::vector<double>& duals, std::vector<uint64_t> hashes)
  {
    const int n = pts_.rows, d = pts_.cols;
    row_hash_ = std::move(hashes);
    if (carry.centroids.rows != k_ || carry.centroids.cols != d || carry.travelled.size() != size_t(k_)) {
      fresh();
      return;
    }
    for (int q = 0; q < k_; ++q) {
      travelled_[size_t(q)].swap(carry.travelled[size_t(q)]);
      current_[size_t(q)] = int(travelled_[size_t(q)].size()) - 1;
      const float* a      = centroids.row(q).data();
      const float* b      = carry.centroids.row(q).data();
      double d2           = 0;
      bool changed        = false;
      for (int j = 0; j < d; ++j) {
        changed |= a[j] != b[j];
        d2 += (double(a[j]) - double(b[j])) * (double(a[j]) - double(b[j]));
      }
      if (changed)
        moved(q, std::sqrt(d2));
    }
    const long from = std::max(carry.first, carry.rows_first);
    const long to   = std::min(carry.first + long(n), carry.rows_first + long(carry.row_hash.size()));
    const size_t k = size_t(k_), entries = size_t(n) * k;
    if (carry.first < carry.rows_first || carry.sim.size() != carry.row_hash.size() * k ||
        carry.version.size() != carry.sim.size()) {
      // (Not a window sliding forward: copied into fresh arrays.)
      fresh();
      for (long id = from; id < to; ++id) {
        const size_t i = size_t(id - carry.first), c = size_t(id - carry.rows_first);
        if (carry.row_hash[c] != row_hash_[i])
          continue;
        std::copy_n(carry.sim.data() + c * k, k, sim_.data() + i * k);
        std::copy_n(carry.version.data() + c * k, k, version_.data() + i * k);
      }
    } else {
      // Carried row c is row c - shift here: the shared rows move to the front, the rest are unknown.
      sim_.swap(carry.sim);
      version_.swap(carry.version);
      const size_t shift = size_t(carry.first - carry.rows_first), shared = size_t(std::max(0L, to - from));
      if (shared > 0 && shift > 0) {
        std::memmove(sim_.data(), sim_.data() + shift * k, shared * k * sizeof(float));
        std::memmove(version_.data(), version_.data() + shift * k, shared * k * sizeof(int));
      }
      sim_.resize(entries);
      version_.resize(entries);
      std::fill(version_.begin() + std::ptrdiff_t(shared * k), version_.end(), -1);
      for (size_t i = 0; i < shared; ++i)
        if (carry.row_hash[i + shift] != row_hash_[i])
          std::fill_n(version_.begin() + std::ptrdiff_t(i * k), k, -1);
    }
    if (carry.duals.size() == size_t(k_))
      duals = carry.duals;
  }

  // Leaves this fit's entries for the next one, each centroid's travel trimmed to the versions still
  // referenced (a long run would otherwise keep every refit's).
  void give(WindowCarry& carry, const DenseMatrix& centroids, const std::vector<double>& duals)
  {
    const size_t n = size_t(pts_.rows), k = size_t(k_);
    std::vector<int> oldest(k);
    for (size_t q = 0; q < k; ++q)
      oldest[q] = int(travelled_[q].size()) - 1;
    // (Row by row: an entry's centroid is its column, no division per entry.)
    for (size_t i = 0; i < n; ++i) {
      const int* v = version_.data() + i * k;
      for (size_t q = 0; q < k; ++q)
        if (v[q] >= 0)
          oldest[q] = std::min(oldest[q], v[q]);
    }
    bool trim = false;
    for (size_t q = 0; q < k; ++q) {
      auto& t = travelled_[q];
      t.erase(t.begin(), t.begin() + oldest[q]);
      trim |= oldest[q] > 0;
    }
    for (size_t i = 0; trim && i < n; ++i) {
      int* v = version_.data() + i * k;
      for (size_t q = 0; q < k; ++q)
        if (v[q] >= 0)
          v[q] -= oldest[q];
    }
    carry.rows_first = carry.first;
    carry.centroids  = centroids;
    carry.row_hash.swap(row_hash_);
    carry.sim.swap(sim_);
    carry.version.swap(version_);
    carry.travelled.swap(travelled_);
    carry.duals = duals;
  }

  // The rows with an entry never computed, computed whole (the kernel in one call per run of rows).
  void compute_unknown(const DenseMatrix& centroids)
  {
    const int n = pts_.rows, d = pts_.cols;
    for (int i = 0; i < n;) {
      auto unknown = [&](int r) {
        const int* v = version_.data() + at(r, 0);
        return std::find(v, v + k_, -1) != v + k_;
      };
      if (!unknown(i)) {
        ++i;
        continue;
      }
      int end = i + 1;
      while (end < n && unknown(end))
        ++end;
      dots(DenseMatrixView(pts_.data + size_t(i) * size_t(d), end - i, d), centroids, sim_.data() + at(i, 0), avx_);
      for (int r = i; r < end; ++r)
        for (int q = 0; q < k_; ++q)
          version_[at(r, q)] = current_[size_t(q)];
      i = end;
    }
  }

  // Every entry exact for `centroids`: the columns with a stale entry are recomputed whole.
  void compute_all(const DenseMatrix& centroids)
  {
    const int n = pts_.rows, d = pts_.cols;
    ids_.clear();
    for (int q = 0; q < k_; ++q)
      for (int i = 0; i < n; ++i)
        if (!exact(i, q) || version_[at(i, q)] < 0) {
          ids_.push_back(q);
          break;
        }
    if (int(ids_.size()) == k_) {
      dots(pts_, centroids, sim_.data(), avx_);
    } else if (!ids_.empty()) {
      const int m = int(ids_.size());
      rows_       = DenseMatrix(m, d);
      for (int a = 0; a < m; ++a)
        std::copy_n(centroids.row(ids_[size_t(a)]).data(), d, rows_.row(a).data());
      part_.resize(size_t(n) * size_t(m));
      dots(pts_, rows_, part_.data(), avx_);
      for (int i = 0; i < n; ++i)
        for (int a = 0; a < m; ++a)
          sim_[at(i, ids_[size_t(a)])] = part_[size_t(i) * size_t(m) + size_t(a)];
    }
    for (int q : ids_)
      for (int i = 0; i < n; ++i)
        version_[at(i, q)] = current_[size_t(q)];
  }

  // The listed entries of point i made exact, four centroids per kernel call.
  void compute(int i, std::span<const int> cols, const DenseMatrix& centroids)
  {
    const float* x = pts_.data + size_t(i) * size_t(pts_.cols);
    size_t a       = 0;
    float out[4];
    for (; a + 4 <= cols.size(); a += 4) {
      const float* c[4];
      for (int q = 0; q < 4; ++q)
        c[q] = centroids.row(cols[a + size_t(q)]).data();
      block<1, 4>(avx_, &x, c, pts_.cols, out, 1);
      for (int q = 0; q < 4; ++q)
        store(i, cols[a + size_t(q)], out[q]);
    }
    const size_t rest = cols.size() - a;
    const float* c[3];
    for (size_t q = 0; q < rest; ++q)
      c[q] = centroids.row(cols[a + q]).data();
    if (rest == 3)
      block<1, 3>(avx_, &x, c, pts_.cols, out, 1);
    else if (rest == 2)
      block<1, 2>(avx_, &x, c, pts_.cols, out, 1);
    else if (rest == 1)
      block<1, 1>(avx_, &x, c, pts_.cols, out, 1);
    for (size_t q = 0; q < rest; ++q)
      store(i, cols[a + q], out[q]);
  }

  // e[q] = slack(i, q), 0 where the entry is exact: one pass over the row (after prepare_slacks).
  void slacks(int i, double* e) const
  {
    const int* v = version_.data() + at(i, 0);
    if (zero_[size_t(i)]) {
      std::fill(e, e + k_, 0.0);
      return;
    }
    for (int q = 0; q < k_; ++q)
      e[q] = slack_[size_t(slack_at_[size_t(q)] + v[q])];
  }
  // The slack of every (centroid, version) pair under the current versions, so that an entry's is one
  // lookup: slack_[slack_at_[q] + version] (per entry, the scalar chain of a version test and two
  // travelled reads took longer). Built at the start of a step: the centroids move only between steps.
  void prepare_slacks()
  {
    slack_at_.resize(size_t(k_));
    slack_.clear();
    for (int q = 0; q < k_; ++q) {
      slack_at_[size_t(q)] = int(slack_.size());
      const int now        = current_[size_t(q)];
      const double* t      = travelled_[size_t(q)].data();
      for (int v = 0; v <= now; ++v)
        slack_.push_back(v == now ? 0.0 : 1.001 * (t[now] - t[v]) * (1 + 1e-9) + rounding_);
    }
  }

 private:
  size_t at(int i, int q) const { return size_t(i) * size_t(k_) + size_t(q); }
  void store(int i, int q, float v)
  {
    sim_[at(i, q)]     = v;
    version_[at(i, q)] = current_[size_t(q)];
  }

  DenseMatrixView pts_;
  const std::vector<char>& zero_;
  int k_;
  bool avx_;
  std::vector<float> sim_;
  std::vector<int> version_;                    // per entry: the centroid version it was computed with
  std::vector<std::vector<double>> travelled_;  // per centroid, per version: distance moved before it
  std::vector<int> current_;                    // per centroid, its current version: travelled_[q].size() - 1
  double rounding_;
  std::vector<int> slack_at_;  // prepare_slacks: per centroid, where its versions' slacks start in slack_
  std::vector<double> slack_;
  std::vector<uint64_t> row_hash_;  // filled when carried
  std::vector<int> ids_;            // scratch
  DenseMatrix rows_;
  std::vector<float> part_;
};

// The balanced step computes a point's dots with the centroids it could be assigned to under the
// previous assignment's duals, with this much room for the duals to move.
constexpr double kDualRoom = 0.05;
// Every other assignment must cost this much more than the one found on bounds: far above the
// solver's rounding (~1e-12), far below any real difference of float similarities that matters.
constexpr double kUniqueMargin = 1e-9;
// When the bounds do not prove a solution: the bounds within this much of a point's reduced cost
// under that solution's duals are made exact, and the sparse instance solved again, this many times.
constexpr double kRefineRoom = 0.01;
constexpr int kRounds        = 3;

// The vanilla step on bounds: a centroid whose upper bound is below the best lower bound cannot be
// the maximum (nor tie it), so only the others are computed; ties go to the lowest index as before.
void vanilla_step(LazySims& sims, const DenseMatrix& centroids, int n, int k, std::vector<int>& next)
{
  std::vector<int> need;
  std::vector<double> e(static_cast<size_t>(k));
  sims.prepare_slacks();
  for (int i = 0; i < n; ++i) {
    const float* si = sims.row(i);
    sims.slacks(i, e.data());
    double best_lo = -1e30;
    for (int q = 0; q < k; ++q)
      best_lo = std::max(best_lo, double(si[q]) - e[size_t(q)]);
    need.clear();
    for (int q = 0; q < k; ++q)
      if (e[size_t(q)] > 0 && double(si[q]) + e[size_t(q)] >= best_lo) {
        need.push_back(q);
        e[size_t(q)] = 0;
      }
    sims.compute(i, need, centroids);
    int arg = -1;
    for (int q = 0; q < k; ++q)
      if (e[size_t(q)] == 0 && (arg < 0 || si[q] > si[arg]))
        arg = q;
    next[size_t(i)] = arg;
  }
}

// lo[q] = the lower bound of point i's reduced cost (cost - dual) at centroid q, from its entries si
// and their slacks e; returns the lowest upper bound. (Its own function: inlined into the step, the
// running minimum lived in memory, a chain of stores and loads; the step took ~10% longer.)
[[gnu::noinline]] double reduced_bounds(const float* si, const double* e, const double* duals, int k, double* lo)
{
  double best_hi = std::numeric_limits<double>::infinity();
  for (int q = 0; q < k; ++q) {
    lo[q]   = 1.0 - (double(si[q]) + e[q]) - duals[q];
    best_hi = std::min(best_hi, 1.0 - (double(si[q]) - e[q]) - duals[q]);
  }
  return best_hi;
}

// Room for `size` entries in the lists' buffers, grown geometrically and never shrunk (growing
// zeroes the new part: sized N x K up front, that was 48 MB a refit at 256 clusters, where the lists
// hold about a third of it).
void make_room(AllowedLists& lists, size_t size)
{
  if (lists.allowed.size() >= size)
    return;
  const size_t grown = std::max(size, 2 * lists.allowed.size());
  lists.allowed.resize(grown);
  lists.cost.resize(grown);
}

// The balanced step on bounds: exact dots where the previous duals say a point may go, lower bounds
// of the cost elsewhere. The exact entries alone are solved as a sparse instance; its optimum is the
// optimum of the exact costs when, on the matrix of exact entries and lower bounds, it is the only
// optimum (no assignment is cheaper on exact costs, which are at least the bounds, and the solver on
// exact costs finds it whatever its tie rule): is_unique_optimum checks that. Otherwise (false,
// also when the previous duals are missing) nothing was decided.
// The sparse instance is its allowed pairs' lists with their costs (lists: the current, merged:
// scratch); `cost` holds every entry, exact or bound, for the uniqueness check.
bool balanced_step_on_bounds(LazySims& sims, const DenseMatrix& centroids, int n, int k, std::vector<double>& duals,
                             std::vector<double>& cost, AllowedLists& lists, AllowedLists& merged,
                             std::vector<int>& next)
{
  if (duals.size() != size_t(k))
    return false;
  // Lists are written through pointers into buffers with room for a point's worst case, and `need` counted in
  // a local: with push_back in these O(K) loops their counters lived in memory (a fifth of the step).
  std::vector<int> need(static_cast<size_t>(k));
  lists.first.resize(size_t(n) + 1);
  lists.first[0] = 0;
  int listed     = 0;
  std::vector<double> lo(static_cast<size_t>(k)), e(static_cast<size_t>(k));
  sims.prepare_slacks();
  for (int i = 0; i < n; ++i) {
    const float* si = sims.row(i);
    sims.slacks(i, e.data());
    const double best_hi = reduced_bounds(si, e.data(), duals.data(), k, lo.data());
    int m                = 0;
    for (int q = 0; q < k; ++q) {
      need[size_t(m)] = q;
      m += e[size_t(q)] > 0 && lo[size_t(q)] <= best_hi + kDualRoom;
    }
    for (int a = 0; a < m; ++a)
      e[size_t(need[size_t(a)])] = 0;  // exact once computed below
    sims.compute(i, std::span<const int>(need.data(), size_t(m)), centroids);
    make_room(lists, size_t(listed) + size_t(k));
    double* ci        = cost.data() + size_t(i) * size_t(k);
    int* allowed      = lists.allowed.data() + listed;
    double* allowed_c = lists.cost.data() + listed;
    int c             = 0;
    for (int q = 0; q < k; ++q) {
      ci[q]        = 1.0 - (double(si[q]) + e[size_t(q)]);
      allowed[c]   = q;
      allowed_c[c] = ci[q];
      c += e[size_t(q)] == 0;
    }
    listed += c;
    lists.first[size_t(i) + 1] = listed;
  }
  const std::vector<int> cap(size_t(k), balanced_capacity(n, k));
  std::optional<BalancedAssignment> a;
  bool solve = true;
  for (int round = 0; round <= kRounds; ++round) {
    if (solve) {
      // From the last duals (the previous step's, then the previous round's): few points move, so
      // most stay where the duals put them. Any optimum will do: only a proven unique one is taken.
      a = balanced_assignment_lists(n, k, cap, lists, a ? std::span<const double>(a->duals) : duals);
      if (!a)
        return false;
    }
    if (is_unique_optimum(cost, n, k, cap, a->cluster, kUniqueMargin)) {
      next.swap(a->cluster);
      duals.swap(a->duals);
      return true;
    }
    if (round == kRounds)
      break;
    // Not proven: make exact the bounds that this solution's duals do not clear. Solve again only if
    // an exact entry undercuts a point's own (else the duals still prove the solution optimal).
    const std::vector<double>& p = a->duals;
    bool more                    = false;
    solve                        = false;
    merged.first.resize(size_t(n) + 1);
    merged.first[0] = 0;
    int listed      = 0;
    for (int i = 0; i < n; ++i) {
      double* ci      = cost.data() + size_t(i) * size_t(k);
      const int at    = a->cluster[size_t(i)];
      const double in = ci[at] - p[size_t(at)];
      int m           = 0;
      for (int q = 0; q < k; ++q)
        if (ci[q] - p[size_t(q)] <= in + kRefineRoom && !sims.exact(i, q))
          need[size_t(m++)] = q;
      // The allowed clusters: the point's before and those made exact now (not among them).
      make_room(merged, size_t(listed) + size_t(k));
      const int from = lists.first[size_t(i)], to = lists.first[size_t(i) + 1], start = listed;
      const int* old = lists.allowed.data();
      const int* end = std::merge(old + from, old + to, need.data(), need.data() + m, merged.allowed.data() + listed);
      listed         = int(end - merged.allowed.data());
      merged.first[size_t(i) + 1] = listed;
      if (m == 0) {
        std::copy(lists.cost.data() + from, lists.cost.data() + to, merged.cost.data() + start);
        continue;
      }
      more = true;
      const std::span<const int> cols(need.data(), size_t(m));
      sims.compute(i, cols, centroids);
      const float* si = sims.row(i);
      for (int q : cols) {
        ci[q] = 1.0 - double(si[q]);
        solve |= ci[q] - p[size_t(q)] < in;
      }
      for (int e = start; e < listed; ++e)  // (an allowed entry's cost is its exact one)
        merged.cost[size_t(e)] = ci[merged.allowed[size_t(e)]];
    }
    lists.first.swap(merged.first);
    lists.allowed.swap(merged.allowed);
    lists.cost.swap(merged.cost);
    if (!more)
      break;
  }
  return false;
}

// hashes: each row's row_hash, when there is a carry to take over.
KMeansResult iterate(DenseMatrixView pts, const std::vector<char>& zero, DenseMatrix centroids, const KMeansOptions& o,
                     WindowCarry* carry = nullptr, std::vector<uint64_t> hashes = {})
{
  const int n = pts.rows, d = pts.cols, k = centroids.rows;
  KMeansResult r;
  r.assignment.assign(size_t(n), -1);
  if (!o.bounds)
    carry = nullptr;
  LazySims sims(pts, zero, k);
  std::vector<double> duals;  // the last balanced solve's
  // The balanced step's costs (every entry written before it is read) and its sparse instance's
  // allowed pairs (and scratch): a carry's, reused from fit to fit.
  WindowCarry::Buffers own;
  WindowCarry::Buffers& buffers = carry ? carry->buffers : own;
  std::vector<double>& cost     = buffers.cost;
  AllowedLists &lists = buffers.lists, &merged = buffers.merged;
  if (o.variant == KMeansVariant::balanced)
    cost.resize(size_t(n) * size_t(k));
  std::vector<int> next(static_cast<size_t>(n));
  std::vector<double> sum(size_t(k) * size_t(d), 0.0);
  std::vector<int> members(size_t(k), 0);  // non-zero points per cluster
  std::vector<char> touched(static_cast<size_t>(k));

  if (carry)
    sims.take(*carry, centroids, duals, std::move(hashes));
  else
    sims.fresh();

  for (int it = 1; it <= o.max_iterations; ++it) {
    // With bounds, only the dots that can matter are computed, once every entry is known (a first
    // iteration computes them all, but for the rows carried from a previous fit). The balanced step
    // also needs the duals of a previous assignment.
    const bool bounded = o.bounds;
    if (bounded)
      sims.compute_unknown(centroids);
    if (o.variant == KMeansVariant::balanced) {
      if (!bounded || !balanced_step_on_bounds(sims, centroids, n, k, duals, cost, lists, merged, next)) {
        sims.compute_all(centroids);
        for (int i = 0; i < n; ++i)
          for (int q = 0; q < k; ++q)
            cost[size_t(i) * size_t(k) + size_t(q)] = 1.0 - double(sims.row(i)[q]);
        BalancedAssignment a = balanced_assignment(cost, n, k);
        next.swap(a.cluster);
        duals.swap(a.duals);
      }
    } else if (bounded) {
      vanilla_step(sims, centroids, n, k, next);
    } else {
      sims.compute_all(centroids);
      for (int i = 0; i < n; ++i) {
        const float* si = sims.row(i);
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
      double moved2    = 0;
      bool changed     = false;
      for (int j = 0; j < d; ++j) {
        const float v = float(s[j] * inv);
        changed |= v != c[j];
        moved2 += (double(v) - double(c[j])) * (double(v) - double(c[j]));
        c[j] = v;
      }
      if (changed)
        sims.moved(q, std::sqrt(moved2));
    }
  }

  // The objective of what is returned: each point's dot with its final centroid.
  r.objective = 0;
  if (o.objective) {
    for (int i = 0; i < n; ++i) {
      const int a = r.assignment[size_t(i)];
      if (!sims.exact(i, a))
        sims.compute(i, std::span<const int>(&a, 1), centroids);
      r.objective += 1.0 - double(sims.row(i)[a]);
    }
  }
  if (carry)
    sims.give(*carry, centroids, duals);
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

PointCheck check_point(std::span<const float> row)
{
  if (row.empty())
    bad("points have dimension 0");
  return check_row(row.data(), int(row.size()), -1, true);
}

KMeansResult fit_spherical_kmeans_warm(DenseMatrixView points, DenseMatrixView initial, const KMeansOptions& options,
                                       WindowCarry* carry, std::span<const PointCheck> checked)
{
  check_options(options);
  if (!options.bounds)
    carry = nullptr;  // (iterate would not use it)
  std::vector<uint64_t> hashes;
  const std::vector<char> zero = check_points(points, carry ? &hashes : nullptr, checked);
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
  return iterate(points, zero, std::move(c), options, carry, std::move(hashes));
}

void WindowCarry::reorder(std::span<const int> slot)
{
  const int k = centroids.rows;
  if (k == 0)
    return;  // nothing carried
  if (int(slot.size()) != k || travelled.size() != size_t(k))
    bad("WindowCarry::reorder: " + std::to_string(slot.size()) + " slots for " + std::to_string(k) + " centroids");
  bool identity = true;
  for (int j = 0; j < k; ++j)
    identity &= slot[size_t(j)] == j;
  if (identity)
    return;  // (most refits: every centroid keeps its slot)
  const size_t rows = row_hash.size();
  DenseMatrix c(k, centroids.cols);
  std::vector<float> s(sim.size());
  std::vector<int> v(version.size());
  std::vector<std::vector<double>> t(static_cast<size_t>(k));
  std::vector<double> du(duals.size());
  for (int j = 0; j < k; ++j) {
    const size_t to = size_t(slot[size_t(j)]);
    std::copy_n(centroids.row(j).data(), centroids.cols, c.row(int(to)).data());
    t[to].swap(travelled[size_t(j)]);
    if (!du.empty())
      du[to] = duals[size_t(j)];
    for (size_t r = 0; r < rows; ++r) {
      s[r * size_t(k) + to] = sim[r * size_t(k) + size_t(j)];
      v[r * size_t(k) + to] = version[r * size_t(k) + size_t(j)];
    }
  }
  centroids = std::move(c);
  sim.swap(s);
  version.swap(v);
  travelled.swap(t);
  duals.swap(du);
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
