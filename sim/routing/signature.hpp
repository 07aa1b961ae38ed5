#pragma once
// ELDR expert signatures (DESIGN.md section 1). A request's prompt routing is summarised as a
// PromptProfile: per (layer, expert) how many prompt tokens picked the expert, and optionally the
// summed gate probabilities and raw gate scores of those picks. A signature keeps the layers of a
// layer mask (layer_mask.hpp), in mask order, turns each cell into a value by the variant, and is
// L2-normalised once over everything it keeps, so the cosine of two signatures is their dot product.
//
// Plain C++ (no SimGrid). All [layer][expert] arrays are layer-major: index l * experts + e.
#include "sim/workload/expert_routing.hpp"
#include "sim/workload/request.hpp"

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eldr {

// The value of a cell (l, e) of a profile with count c: c; c x idf[l][e]; sqrt(c); 1 if c > 0 else 0;
// the summed gate probability; the summed raw gate score.
enum class SignatureVariant { counts, counts_idf, sqrt_counts, binary, gate_prob, gate_score };

inline constexpr SignatureVariant kDefaultSignatureVariant = SignatureVariant::counts_idf;
inline constexpr SignatureVariant kAllSignatureVariants[] = {
    SignatureVariant::counts, SignatureVariant::counts_idf, SignatureVariant::sqrt_counts,
    SignatureVariant::binary, SignatureVariant::gate_prob,  SignatureVariant::gate_score};

// "counts", "counts_idf", "sqrt_counts", "binary", "gate_prob", "gate_score".
std::string_view to_string(SignatureVariant v);
std::optional<SignatureVariant> parse_signature_variant(std::string_view name);

// --- Gate values ---------------------------------------------------------------------------------

// The gate values of the experts a token picked: what the gate_prob and gate_score variants sum.
class GateSource {
public:
  static constexpr size_t kMaxGateTables = 64;
  virtual ~GateSource() = default;
  // Whether raw gate scores (the router's logits) are known; probabilities always are.
  virtual bool has_scores() const = 0;
  // Token `token` of `r`, one value per pick, layer-major, each layer's picks in ascending expert id
  // (the order of the set bits of the token's masks): `prob` and `score` hold layers x top_k floats
  // each. `score` may be empty (not wanted); it must be when !has_scores().
  virtual void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const = 0;

  // Optional fast path, for sources whose gate values depend on a token only through one of a few
  // dense tables (generated routing: its palette). The table of token `token`, or -1 (none: the
  // default); a request's tokens may use at most kMaxGateTables tables (shared prompt blocks route as
  // their first holder's tokens, so a prompt may mix a few requests' tables). Then gate sums are per-table counts times
  // the table, instead of a gather per pick.
  virtual int token_table(const Request&, int) const { return -1; }
  // A table's gate probabilities and raw scores, [layer][expert] (scores empty without has_scores()).
  virtual std::span<const float> table_prob(int) const { return {}; }
  virtual std::span<const float> table_score(int) const { return {}; }
};

// The gates of a routing source, or nullptr when it has none:
//   GeneratedRouting: probability = softmax over the layer of the token's palette logits, taken at the
//     picked expert; score = that logit (docs/routing-model.md). Both available.
//   ReplayRouting with gate values in its file: probability = the recorded gate value (the weight the
//     engine applied, DESIGN/trace-format 7.1); no raw scores (the format does not carry logits).
//   ReplayRouting without gates, UniformRouting, anything else: nullptr.
// The returned object refers to `routing`, which must outlive it.
std::unique_ptr<GateSource> make_gate_source(const ExpertRoutingSource& routing);

// Whether signatures of `v` can be built with `gates` (nullptr = no gate source): counts-based
// variants always; gate_prob needs a gate source; gate_score one with scores.
bool gates_support(const GateSource* gates, SignatureVariant v);

// --- Profiles -----------------------------------------------------------------------------------

// Which optional sums a profile gathers (counts are always gathered).
struct ProfileFields {
  bool gate_prob  = false;
  bool gate_score = false;
};
// What the signature variant `v` needs.
ProfileFields fields_for(SignatureVariant v);

// Activations of a request's prompt tokens, [layer][expert].
struct PromptProfile {
  int layers  = 0;
  int experts = 0;
  std::vector<uint16_t> counts;  // prompt tokens that picked (l, e); at most 65535 (more throws)
  std::vector<float> gate_prob;  // sum of their gate probabilities; empty when not gathered
  std::vector<float> gate_score; // sum of their raw gate scores; empty when not gathered
};

// An all-zero profile of `shape` with the requested sums allocated.
PromptProfile empty_profile(const RoutingShape& shape, ProfileFields fields = {});

// Adds tokens [begin, end) of `r` to `into` (counts, and the gate sums that `into` has allocated, read
// from `gates`). Token ranges of one request add up: a prompt's profile is the sum of its KV blocks'.
// `only_layers` (empty: all) restricts the work to those layers, the others' cells are left alone: a
// router needs only its mask's layers, and counting costs in proportion to the layers counted
// (~95 ns a token for Qwen3-30B-A3B's 48 layers with AVX-512BW). Throws std::invalid_argument if gate
// sums are allocated but `gates` cannot supply them or a layer is out of range, and
// std::overflow_error if a count would exceed 65535.
void add_tokens(const ExpertRoutingSource& routing, const Request& r, int begin, int end, PromptProfile& into,
                const GateSource* gates = nullptr, std::span<const int> only_layers = {});

// The profile of r's prompt, tokens 0 .. prompt_tokens - 1 (on `only_layers`, as add_tokens).
PromptProfile count_prompt(const ExpertRoutingSource& routing, const Request& r, ProfileFields fields = {},
                           const GateSource* gates = nullptr, std::span<const int> only_layers = {});

// Cellwise sum (e.g. cached KV-block profiles): same shape; gate sums present in `part` must be
// present in `into`.
void add_profile(PromptProfile& into, const PromptProfile& part);

// Decode profile [layer][expert]: activation counts over the output tokens that run through the
// model, positions P .. P+O-2 (the last output token is only sampled).
std::vector<uint16_t> count_decode(const ExpertRoutingSource& routing, const Request& r);

// Lower-level: adds one token's masks (RoutingShape layout) to [layer][expert] counts, bit by bit.
void add_mask_counts(std::span<const uint64_t> masks, const RoutingShape& shape, std::span<uint16_t> counts);

namespace detail {
// The counting kernels behind add_tokens, for tests and benchmarks: 0 = scalar (add_mask_counts),
// 1 = AVX2, 2 = AVX-512BW byte lanes, -1 = the best the CPU has (what add_tokens uses for 8 tokens or
// more). Adds `tokens` to `counts`; false (nothing done) when the CPU lacks the kernel.
bool count_masks_with(int kernel, std::span<const std::span<const uint64_t>> tokens, const RoutingShape& shape,
                      std::span<uint16_t> counts);
}  // namespace detail

// --- IDF ----------------------------------------------------------------------------------------

// idf[l][e] = ln((N + 1) / (df[l][e] + 1)), df = calibration prompts that activated e at l.
struct IdfTable {
  int layers   = 0;
  int experts  = 0;
  int requests = 0;  // N
  std::vector<float> idf;
  float at(int layer, int expert) const { return idf[size_t(layer) * size_t(experts) + size_t(expert)]; }
};

// Throws std::invalid_argument on an empty set or profiles of different shapes.
IdfTable fit_idf(std::span<const PromptProfile> calibration);

// --- Signatures ---------------------------------------------------------------------------------

// A signature: |mask| x experts floats, the mask's layers in mask order, unit L2 norm (all zeros when
// the profile has nothing on the mask's layers).
using Signature = std::vector<float>;

// Unnormalised values of layer `layer` (experts floats) into `out`. `idf` is required for counts_idf
// and ignored otherwise; the gate variants need the profile's gate sums. std::invalid_argument otherwise.
void layer_values(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, int layer, std::span<float> out);

// The signature of `p` on `mask_layers` (mask order): values per layer, concatenated, one global L2
// normalisation. `out` must hold mask_layers.size() x experts floats.
void make_signature(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, std::span<const int> mask_layers,
                    std::span<float> out);
Signature make_signature(const PromptProfile& p, SignatureVariant v, const IdfTable* idf,
                         std::span<const int> mask_layers);

// Dot product in float (vectorised, AVX2 where the CPU has it; the same result on every CPU). For
// unit signatures it is their cosine similarity.
float dot(std::span<const float> a, std::span<const float> b);

namespace detail {
// The kernel of dot(), to inline into loops compiled for a target (target_clones): four chains of
// 8-float vectors (lane-wise IEEE arithmetic in a fixed order, so SSE and AVX give the same bits), a
// fixed reduction tree, then the tail.
[[gnu::always_inline]] inline float dot_kernel(const float* x, const float* y, size_t n)
{
  using v8 = float __attribute__((vector_size(32)));
  v8 s[4]  = {};
  v8 u, w;  // unaligned loads through memcpy (no vector-valued helper: its ABI differs without AVX)
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      __builtin_memcpy(&u, x + i + 8 * k, sizeof u);
      __builtin_memcpy(&w, y + i + 8 * k, sizeof w);
      s[k] += u * w;
    }
  for (; i + 8 <= n; i += 8) {
    __builtin_memcpy(&u, x + i, sizeof u);
    __builtin_memcpy(&w, y + i, sizeof w);
    s[0] += u * w;
  }
  const v8 t = (s[0] + s[1]) + (s[2] + s[3]);
  float r    = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
  for (; i < n; ++i)
    r += x[i] * y[i];
  return r;
}
}  // namespace detail

// --- Similarity to K centroids -----------------------------------------------------------------

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
  // The same layout in float16 (built when the CPU has AVX-512F, else empty), and per centroid the
  // factor f_k of approx_centroid_dots' error bound.
  const uint16_t* half_data() const { return half_.data(); }
  bool has_half() const { return !half_.empty(); }
  float half_error(int k) const { return half_error_[size_t(k)]; }

private:
  template <class T> struct Aligned64 {
    using value_type = T;
    Aligned64() = default;
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
// x.size() must equal cols() and out.size() rows(), else std::invalid_argument.
void centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> out);

// Cheap bounded estimates of the same dots from the float16 copy (a table half the size, which stays in
// L1): |approx[k] - dot(centroid row k, x)| <= bound[k], where bound[k] = f_k x |x|_2 and f_k covers
// the float16 rounding of the centroid (|c_k - half(c_k)|_2, exactly measured at build), both sums'
// float rounding and the bound's own (DESIGN of the decision: docs/eldr.md). A caller needing exact
// comparisons computes dot() only where an interval straddles the threshold. False, with nothing
// written, when the table has no float16 copy or x is not finite (|x|_2 overflows or is NaN).
bool approx_centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> approx,
                          std::span<float> bound);

namespace detail {
// centroid_dots with a chosen kernel: 0 portable (SSE2/AVX2 vectors, the same bits), 1 AVX-512F,
// -1 the best the CPU has. False (nothing done) when the CPU lacks the kernel.
bool centroid_dots_with(int kernel, const CentroidTable& t, std::span<const float> x, std::span<float> out);
}  // namespace detail

// Cosine similarity of two vectors of any norm (0 when either is all zeros).
double cosine(std::span<const float> a, std::span<const float> b);

// Bytes a signature adds to the prefill -> decode KV transfer (issue 4 item 8): the int16
// [layers x experts] count matrix, from which every count-based variant is rebuilt: 12 KiB for
// Qwen3-30B-A3B (48 x 128). A gate variant carries its float32 [layers x experts] sums instead (24 KiB).
inline size_t signature_transport_bytes(const RoutingShape& shape, SignatureVariant v = kDefaultSignatureVariant)
{
  const bool gates = v == SignatureVariant::gate_prob || v == SignatureVariant::gate_score;
  return size_t(shape.layers) * size_t(shape.experts) * (gates ? sizeof(float) : sizeof(int16_t));
}

}  // namespace eldr
