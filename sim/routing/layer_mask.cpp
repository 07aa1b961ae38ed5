#include "sim/routing/layer_mask.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace eldr {

namespace {

// Order-preserving 32-bit key of a float (negative values flipped entirely, positive ones get the
// sign bit): unsigned comparison of keys = numeric comparison of values. -0 is folded onto +0.
inline uint32_t float_key(float f)
{
  const uint32_t u = std::bit_cast<uint32_t>(f + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Spearman of keys x (one per pair) against fixed average ranks y. An LSD radix sort of (key - min,
// index) over just the bits in which the keys differ: a candidate mask's similarities span a small
// part of the float range (e.g. [0.3, 0.9] is 2^24 keys), so two passes of at most 13 bits (a 32 KB
// histogram, in L1) nearly always do, three otherwise. Then one walk gives ties their average rank.
class KeyRanker {
public:
  double spearman(std::span<const uint32_t> keys, std::span<const double> y_rank)
  {
    const size_t n = keys.size();
    if (n < 2)
      return 0;
    const auto [lo_it, hi_it] = std::minmax_element(keys.begin(), keys.end());
    const uint32_t lo = *lo_it, span = *hi_it - lo;
    const int bits    = std::bit_width(span);
    const int passes  = bits == 0 ? 0 : bits <= 26 ? 2 : 3;
    const int digit   = passes ? (bits + passes - 1) / passes : 0;
    const uint32_t mask = (uint32_t(1) << digit) - 1;
    a_.resize(n);
    b_.resize(n);
    hist_.assign(size_t(passes) << digit, 0);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t k = keys[i] - lo;
      a_[i]            = uint64_t(k) << 32 | uint32_t(i);
      for (int p = 0; p < passes; ++p)
        ++hist_[(size_t(p) << digit) + ((k >> (p * digit)) & mask)];
    }
    uint64_t* src = a_.data();
    uint64_t* dst = b_.data();
    for (int p = 0; p < passes; ++p) {
      const int shift = 32 + p * digit;
      uint32_t* h     = &hist_[size_t(p) << digit];
      uint32_t sum    = 0;
      for (uint32_t d = 0; d <= mask; ++d) {
        const uint32_t c = h[d];
        h[d]             = sum;
        sum += c;
      }
      for (size_t i = 0; i < n; ++i)
        dst[h[(src[i] >> shift) & mask]++] = src[i];
      std::swap(src, dst);
    }
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n;) {
      const uint32_t k = uint32_t(src[i] >> 32);
      size_t j         = i;
      double ys        = y_rank[uint32_t(src[i])];
      while (j + 1 < n && uint32_t(src[j + 1] >> 32) == k)
        ys += y_rank[uint32_t(src[++j])];
      const double avg = 0.5 * double(i + j) + 1.0;
      sxy += avg * ys;
      sxx += avg * avg * double(j - i + 1);
      i = j + 1;
    }
    for (double y : y_rank)
      syy += y * y;
    const double dn = double(n), m2 = dn * (0.5 * (dn + 1)) * (0.5 * (dn + 1));
    const double vx = sxx - m2, vy = syy - m2;
    return vx > 0 && vy > 0 ? (sxy - m2) / std::sqrt(vx * vy) : 0.0;
  }

private:
  std::vector<uint64_t> a_, b_;
  std::vector<uint32_t> hist_;
};

// Per layer, every pair's dot product and every request's squared norm of the variant's unnormalised
// layer values: a mask's cosine for a pair is sum(dot) / sqrt(sum(norm_a) * sum(norm_b)) over its layers.
struct LayerTerms {
  int layers = 0;
  size_t pairs = 0, requests = 0;
  std::vector<float> dot;    // [layer][pair]
  std::vector<double> norm;  // [layer][request]
};

LayerTerms layer_terms(std::span<const PromptProfile> prompts, const MaskPairs& pairs, SignatureVariant v,
                       const IdfTable* idf, std::span<const int> layers)
{
  if (prompts.size() != size_t(pairs.requests))
    throw std::invalid_argument("layer mask: " + std::to_string(prompts.size()) + " prompt profiles for pairs over " +
                                std::to_string(pairs.requests) + " requests");
  const int L = prompts[0].layers;
  const size_t E = size_t(prompts[0].experts), n = prompts.size(), m = pairs.size();
  for (const PromptProfile& p : prompts)
    if (p.layers != L || size_t(p.experts) != E)
      throw std::invalid_argument("layer mask: prompt profiles of different shapes");
  LayerTerms t;
  t.layers   = L;
  t.pairs    = m;
  t.requests = n;
  t.dot.assign(size_t(L) * m, 0.f);
  t.norm.assign(size_t(L) * n, 0.0);
  std::vector<float> slab(n * E);  // one layer's values of every request: E x 4 bytes each, stays in cache
  for (int l : layers) {
    if (l < 0 || l >= L)
      throw std::invalid_argument("layer mask: layer " + std::to_string(l) + " outside the model's " + std::to_string(L));
    for (size_t i = 0; i < n; ++i) {
      std::span<float> row(&slab[i * E], E);
      layer_values(prompts[i], v, idf, l, row);
      t.norm[size_t(l) * n + i] = dot(row, row);
    }
    float* d = &t.dot[size_t(l) * m];
    for (size_t p = 0; p < m; ++p)
      d[p] = dot({&slab[size_t(pairs.a[p]) * E], E}, {&slab[size_t(pairs.b[p]) * E], E});
  }
  return t;
}

// Keys of the pairs' cosine similarity for the layer sums `dot_sum` (+ `extra` dots) and per-request
// squared norms `norm_sum`; a zero norm gives similarity 0.
void similarity_keys(const MaskPairs& pairs, std::span<const double> dot_sum, const float* extra,
                     std::span<const double> norm_sum, std::vector<double>& inv, std::vector<uint32_t>& keys)
{
  inv.resize(norm_sum.size());
  for (size_t i = 0; i < norm_sum.size(); ++i)
    inv[i] = norm_sum[i] > 0 ? 1.0 / std::sqrt(norm_sum[i]) : 0.0;
  const size_t m = pairs.size();
  keys.resize(m);
  const uint32_t* a = pairs.a.data();
  const uint32_t* b = pairs.b.data();
  for (size_t p = 0; p < m; ++p) {
    const double num = dot_sum[p] + (extra ? double(extra[p]) : 0.0);
    keys[p]          = float_key(float(num * inv[a[p]] * inv[b[p]]));
  }
}

void check_pairs(const MaskPairs& pairs)
{
  if (pairs.requests < 2 || pairs.size() == 0 || pairs.b.size() != pairs.size() || pairs.target_rank.size() != pairs.size())
    throw std::invalid_argument("layer mask: no request pairs");
}

}  // namespace

std::vector<double> average_ranks(std::span<const double> v)
{
  std::vector<uint32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::sort(idx.begin(), idx.end(), [&](uint32_t x, uint32_t y) { return v[x] < v[y] || (v[x] == v[y] && x < y); });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]])
      ++j;
    const double avg = 0.5 * double(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k)
      r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

double spearman_with_ranks(std::span<const double> x, std::span<const double> y_rank)
{
  if (x.size() != y_rank.size())
    throw std::invalid_argument("spearman_with_ranks: sizes differ");
  std::vector<uint32_t> keys(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    keys[i] = float_key(float(x[i]));
  KeyRanker r;
  return r.spearman(keys, y_rank);
}

MaskPairs make_mask_pairs(std::span<const std::vector<uint16_t>> decode, int pairs, uint64_t seed)
{
  const size_t n = decode.size();
  if (n < 2)
    throw std::invalid_argument("layer mask: needs at least two calibration requests");
  if (pairs < 1)
    throw std::invalid_argument("layer mask: needs at least one pair");
  const size_t cells = decode[0].size();
  for (const auto& d : decode)
    if (d.size() != cells)
      throw std::invalid_argument("layer mask: decode profiles of different sizes");
  MaskPairs mp;
  mp.requests = int(n);
  Rng rng(seed, "mask.pairs");
  mp.a.resize(size_t(pairs));
  mp.b.resize(size_t(pairs));
  for (size_t p = 0; p < size_t(pairs); ++p) {
    const uint64_t a = rng.below(n);
    uint64_t b       = rng.below(n - 1);
    if (b >= a)
      ++b;
    mp.a[p] = uint32_t(a);
    mp.b[p] = uint32_t(b);
  }
  // Decode profiles as floats once (cells x 4 bytes a request), then a dot product per pair.
  std::vector<float> f(n * cells);
  std::vector<double> norm(n);
  for (size_t i = 0; i < n; ++i) {
    std::span<float> row(&f[i * cells], cells);
    std::copy(decode[i].begin(), decode[i].end(), row.begin());
    norm[i] = dot(row, row);
  }
  mp.target.resize(size_t(pairs));
  for (size_t p = 0; p < size_t(pairs); ++p) {
    const size_t a = mp.a[p], b = mp.b[p];
    const double den = norm[a] * norm[b];
    mp.target[p] = den > 0 ? double(dot({&f[a * cells], cells}, {&f[b * cells], cells})) / std::sqrt(den) : 0.0;
  }
  mp.target_rank = average_ranks(mp.target);
  return mp;
}

LayerMask fit_layer_mask(std::span<const PromptProfile> prompts, const MaskPairs& pairs, SignatureVariant v,
                         const IdfTable* idf, const LayerMaskOptions& opt)
{
  check_pairs(pairs);
  if (prompts.empty())
    throw std::invalid_argument("layer mask: no prompt profiles");
  const int L = prompts[0].layers;
  std::vector<int> all(static_cast<size_t>(L));
  std::iota(all.begin(), all.end(), 0);
  const LayerTerms t = layer_terms(prompts, pairs, v, idf, all);
  const size_t m = t.pairs, n = t.requests;

  LayerMask mask;
  mask.variant = v;
  std::vector<double> cur_dot(m, 0.0), cur_norm(n, 0.0), cand_norm(n), inv;
  std::vector<uint32_t> keys;
  std::vector<char> used(size_t(L), 0);
  KeyRanker ranker;
  const int limit = opt.max_layers > 0 ? std::min(opt.max_layers, L) : L;
  while (int(mask.layers.size()) < limit) {
    int best_layer = -1;
    double best    = -std::numeric_limits<double>::infinity();
    for (int l = 0; l < L; ++l) {
      if (used[size_t(l)])
        continue;
      const double* nl = &t.norm[size_t(l) * n];
      for (size_t i = 0; i < n; ++i)
        cand_norm[i] = cur_norm[i] + nl[i];
      similarity_keys(pairs, cur_dot, &t.dot[size_t(l) * m], cand_norm, inv, keys);
      const double s = ranker.spearman(keys, pairs.target_rank);
      if (s > best) {  // strict: the lowest layer wins ties
        best       = s;
        best_layer = l;
      }
    }
    if (best_layer < 0 || (!mask.layers.empty() && !(best > mask.spearman.back() + opt.min_gain)))
      break;
    used[size_t(best_layer)] = 1;
    const float* dl          = &t.dot[size_t(best_layer) * m];
    for (size_t p = 0; p < m; ++p)
      cur_dot[p] += double(dl[p]);
    const double* nl = &t.norm[size_t(best_layer) * n];
    for (size_t i = 0; i < n; ++i)
      cur_norm[i] += nl[i];
    mask.layers.push_back(best_layer);
    mask.spearman.push_back(best);
  }
  return mask;
}

LayerMask fit_layer_mask(std::span<const PromptProfile> prompts, std::span<const std::vector<uint16_t>> decode,
                         SignatureVariant v, const IdfTable* idf, const LayerMaskOptions& opt)
{
  if (prompts.size() != decode.size())
    throw std::invalid_argument("layer mask: prompt and decode profiles of different request counts");
  const MaskPairs pairs = make_mask_pairs(decode, opt.pairs, opt.seed);
  return fit_layer_mask(prompts, pairs, v, idf, opt);
}

double mask_spearman(std::span<const PromptProfile> prompts, const MaskPairs& pairs, SignatureVariant v,
                     const IdfTable* idf, std::span<const int> layers)
{
  check_pairs(pairs);
  if (prompts.empty() || layers.empty())
    throw std::invalid_argument("mask_spearman: no profiles or no layers");
  std::vector<int> sorted(layers.begin(), layers.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument("mask_spearman: a layer appears twice");
  const LayerTerms t = layer_terms(prompts, pairs, v, idf, layers);
  std::vector<double> dot_sum(t.pairs, 0.0), norm_sum(t.requests, 0.0), inv;
  for (int l : layers) {
    for (size_t p = 0; p < t.pairs; ++p)
      dot_sum[p] += double(t.dot[size_t(l) * t.pairs + p]);
    for (size_t i = 0; i < t.requests; ++i)
      norm_sum[i] += t.norm[size_t(l) * t.requests + i];
  }
  std::vector<uint32_t> keys;
  similarity_keys(pairs, dot_sum, nullptr, norm_sum, inv, keys);
  KeyRanker r;
  return r.spearman(keys, pairs.target_rank);
}

}  // namespace eldr
