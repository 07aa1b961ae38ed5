#include "sim/routing/eldr/centroid_table.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <immintrin.h>
#include <stdexcept>

namespace eldr {

namespace {

__attribute__((target("avx512f,f16c"))) void to_half(const float* from, uint16_t* to, size_t n)
{
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + i),
                        _mm512_maskz_cvtps_ph(__mmask16(0xFFFF), _mm512_loadu_ps(from + i),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i)
    to[i] = _cvtss_sh(from[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

__attribute__((target("avx512f,f16c"))) double half_value(uint16_t h)
{
  return double(_cvtsh_ss(h));
}

}  // namespace

CentroidTable::CentroidTable(std::span<const float> row_major, int rows, int cols)
    : rows_(rows), cols_(cols), stride_((rows + 15) / 16 * 16)
{
  if (rows < 0 || cols < 0 || row_major.size() != size_t(rows) * size_t(cols))
    throw std::invalid_argument("CentroidTable: rows x cols values expected");
  values_.assign(size_t(cols) * size_t(stride_), 0.f);
  for (int k = 0; k < rows; ++k)
    for (int i = 0; i < cols; ++i)
      values_[size_t(i) * size_t(stride_) + size_t(k)] = row_major[size_t(k) * size_t(cols) + size_t(i)];
  if (__builtin_cpu_supports("avx512f")) {
    half_.resize(values_.size());
    to_half(values_.data(), half_.data(), values_.size());
    // f_k = |c - h|_2 (the estimate's centroid error, Cauchy-Schwarz with |x|_2) + gamma (|c|_2 + |h|_2)
    // (float rounding of the exact and the estimated sums: at most n + 64 operations on any path, each
    // within 2^-24 relative) + 2^-20 (1 + |h|_2) (rounding of approx +- bound itself), 1 % on top.
    const double gamma = double(cols + 64) * 0x1.0p-24;
    for (int k = 0; k < rows; ++k) {
      double e2 = 0, c2 = 0, h2 = 0;
      for (int i = 0; i < cols; ++i) {
        const double c = values_[size_t(i) * size_t(stride_) + size_t(k)];
        const double h = half_value(half_[size_t(i) * size_t(stride_) + size_t(k)]);
        e2 += (c - h) * (c - h);
        c2 += c * c;
        h2 += h * h;
      }
      const double f = std::sqrt(e2) + gamma * (std::sqrt(c2) + std::sqrt(h2)) + 0x1.0p-20 * (1 + std::sqrt(h2));
      half_error_.push_back(float(f * 1.01));
    }
  }
}

namespace {

// dot_kernel's order, which centroid_dots reproduces: dimension i < n32 goes to partial sum i % 32,
// n32 <= i < n8 to partial sum i % 8 (after all of the former), each sum in ascending i; the 32 sums
// reduce by a fixed tree, then dimensions n8 .. n - 1 are added one by one.
struct DotLayout {
  size_t n, n32, n8;
  explicit DotLayout(size_t d) : n(d), n32(d & ~size_t(31)), n8(d & ~size_t(7)) {}
};

// The non-zero dimensions of x below n8, ascending; the returned count is where those from n32 start.
// Reused across calls (one thread runs the whole simulation; the buffer only grows).
std::vector<uint32_t>& nonzero_buffer(size_t n)
{
  thread_local std::vector<uint32_t> idx;
  if (idx.size() < n + 16)
    idx.resize(n + 16);
  return idx;
}

// GCC would contract a multiply and an add into an FMA across statements; clang (which has no
// optimize attribute) contracts only within one expression, and the intrinsics below are separate.
#if defined(__clang__)
#define ELDR_NO_FP_CONTRACT
#else
#define ELDR_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif

// centroid_dots_avx512's helpers are functions of its target, not lambdas: clang does not give a
// lambda its enclosing function's target.

// Appends to idx[count..] the indices in [from, to) where x is non-zero; returns the new count.
__attribute__((target("avx512f"), always_inline)) inline size_t
compact_nonzero_avx512(const float* x, size_t from, size_t to, uint32_t* idx, size_t count)
{
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (size_t b = from; b < to; b += 16) {
    const __mmask16 valid = to - b >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (to - b)) - 1);
    const __mmask16 nz    = _mm512_mask_cmpneq_ps_mask(valid, _mm512_maskz_loadu_ps(valid, x + b), _mm512_setzero_ps());
    // Compress in a register and store all 16 lanes (the buffer has 16 spare): a masked compress
    // to memory is several times slower on Intel cores.
    _mm512_storeu_si512(idx + count,
                        _mm512_maskz_compress_epi32(nz, _mm512_add_epi32(lane, _mm512_set1_epi32(int(b)))));
    count += size_t(std::popcount(unsigned(nz)));
  }
  return count;
}

// acc[0..16) += xi * c[0..16), multiply then add.
__attribute__((target("avx512f"), always_inline)) ELDR_NO_FP_CONTRACT inline void
add_scaled_avx512(float* acc, float xi, const float* c)
{
  const __m512 p = _mm512_mul_ps(_mm512_set1_ps(xi), _mm512_load_ps(c));
  _mm512_store_ps(acc, _mm512_add_ps(_mm512_load_ps(acc), p));
}

// Lane-wise IEEE multiply then add (no contraction into FMA: dot_kernel rounds the product), so every
// lane holds exactly what dot_kernel computes for its centroid.
__attribute__((target("avx512f"))) ELDR_NO_FP_CONTRACT void centroid_dots_avx512(const CentroidTable& t, const float* x,
                                                                                 float* out)
{
  const DotLayout d(size_t(t.cols()));
  uint32_t* idx        = nonzero_buffer(d.n).data();
  const size_t count32 = compact_nonzero_avx512(x, 0, d.n32, idx, 0);
  const size_t count   = compact_nonzero_avx512(x, d.n32, d.n8, idx, count32);

  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const float* c = t.data() + g;
    alignas(64) float acc[32][16];
    for (auto& a : acc)
      _mm512_store_ps(a, _mm512_setzero_ps());
    for (size_t q = 0; q < count32; ++q)
      add_scaled_avx512(acc[idx[q] & 31], x[idx[q]], c + size_t(idx[q]) * stride);
    for (size_t q = count32; q < count; ++q)
      add_scaled_avx512(acc[idx[q] & 7], x[idx[q]], c + size_t(idx[q]) * stride);
    __m512 s[8];
    for (int l = 0; l < 8; ++l)
      s[l] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(acc[l]), _mm512_load_ps(acc[8 + l])),
                           _mm512_add_ps(_mm512_load_ps(acc[16 + l]), _mm512_load_ps(acc[24 + l])));
    __m512 r = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[4]), _mm512_add_ps(s[1], s[5])),
                             _mm512_add_ps(_mm512_add_ps(s[2], s[6]), _mm512_add_ps(s[3], s[7])));
    for (size_t i = d.n8; i < d.n; ++i)
      r = _mm512_add_ps(r, _mm512_mul_ps(_mm512_set1_ps(x[i]), _mm512_load_ps(c + i * stride)));
    const int left = t.rows() - g;
    _mm512_mask_storeu_ps(out + g, left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1), r);
  }
}

// The same computation with generic 16-float vectors (two AVX2 or four SSE registers: neither target
// has FMA, so nothing is contracted) and a scalar compaction.
__attribute__((target_clones("avx2", "default"))) void centroid_dots_portable(const CentroidTable& t, const float* x,
                                                                              float* out)
{
  using v16 = float __attribute__((vector_size(64)));
  const DotLayout d(size_t(t.cols()));
  uint32_t* idx = nonzero_buffer(d.n).data();
  size_t count = 0, count32 = 0;
  for (size_t i = 0; i < d.n8; ++i) {
    count32    = i == d.n32 ? count : count32;
    idx[count] = uint32_t(i);
    count += x[i] != 0;
  }
  if (d.n32 == d.n8)
    count32 = count;

  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const float* c = t.data() + g;
    v16 acc[32]    = {};
    v16 v;  // (loaded through memcpy, no vector-valued helper: its ABI differs per target)
    for (size_t q = 0; q < count; ++q) {
      __builtin_memcpy(&v, c + idx[q] * stride, sizeof v);
      acc[idx[q] & (q < count32 ? 31 : 7)] += x[idx[q]] * v;
    }
    v16 s[8];
    for (int l = 0; l < 8; ++l)
      s[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
    v16 r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (size_t i = d.n8; i < d.n; ++i) {
      __builtin_memcpy(&v, c + i * stride, sizeof v);
      r += x[i] * v;
    }
    for (int k = 0; k < 16 && g + k < t.rows(); ++k)
      out[g + k] = r[k];
  }
}

// Estimates from the float16 table: the non-zero dimensions of x compacted as for the exact kernel,
// then four independent fused chains per 16 centroids (their order does not matter: the bound covers
// any order).
__attribute__((target("avx512f"))) bool approx_dots_avx512(const CentroidTable& t, const float* x, float* approx,
                                                           float* bound)
{
  const size_t n     = size_t(t.cols());
  uint32_t* idx      = nonzero_buffer(n).data();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 sq          = _mm512_setzero_ps();
  size_t count       = 0;
  for (size_t b = 0; b < n; b += 16) {
    const __mmask16 valid = n - b >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - b)) - 1);
    const __m512 v        = _mm512_maskz_loadu_ps(valid, x + b);
    const __mmask16 nz    = _mm512_mask_cmpneq_ps_mask(valid, v, _mm512_setzero_ps());
    sq                    = _mm512_fmadd_ps(v, v, sq);
    _mm512_storeu_si512(idx + count,
                        _mm512_maskz_compress_epi32(nz, _mm512_add_epi32(lane, _mm512_set1_epi32(int(b)))));
    count += size_t(std::popcount(unsigned(nz)));
  }
  alignas(64) float squares[16];
  _mm512_store_ps(squares, sq);
  float sum = 0;
  for (float v : squares)
    sum += v;
  const float norm = std::sqrt(sum) * 1.001f;
  if (!std::isfinite(norm))
    return false;
  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const uint16_t* h = t.half_data() + g;
    // (A macro, not a lambda: a lambda would not inherit the target, and would return vectors.)
#define ELDR_APPROX_TERM(acc, q)                                                                                       \
  acc =                                                                                                                \
      _mm512_fmadd_ps(_mm512_set1_ps(x[idx[q]]),                                                                       \
                      _mm512_maskz_cvtph_ps(__mmask16(0xFFFF),                                                         \
                                            _mm256_load_si256(reinterpret_cast<const __m256i*>(h + idx[q] * stride))), \
                      acc)
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t q    = 0;
    for (; q + 4 <= count; q += 4)
      for (int u = 0; u < 4; ++u)
        ELDR_APPROX_TERM(a[u], q + size_t(u));
    for (; q < count; ++q)
      ELDR_APPROX_TERM(a[0], q);
#undef ELDR_APPROX_TERM
    const int left        = t.rows() - g;
    const __mmask16 store = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    _mm512_mask_storeu_ps(approx + g, store, _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
  }
  for (int k = 0; k < t.rows(); ++k)
    bound[k] = t.half_error(k) * norm;
  return true;
}

int best_dots_kernel()
{
  static const int k = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return k;
}

}  // namespace

bool detail::centroid_dots_with(int kernel, const CentroidTable& t, std::span<const float> x, std::span<float> out)
{
  if (x.size() != size_t(t.cols()) || out.size() != size_t(t.rows()))
    throw std::invalid_argument("centroid_dots: " + std::to_string(x.size()) + " dimensions and " +
                                std::to_string(out.size()) + " outputs for a " + std::to_string(t.rows()) + " x " +
                                std::to_string(t.cols()) + " table");
  if (kernel < 0)
    kernel = best_dots_kernel();
  if (kernel > best_dots_kernel())
    return false;
  if (kernel == 1)
    centroid_dots_avx512(t, x.data(), out.data());
  else
    centroid_dots_portable(t, x.data(), out.data());
  return true;
}

bool approx_centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> approx,
                          std::span<float> bound)
{
  if (x.size() != size_t(t.cols()) || approx.size() != size_t(t.rows()) || bound.size() != size_t(t.rows()))
    throw std::invalid_argument("approx_centroid_dots: sizes differ from the table's");
  return t.has_half() && approx_dots_avx512(t, x.data(), approx.data(), bound.data());
}

void centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> out)
{
  detail::centroid_dots_with(-1, t, x, out);
}

}  // namespace eldr
