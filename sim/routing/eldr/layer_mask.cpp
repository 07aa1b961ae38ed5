#include "sim/routing/eldr/layer_mask.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
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

constexpr int kMaxPairs = 1 << 21;

// Spearman of keys x (one per pair) against fixed average ranks y. The keys, less their minimum, keep
// their top 24 bits (keys closer than 2^-24 of the keys' span tie and share their average rank: about
// float precision, since a similarity's key is its float's bits), then (key, 2 y) is sorted by an LSD
// radix sort of three 8-bit passes: 256 buckets keep the scatter in L1, and carrying y in the element
// spares a gather in the walk that averages tied ranks. At 30,000 pairs ~0.15 ms: ~1.6x faster than
// three 11-bit passes over the full keys, ~9x faster than std::sort.
class KeyRanker {
 public:
  // `y2`: twice the average ranks of the target (integers), one per pair.
  explicit KeyRanker(std::vector<uint32_t> y2) : y2_(std::move(y2))
  {
    for (uint32_t y : y2_)
      syy4_ += uint64_t(y) * y;
  }
  double spearman(std::span<const uint32_t> keys)
  {
    const size_t n                  = keys.size();
    const std::vector<uint32_t>& y2 = y2_;
    if (n < 2 || y2.size() != n)
      return 0;
    uint32_t lo = ~uint32_t(0), hi = 0;  // (a plain loop vectorises; std::minmax_element does not)
    for (uint32_t k : keys) {
      lo = std::min(lo, k);
      hi = std::max(hi, k);
    }
    const int shift  = std::max(0, int(std::bit_width(hi - lo)) - 24);
    const int passes = (int(std::bit_width((hi - lo) >> shift)) + 7) / 8;
    a_.resize(n);
    b_.resize(n);
    uint32_t hist[3][256] = {};
    for (size_t i = 0; i < n; ++i) {
      const uint32_t q = (keys[i] - lo) >> shift;
      a_[i]            = uint64_t(q) << 32 | y2[i];
      ++hist[0][q & 255];
      ++hist[1][(q >> 8) & 255];
      ++hist[2][q >> 16];
    }
    uint64_t* src = a_.data();
    uint64_t* dst = b_.data();
    for (int p = 0; p < passes; ++p) {
      uint32_t* h  = hist[p];
      uint32_t sum = 0;
      for (int d = 0; d < 256; ++d) {
        const uint32_t c = h[d];
        h[d]             = sum;
        sum += c;
      }
      const int at = 32 + 8 * p;
      for (size_t i = 0; i < n; ++i)
        dst[h[(src[i] >> at) & 255]++] = src[i];
      std::swap(src, dst);
    }
    // Walk: a run of equal keys (positions i..j) gets the average rank (i + j + 2) / 2. Sums of
    // doubled ranks in integers: exact, and no floating-point add chain; they stay below 2^64 up to
    // kMaxPairs (the sums are about 4/3 n^3).
    uint64_t sxy4 = 0, sxx4 = 0;
    for (size_t i = 0; i < n;) {
      const uint64_t k = src[i] >> 32;
      size_t j         = i;
      uint64_t ys      = src[i] & 0xffffffffu;
      while (j + 1 < n && (src[j + 1] >> 32) == k)
        ys += src[++j] & 0xffffffffu;
      const uint64_t r2 = i + j + 2;
      sxy4 += r2 * ys;
      sxx4 += r2 * r2 * (j - i + 1);
      i = j + 1;
    }
    const double dn = double(n), m4 = dn * (dn + 1) * (dn + 1);  // 4 n mean^2
    const double vx = double(sxx4) - m4, vy = double(syy4_) - m4;
    return vx > 0 && vy > 0 ? (double(sxy4) - m4) / std::sqrt(vx * vy) : 0.0;
  }

 private:
  std::vector<uint32_t> y2_;
  uint64_t syy4_ = 0;
  std::vector<uint64_t> a_, b_;
};

std::vector<uint32_t> twice(std::span<const double> ranks)
{
  std::vector<uint32_t> y2(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i)
    y2[i] = uint32_t(std::lround(2 * ranks[i]));
  return y2;
}

// out[p] = <rows a[p], b[p]> of a row-major n x E slab: the bulk of the mask's precomputation.
__attribute__((target_clones("avx2", "default"))) void pair_dots(const float* slab, size_t E, const uint32_t* a,
                                                                 const uint32_t* b, size_t m, float* out)
{
  for (size_t p = 0; p < m; ++p)
    out[p] = detail::dot_kernel(slab + size_t(a[p]) * E, slab + size_t(b[p]) * E, E);
}

// Per layer, every pair's dot product and every request's squared norm of the variant's unnormalised
// layer values: a mask's cosine for a pair is sum(dot) / sqrt(sum(norm_a) * sum(norm_b)) over its layers.
struct LayerTerms {
  int layers   = 0;
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
  const int L    = prompts[0].layers;
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
      throw std::invalid_argument("layer mask: layer " + std::to_string(l) + " outside the model's " +
                                  std::to_string(L));
    for (size_t i = 0; i < n; ++i) {
      std::span<float> row(&slab[i * E], E);
      layer_values(prompts[i], v, idf, l, row);
      t.norm[size_t(l) * n + i] = dot(row, row);
    }
    pair_dots(slab.data(), E, pairs.a.data(), pairs.b.data(), m, &t.dot[size_t(l) * m]);
  }
  return t;
}

// 1 / sqrt(norm) per request, 0 for a zero norm (its similarity to anything is then 0).
void inverse_norms(std::span<const double> norm_sum, std::vector<double>& inv)
{
  inv.resize(norm_sum.size());
  for (size_t i = 0; i < norm_sum.size(); ++i)
    inv[i] = norm_sum[i] > 0 ? 1.0 / std::sqrt(norm_sum[i]) : 0.0;
}

// Keys of the pairs' cosine similarity: (dot_sum + extra) x inv[a] x inv[b].
void similarity_keys(std::span<const uint32_t> a, std::span<const uint32_t> b, std::span<const double> dot_sum,
                     const float* extra, std::span<const double> inv, std::vector<uint32_t>& keys)
{
  const size_t m = a.size();
  keys.resize(m);
  for (size_t p = 0; p < m; ++p) {
    const double num = dot_sum[p] + (extra ? double(extra[p]) : 0.0);
    keys[p]          = float_key(float(num * inv[a[p]] * inv[b[p]]));
  }
}

// A set of pairs scoring masks incrementally: per-layer pair dots, the running dot sums of the
// current mask, and the target's ranks.
struct PairScorer {
  std::vector<uint32_t> a, b;
  std::vector<float> dot;   // [layer][pair]
  std::vector<double> cur;  // the current mask's dot sums
  KeyRanker ranker;
  std::vector<uint32_t> keys;  // scratch

  PairScorer(std::vector<uint32_t> a_, std::vector<uint32_t> b_, std::vector<float> dot_, std::vector<uint32_t> y2)
      : a(std::move(a_)), b(std::move(b_)), dot(std::move(dot_)), cur(a.size(), 0.0), ranker(std::move(y2))
  {
  }
  size_t size() const { return a.size(); }
  // Spearman of the current mask plus `layer`, given the candidate's inverse norms.
  double score(int layer, std::span<const double> inv)
  {
    similarity_keys(a, b, cur, &dot[size_t(layer) * size()], inv, keys);
    return ranker.spearman(keys);
  }
  void add(int layer)
  {
    const float* d = &dot[size_t(layer) * size()];
    for (size_t p = 0; p < size(); ++p)
      cur[p] += double(d[p]);
  }
};

void check_pairs(const MaskPairs& pairs)
{
  if (pairs.requests < 2 || pairs.size() == 0 || pairs.size() > size_t(kMaxPairs) || pairs.b.size() != pairs.size() ||
      pairs.target_rank.size() != pairs.size())
    throw std::invalid_argument("layer mask: no request pairs, more than 2^21, or inconsistent pair arrays");
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
  if (x.size() != y_rank.size() || x.size() > size_t(kMaxPairs))
    throw std::invalid_argument("spearman_with_ranks: sizes differ or exceed 2^21");
  std::vector<uint32_t> keys(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    keys[i] = float_key(float(x[i]));
  KeyRanker r(twice(y_rank));
  return r.spearman(keys);
}

MaskPairs make_mask_pairs(std::span<const std::vector<uint16_t>> decode, int pairs, uint64_t seed)
{
  const size_t n = decode.size();
  if (n < 2)
    throw std::invalid_argument("layer mask: needs at least two calibration requests");
  if (pairs < 1 || pairs > kMaxPairs)
    throw std::invalid_argument("layer mask: pairs must be in [1, " + std::to_string(kMaxPairs) + "]");
  const size_t cells = decode[0].size();
  for (const auto& dp : decode)
    if (dp.size() != cells)
      throw std::invalid_argument("layer mask: decode profiles of different sizes");
  MaskPairs mp;
  mp.requests = int(n);
  Rng rng(seed, "mask.pairs");
  std::vector<uint64_t> drawn(static_cast<size_t>(pairs));
  for (uint64_t& ab : drawn) {
    const uint64_t a = rng.below(n);
    uint64_t b       = rng.below(n - 1);
    if (b >= a)
      ++b;
    ab = a << 32 | b;
  }
  // The pairs are a multiset: sorted by (a, b), the per-pair loops read request a's data from cache.
  std::sort(drawn.begin(), drawn.end());
  mp.a.resize(drawn.size());
  mp.b.resize(drawn.size());
  for (size_t p = 0; p < drawn.size(); ++p) {
    mp.a[p] = uint32_t(drawn[p] >> 32);
    mp.b[p] = uint32_t(drawn[p]);
  }
  // Decode profiles' dot products and norms 128 cells at a time: that block of every request as
  // floats (n x 512 bytes, in cache) instead of whole profiles (24 KB a request) gathered per pair.
  constexpr size_t kBlock = 128;
  std::vector<float> slab(n * kBlock), d(static_cast<size_t>(pairs));
  std::vector<double> dot_sum(size_t(pairs), 0.0), norm(n, 0.0);
  for (size_t first = 0; first < cells; first += kBlock) {
    const size_t E = std::min(kBlock, cells - first);
    for (size_t i = 0; i < n; ++i) {
      float* row = &slab[i * E];
      std::copy(&decode[i][first], &decode[i][first] + E, row);
      norm[i] += dot({row, E}, {row, E});
    }
    pair_dots(slab.data(), E, mp.a.data(), mp.b.data(), size_t(pairs), d.data());
    for (size_t p = 0; p < size_t(pairs); ++p)
      dot_sum[p] += d[p];
  }
  mp.target.resize(size_t(pairs));
  for (size_t p = 0; p < size_t(pairs); ++p) {
    const double den = norm[mp.a[p]] * norm[mp.b[p]];
    mp.target[p]     = den > 0 ? dot_sum[p] / std::sqrt(den) : 0.0;
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
  LayerTerms t   = layer_terms(prompts, pairs, v, idf, all);
  const size_t m = t.pairs, n = t.requests;

  PairScorer full(pairs.a, pairs.b, std::move(t.dot), twice(pairs.target_rank));
  // Screening (opt.screen_pairs > 0): every candidate is scored on an evenly strided subset of the
  // pairs first, and only the opt.screen_keep best are scored on all pairs.
  const size_t stride = opt.screen_pairs > 0 ? std::max<size_t>(1, m / size_t(opt.screen_pairs)) : 0;
  std::optional<PairScorer> screen;
  if (stride > 1) {
    std::vector<uint32_t> sa, sb;
    std::vector<float> sd;
    std::vector<double> target;
    for (size_t p = 0; p < m; p += stride) {
      sa.push_back(pairs.a[p]);
      sb.push_back(pairs.b[p]);
      target.push_back(pairs.target[p]);
    }
    sd.resize(size_t(L) * sa.size());
    for (int l = 0; l < L; ++l)
      for (size_t q = 0; q < sa.size(); ++q)
        sd[size_t(l) * sa.size() + q] = full.dot[size_t(l) * m + q * stride];
    screen.emplace(std::move(sa), std::move(sb), std::move(sd), twice(average_ranks(target)));
  }

  LayerMask mask;
  mask.variant = v;
  std::vector<double> cur_norm(n, 0.0), cand_norm(n), inv;
  std::vector<char> used(size_t(L), 0);
  std::vector<std::pair<double, int>> screened;
  auto candidate_inv = [&](int l) {
    const double* nl = &t.norm[size_t(l) * n];
    for (size_t i = 0; i < n; ++i)
      cand_norm[i] = cur_norm[i] + nl[i];
    inverse_norms(cand_norm, inv);
  };
  const int limit = opt.max_layers > 0 ? std::min(opt.max_layers, L) : L;
  while (int(mask.layers.size()) < limit) {
    std::vector<int> candidates, rest;
    for (int l = 0; l < L; ++l)
      if (!used[size_t(l)])
        candidates.push_back(l);
    if (screen && int(candidates.size()) > opt.screen_keep) {
      screened.clear();
      for (int l : candidates) {
        candidate_inv(l);
        screened.emplace_back(-screen->score(l, inv), l);  // best first, then lowest layer
      }
      std::sort(screened.begin(), screened.end());
      candidates.clear();
      for (size_t k = 0; k < screened.size(); ++k)
        (int(k) < std::max(1, opt.screen_keep) ? candidates : rest).push_back(screened[k].second);
      std::sort(candidates.begin(), candidates.end());
      std::sort(rest.begin(), rest.end());
    }
    int best_layer = -1;
    double best    = -std::numeric_limits<double>::infinity();
    auto evaluate  = [&](const std::vector<int>& layers) {
      for (int l : layers) {
        candidate_inv(l);
        const double s = full.score(l, inv);
        if (s > best || (s == best && l < best_layer)) {  // the lowest layer wins ties
          best       = s;
          best_layer = l;
        }
      }
    };
    auto improves = [&] {
      return best_layer >= 0 && (mask.layers.empty() || best > mask.spearman.back() + opt.min_gain);
    };
    evaluate(candidates);
    // The stop is exact: before stopping, the screened-out layers get their full score too.
    if (!improves())
      evaluate(rest);
    if (!improves())
      break;
    used[size_t(best_layer)] = 1;
    full.add(best_layer);
    if (screen)
      screen->add(best_layer);
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
  inverse_norms(norm_sum, inv);
  similarity_keys(pairs.a, pairs.b, dot_sum, nullptr, inv, keys);
  KeyRanker r(twice(pairs.target_rank));
  return r.spearman(keys);
}

}  // namespace eldr
