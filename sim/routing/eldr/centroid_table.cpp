#include "sim/routing/eldr/centroid_table.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cpuid.h>
#include <immintrin.h>
#include <stdexcept>

namespace eldr {

namespace {

// Which kernel computes the estimates: 1 AVX-512F, 2 AVX2 with FMA and F16C (the same fused operations
// in the same order, so the same bits), 0 none (no float16 copy; the router computes every
// similarity exactly).
// AVX2 + FMA + F16C (F16C from cpuid: clang's __builtin_cpu_supports does not know "f16c").
bool has_avx2_fma_f16c()
{
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __get_cpuid(1, &a, &b, &c, &d) &&
           (c & bit_F16C) != 0;
  }();
  return yes;
}

int best_approx_kernel()
{
  static const int k = __builtin_cpu_supports("avx512f") ? 1 : has_avx2_fma_f16c() ? 2 : 0;
  return k;
}

// IEEE round to nearest even (every CPU with AVX-512F has F16C; the conversion is the same everywhere).
__attribute__((target("f16c"))) void to_half(const float* from, uint16_t* to, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(from + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i)
    to[i] = _cvtss_sh(from[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

__attribute__((target("f16c"))) double half_value(uint16_t h)
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
  if (best_approx_kernel() != 0) {
    half_.resize(values_.size());
    to_half(values_.data(), half_.data(), values_.size());
    // f_k = |c - h|_2 (the estimate's centroid error, Cauchy-Schwarz with |x|_2) + gamma (|c|_2 + |h|_2)
    // (float rounding of the exact and the estimated sums: at most n + 64 operations on any path, each
    // within 2^-24 relative) + 2^-20 (1 + |h|_2) (rounding of approx +- bound itself), 1 % on top.
    // Both estimate kernels (AVX-512F; AVX2 + FMA + F16C) perform the same fused operations in the
    // same order per lane, so this covers either.
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

// For each 8-bit mask, the positions of its set bits in ascending order, one per byte (AVX2 has no
// compress instruction; BMI2's pdep, the other way, is microcoded on AMD before Zen 3).
constexpr std::array<uint64_t, 256> kSetBitPositions = [] {
  std::array<uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m)
    for (unsigned b = 0, n = 0; b < 8; ++b)
      if (m >> b & 1)
        t[m] |= uint64_t(b) << (8 * n++);
  return t;
}();

// compact_nonzero_avx512 for AVX2: appends to idx[count..] base + j for the j < len where p[j] is
// non-zero (NaN included, -0 not), len a multiple of 8; stores 8 lanes a step (the buffer has 16 spare).
__attribute__((target("avx2"), always_inline)) inline size_t
compact_nonzero_avx2(const float* p, size_t len, size_t base, uint32_t* idx, size_t count)
{
  for (size_t j = 0; j < len; j += 8) {
    const unsigned nz =
        unsigned(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p + j), _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    const __m256i at = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(kSetBitPositions[nz])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + count),
                        _mm256_add_epi32(at, _mm256_set1_epi32(int(base + j))));
    count += size_t(std::popcount(nz));
  }
  return count;
}

// acc[0..16) += xi * c[0..16), multiply then add (the target has no FMA to contract into).
__attribute__((target("avx2"), always_inline)) ELDR_NO_FP_CONTRACT inline void add_scaled_avx2(float* acc, float xi,
                                                                                               const float* c)
{
  const __m256 v = _mm256_set1_ps(xi);
  _mm256_store_ps(acc, _mm256_add_ps(_mm256_load_ps(acc), _mm256_mul_ps(v, _mm256_load_ps(c))));
  _mm256_store_ps(acc + 8, _mm256_add_ps(_mm256_load_ps(acc + 8), _mm256_mul_ps(v, _mm256_load_ps(c + 8))));
}

// centroid_dots_avx512 with 8-float vectors (each 16-centroid row as two): the same lane-wise
// operations in the same order, so the same bits.
__attribute__((target("avx2"))) ELDR_NO_FP_CONTRACT void centroid_dots_avx2(const CentroidTable& t, const float* x,
                                                                            float* out)
{
  const DotLayout d(size_t(t.cols()));
  uint32_t* idx        = nonzero_buffer(d.n).data();
  const size_t count32 = compact_nonzero_avx2(x, d.n32, 0, idx, 0);
  const size_t count   = compact_nonzero_avx2(x + d.n32, d.n8 - d.n32, d.n32, idx, count32);

  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const float* c = t.data() + g;
    alignas(64) float acc[32][16];
    for (auto& a : acc) {
      _mm256_store_ps(a, _mm256_setzero_ps());
      _mm256_store_ps(a + 8, _mm256_setzero_ps());
    }
    for (size_t q = 0; q < count32; ++q)
      add_scaled_avx2(acc[idx[q] & 31], x[idx[q]], c + size_t(idx[q]) * stride);
    for (size_t q = count32; q < count; ++q)
      add_scaled_avx2(acc[idx[q] & 7], x[idx[q]], c + size_t(idx[q]) * stride);
    alignas(64) float r[16];
    for (int h = 0; h < 16; h += 8) {
      __m256 s[8];
      for (int l = 0; l < 8; ++l)
        s[l] = _mm256_add_ps(_mm256_add_ps(_mm256_load_ps(acc[l] + h), _mm256_load_ps(acc[8 + l] + h)),
                             _mm256_add_ps(_mm256_load_ps(acc[16 + l] + h), _mm256_load_ps(acc[24 + l] + h)));
      __m256 v = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[0], s[4]), _mm256_add_ps(s[1], s[5])),
                               _mm256_add_ps(_mm256_add_ps(s[2], s[6]), _mm256_add_ps(s[3], s[7])));
      for (size_t i = d.n8; i < d.n; ++i)
        v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(x[i]), _mm256_load_ps(c + i * stride + size_t(h))));
      _mm256_store_ps(r + h, v);
    }
    std::copy_n(r, std::min(16, t.rows() - g), out + g);
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

// The bound's |x|_2 factor from the 16 lanes' sums of squares, added in lane order (both estimate
// kernels, so the same bits): false when it is not finite.
bool norm_from_squares(const float (&squares)[16], float& norm)
{
  float sum = 0;
  for (float v : squares)
    sum += v;
  norm = std::sqrt(sum) * 1.001f;
  return std::isfinite(norm);
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
  float norm = 0;
  if (!norm_from_squares(squares, norm))
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

// approx_dots_avx512's steps for 8 of the 16 lanes at a time: the same squares (lane j of a 16-float
// block, ascending blocks) and the same fused terms in the same four chains per centroid, hence the
// same estimates and bounds bit for bit (the bound's derivation covers these operations only).
__attribute__((target("avx2,fma,f16c"), always_inline)) inline size_t
square_and_compact_avx2(const float* block, size_t b, __m256& sq_lo, __m256& sq_hi, uint32_t* idx, size_t count)
{
  const __m256 lo = _mm256_loadu_ps(block), hi = _mm256_loadu_ps(block + 8);
  sq_lo = _mm256_fmadd_ps(lo, lo, sq_lo);
  sq_hi = _mm256_fmadd_ps(hi, hi, sq_hi);
  return compact_nonzero_avx2(block, 16, b, idx, count);
}

__attribute__((target("avx2,fma,f16c"))) bool approx_dots_avx2(const CentroidTable& t, const float* x, float* approx,
                                                               float* bound)
{
  const size_t n = size_t(t.cols());
  uint32_t* idx  = nonzero_buffer(n).data();
  __m256 sq_lo = _mm256_setzero_ps(), sq_hi = _mm256_setzero_ps();
  size_t count = 0, b = 0;
  for (; b + 16 <= n; b += 16)
    count = square_and_compact_avx2(x + b, b, sq_lo, sq_hi, idx, count);
  if (b < n) {
    // The last block padded with zeros, as the AVX-512 kernel's masked load (x * x + sq = sq, and a
    // zero is not compacted).
    alignas(32) float pad[16] = {};
    std::copy(x + b, x + n, pad);
    count = square_and_compact_avx2(pad, b, sq_lo, sq_hi, idx, count);
  }
  alignas(32) float squares[16];
  _mm256_store_ps(squares, sq_lo);
  _mm256_store_ps(squares + 8, sq_hi);
  float norm = 0;
  if (!norm_from_squares(squares, norm))
    return false;
  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const uint16_t* h = t.half_data() + g;
#define ELDR_APPROX_TERM(lo, hi, q)                                                                                    \
  do {                                                                                                                 \
    const __m256 xi   = _mm256_set1_ps(x[idx[q]]);                                                                     \
    const uint16_t* p = h + idx[q] * stride;                                                                           \
    lo                = _mm256_fmadd_ps(xi, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p))), lo); \
    hi = _mm256_fmadd_ps(xi, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 8))), hi);            \
  } while (false)
    __m256 lo[4], hi[4];
    for (int u = 0; u < 4; ++u)
      lo[u] = hi[u] = _mm256_setzero_ps();
    size_t q = 0;
    for (; q + 4 <= count; q += 4)
      for (int u = 0; u < 4; ++u)
        ELDR_APPROX_TERM(lo[u], hi[u], q + size_t(u));
    for (; q < count; ++q)
      ELDR_APPROX_TERM(lo[0], hi[0], q);
#undef ELDR_APPROX_TERM
    alignas(32) float r[16];
    _mm256_store_ps(r, _mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(lo[2], lo[3])));
    _mm256_store_ps(r + 8, _mm256_add_ps(_mm256_add_ps(hi[0], hi[1]), _mm256_add_ps(hi[2], hi[3])));
    std::copy_n(r, std::min(16, t.rows() - g), approx + g);
  }
  for (int k = 0; k < t.rows(); ++k)
    bound[k] = t.half_error(k) * norm;
  return true;
}

// Exact kernels: 0 portable, 1 AVX-512F, 2 AVX2.
int best_dots_kernel()
{
  static const int k = __builtin_cpu_supports("avx512f") ? 1 : __builtin_cpu_supports("avx2") ? 2 : 0;
  return k;
}

bool has_dots_kernel(int kernel)
{
  return kernel == 0 || (kernel == 1 && __builtin_cpu_supports("avx512f")) ||
         (kernel == 2 && __builtin_cpu_supports("avx2"));
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
  if (!has_dots_kernel(kernel))
    return false;
  if (kernel == 1)
    centroid_dots_avx512(t, x.data(), out.data());
  else if (kernel == 2)
    centroid_dots_avx2(t, x.data(), out.data());
  else
    centroid_dots_portable(t, x.data(), out.data());
  return true;
}

bool detail::approx_centroid_dots_with(int kernel, const CentroidTable& t, std::span<const float> x,
                                       std::span<float> approx, std::span<float> bound)
{
  if (x.size() != size_t(t.cols()) || approx.size() != size_t(t.rows()) || bound.size() != size_t(t.rows()))
    throw std::invalid_argument("approx_centroid_dots: sizes differ from the table's");
  if (kernel < 0)
    kernel = best_approx_kernel();
  // The AVX-512 kernel where the CPU has it; the AVX2 one also there, as both read the same table.
  const bool has = t.has_half() && ((kernel == 1 && best_approx_kernel() == 1) || (kernel == 2 && has_avx2_fma_f16c()));
  if (!has)
    return false;
  return kernel == 1 ? approx_dots_avx512(t, x.data(), approx.data(), bound.data())
                     : approx_dots_avx2(t, x.data(), approx.data(), bound.data());
}

bool approx_centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> approx,
                          std::span<float> bound)
{
  return detail::approx_centroid_dots_with(-1, t, x, approx, bound);
}

void centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> out)
{
  detail::centroid_dots_with(-1, t, x, out);
}

}  // namespace eldr
