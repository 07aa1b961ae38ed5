#pragma once
// ELDR expert signatures (docs/design.md section 1). A request's prompt routing is summarised as a
// PromptProfile: per (layer, expert) how many prompt tokens picked the expert, and optionally the
// summed gate probabilities and raw gate scores of those picks. A signature keeps the layers of a
// layer mask (layer_mask.hpp), in mask order, turns each cell into a value by the variant, and is
// L2-normalised once over everything it keeps, so the cosine of two signatures is their dot product.
//
// Plain C++ (no SimGrid). All [layer][expert] arrays are layer-major: index l * experts + e.
//
// The pieces live in their own headers, included here: signature_variant.hpp (the variants),
// sim/gating/gate_source.hpp (gate values), sim/gating/prompt_profile.hpp (profiles and their
// counting kernels) and centroid_table.hpp (similarity to K centroids).
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/gating/prompt_profile.hpp"
#include "sim/routing/eldr/centroid_table.hpp"
#include "sim/routing/signature_variant.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace eldr {

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

// Cosine similarity of two vectors of any norm (0 when either is all zeros).
double cosine(std::span<const float> a, std::span<const float> b);

// Bytes a signature adds to the prefill -> decode KV transfer (issue 4 item 8): the int16
// [layers x experts] count matrix, from which every count-based variant is rebuilt: 12 KiB for
// Qwen3-30B-A3B (48 x 128). A gate variant carries its float32 [layers x experts] sums instead (24 KiB).
inline size_t signature_transport_bytes(const GatingShape& shape, SignatureVariant v = kDefaultSignatureVariant)
{
  const bool gates = v == SignatureVariant::gate_prob || v == SignatureVariant::gate_score;
  return size_t(shape.layers) * size_t(shape.experts) * (gates ? sizeof(float) : sizeof(int16_t));
}

}  // namespace eldr
