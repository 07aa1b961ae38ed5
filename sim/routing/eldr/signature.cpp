#include "sim/routing/eldr/signature.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace eldr {

// --- IDF -----------------------------------------------------------------------------------------

IdfTable fit_idf(std::span<const PromptProfile> calibration)
{
  if (calibration.empty())
    throw std::invalid_argument("fit_idf: no calibration profiles");
  IdfTable t;
  t.layers           = calibration[0].layers;
  t.experts          = calibration[0].experts;
  t.requests         = int(calibration.size());
  const size_t cells = size_t(t.layers) * size_t(t.experts);
  std::vector<uint32_t> df(cells, 0);
  for (const PromptProfile& p : calibration) {
    if (p.layers != t.layers || p.experts != t.experts || p.counts.size() != cells)
      throw std::invalid_argument("fit_idf: profiles of different shapes");
    for (size_t c = 0; c < cells; ++c)
      df[c] += p.counts[c] > 0;
  }
  t.idf.resize(cells);
  const double n1 = double(t.requests) + 1;
  for (size_t c = 0; c < cells; ++c)
    t.idf[c] = float(std::log(n1 / (double(df[c]) + 1)));
  return t;
}

// --- Signatures ----------------------------------------------------------------------------------

void layer_values(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, int layer, std::span<float> out)
{
  const size_t E = size_t(p.experts), base = size_t(layer) * E;
  if (layer < 0 || layer >= p.layers || out.size() < E)
    throw std::invalid_argument("layer_values: layer outside the profile or output too small");
  const uint16_t* c = &p.counts[base];
  switch (v) {
  case SignatureVariant::counts:
    for (size_t e = 0; e < E; ++e)
      out[e] = float(c[e]);
    break;
  case SignatureVariant::counts_idf: {
    if (!idf || idf->layers != p.layers || idf->experts != p.experts)
      throw std::invalid_argument("counts_idf signature needs an IDF table of the profile's shape");
    const float* w = &idf->idf[base];
    for (size_t e = 0; e < E; ++e)
      out[e] = float(c[e]) * w[e];
    break;
  }
  case SignatureVariant::sqrt_counts:
    for (size_t e = 0; e < E; ++e)
      out[e] = std::sqrt(float(c[e]));
    break;
  case SignatureVariant::binary:
    for (size_t e = 0; e < E; ++e)
      out[e] = c[e] > 0 ? 1.f : 0.f;
    break;
  case SignatureVariant::gate_prob:
  case SignatureVariant::gate_score: {
    const std::vector<float>& g = v == SignatureVariant::gate_prob ? p.gate_prob : p.gate_score;
    if (g.empty())
      throw std::invalid_argument(std::string(to_string(v)) + " signature needs a profile with that gate sum");
    std::copy(g.begin() + std::ptrdiff_t(base), g.begin() + std::ptrdiff_t(base + E), out.begin());
    break;
  }
  }
}

void make_signature(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, std::span<const int> mask_layers,
                    std::span<float> out)
{
  const size_t E = size_t(p.experts);
  if (out.size() != mask_layers.size() * E)
    throw std::invalid_argument("make_signature: output must hold |mask| x experts floats");
  for (size_t k = 0; k < mask_layers.size(); ++k)
    layer_values(p, v, idf, mask_layers[k], out.subspan(k * E, E));
  double norm2 = 0;
  for (float x : out)
    norm2 += double(x) * double(x);
  if (norm2 > 0) {
    const float inv = float(1.0 / std::sqrt(norm2));
    for (float& x : out)
      x *= inv;
  }
}

Signature make_signature(const PromptProfile& p, SignatureVariant v, const IdfTable* idf,
                         std::span<const int> mask_layers)
{
  Signature s(mask_layers.size() * size_t(p.experts));
  make_signature(p, v, idf, mask_layers, s);
  return s;
}

__attribute__((target_clones("avx2", "default"))) float dot(std::span<const float> a, std::span<const float> b)
{
  return detail::dot_kernel(a.data(), b.data(), std::min(a.size(), b.size()));
}

double cosine(std::span<const float> a, std::span<const float> b)
{
  const double ab = dot(a, b), aa = dot(a, a), bb = dot(b, b);
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

}  // namespace eldr
