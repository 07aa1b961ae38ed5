#pragma once
// K centroids laid out for fast similarity of one signature to all of them (ELDR's decision).
#include <cstdint>
#include <new>
#include <span>
#include <vector>

namespace eldr {

// K centroid rows laid out for centroid_dots(): element (k, i) at data()[i * stride() + k], stride = K
// rounded up to 16 (padding zero), 64-byte aligned, so the K values of one signature dimension are one
// AVX-512 vector (a cache line per 16 centroids).
class CentroidTable {
 public:
  CentroidTable() = default;
  // `rows` x `cols` row-major floats.
  CentroidTable(std::span<const float> row_major, int rows, int cols);
  int rows() const { return rows_; }
  int cols() const { return cols_; }
  int stride() const { return stride_; }
  const float* data() const { return values_.data(); }
  // The same layout in float16 (built when the CPU has an approx_centroid_dots kernel: AVX-512F, or
  // AVX2 with FMA and F16C; else empty), and per centroid the factor f_k of its error bound.
  const uint16_t* half_data() const { return half_.data(); }
  bool has_half() const { return !half_.empty(); }
  float half_error(int k) const { return half_error_[size_t(k)]; }

 private:
  template <class T> struct Aligned64 {
    using value_type = T;
    Aligned64()      = default;
    template <class U> Aligned64(const Aligned64<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    bool operator==(const Aligned64&) const { return true; }
  };
  int rows_ = 0, cols_ = 0, stride_ = 0;
  std::vector<float, Aligned64<float>> values_;
  std::vector<uint16_t, Aligned64<uint16_t>> half_;
  std::vector<float> half_error_;
};

// out[k] = dot(centroid row k, x), bit for bit (the same 32 partial sums, each in ascending index
// order, and the same reduction tree as dot_kernel), for k < rows. Cheaper than K dot() calls on a
// signature's typical sparsity (~60 % non-zero): a zero x[i] is skipped (adding x[i] * c = +-0 to a
// partial sum never changes it), and each non-zero one costs a multiply and an add of 16 centroids.
// AVX-512F and AVX2 find the non-zero x[i] with vector compares (AVX2: a table of bit positions per
// 8-bit mask), other CPUs one by one; every kernel gives the same bits.
// x.size() must equal cols() and out.size() rows(), else std::invalid_argument.
void centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> out);

// Cheap bounded estimates of the same dots from the float16 copy (a table half the size, which stays in
// L1): |approx[k] - dot(centroid row k, x)| <= bound[k], where bound[k] = f_k x |x|_2 and f_k covers
// the float16 rounding of the centroid (|c_k - half(c_k)|_2, exactly measured at build), both sums'
// float rounding and the bound's own (DESIGN of the decision: docs/eldr.md). A caller needing exact
// comparisons computes dot() only where an interval straddles the threshold. Kernels: AVX-512F, and
// AVX2 with FMA and F16C, which performs the same fused operations in the same order (the same
// estimates and bounds, bit for bit); no estimates on other CPUs. False, with nothing written, when the
// table has no float16 copy or x is not finite (|x|_2 overflows or is NaN).
bool approx_centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> approx,
                          std::span<float> bound);

namespace detail {
// centroid_dots with a chosen kernel: 0 portable (generic vectors, SSE2 or AVX2 clone, the same bits),
// 1 AVX-512F, 2 AVX2, -1 the best the CPU has. False (nothing done) when the CPU lacks the kernel.
bool centroid_dots_with(int kernel, const CentroidTable& t, std::span<const float> x, std::span<float> out);
// approx_centroid_dots with a chosen kernel: 1 AVX-512F, 2 AVX2 + FMA + F16C, -1 the best the CPU has.
// False (nothing written) when the CPU lacks the kernel, the table has no float16 copy or x is not finite.
bool approx_centroid_dots_with(int kernel, const CentroidTable& t, std::span<const float> x, std::span<float> approx,
                               std::span<float> bound);
}  // namespace detail

}  // namespace eldr
