#include "sim/workload/expected_union.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

// 32-byte vectors in a file built for baseline x86-64 and an AVX2 clone: GCC warns that passing them
// by value would change the ABI; none crosses a function boundary here (always inlined).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace eldr {

namespace {

// A factor below this is a member that all but certainly picks the expert: counted, not multiplied
// (treating it as 0 moves that cell's miss probability by under 1e-6).
constexpr double kCertain = 0x1p-20;
// Products are kept as mantissa x 2^(-500 scale): a mantissa that falls below 2^-500 is multiplied
// by 2^500 (exact) and its scale counted, so a product never underflows and a division always
// undoes a multiplication. A scaled product (below 2^-500) is 0 to every sum it enters.
constexpr double kRescale   = 0x1p500;
constexpr double kUnscale   = 0x1p-500;

// (1 - p)^n for n > 1 as 2^(n log2(1 - p)) in single precision: log2 by an atanh series on a mantissa
// in [sqrt 1/2, sqrt 2), 2^x by a Taylor series of e^y on |y| <= ln2 / 2 (each error < 1e-7; powers
// below 2^-126, and so q = 0, come out as 0). Written once over GCC vector types, so that the same
// IEEE operations run in every lane of every instruction set, and a lane of one is the scalar case.
template <class F, class I>
[[gnu::always_inline]] inline F miss_power(F p, F tokens)
{
  const F q     = 1.0f - p;
  const I bits  = std::bit_cast<I>(q);
  I e           = ((bits >> 23) & 0xff) - 127;
  F m           = std::bit_cast<F>((bits & 0x7fffff) | 0x3f800000);
  const I high  = m > 1.41421356f;  // all ones where true (vector compares)
  m             = std::bit_cast<F>((std::bit_cast<I>(m * 0.5f) & high) | (std::bit_cast<I>(m) & ~high));
  e             = e - high;         // high is -1 where true
  const F s     = (m - 1.0f) / (m + 1.0f);
  const F s2    = s * s;
  const F ln_m  = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7))));
  F x           = tokens * (__builtin_convertvector(e, F) + ln_m * 1.44269504f);
  const I above = x > -126.0f;
  x             = std::bit_cast<F>((std::bit_cast<I>(x) & above) | (std::bit_cast<I>(F{} - 126.0f) & ~above));
  // Round to the nearest integer by the 1.5 x 2^23 trick (exact for |x| < 2^22).
  const F shifted = x + 12582912.0f;
  const F n       = shifted - 12582912.0f;
  const F y       = (x - n) * 0.69314718f;
  const F poly = 1.0f + y * (1.0f + y * (0.5f + y * (1.0f / 6 + y * (1.0f / 24 + y * (1.0f / 120 + y * (1.0f / 720))))));
  const I scale = ((std::bit_cast<I>(shifted) - 0x4B400000) + 127) << 23;
  return poly * std::bit_cast<F>(scale);
}

using Float8 = float __attribute__((vector_size(32)));
using Int8   = int32_t __attribute__((vector_size(32)));
using Float1 = float __attribute__((vector_size(4)));
using Int1   = int32_t __attribute__((vector_size(4)));

// (1 - p)^tokens for every cell of a layers x experts table, tokens > 1; p in single precision (the
// power is computed in single precision anyway).
__attribute__((target_clones("avx2", "default"))) void prompt_factors(const TokenLaw& law, int tokens,
                                                                      std::span<float> out)
{
  const float s = law.share, r = 1.0f - law.share;
  const Float8 t = Float8{} + float(tokens);
  size_t c       = 0;
  for (; c + 8 <= out.size(); c += 8) {
    Float8 a, b;
    std::memcpy(&a, law.primary + c, sizeof a);
    std::memcpy(&b, law.secondary + c, sizeof b);
    const Float8 f = miss_power<Float8, Int8>(r * a + s * b, t);
    std::memcpy(out.data() + c, &f, sizeof f);
  }
  for (; c < out.size(); ++c)
    out[c] = miss_power<Float1, Int1>(Float1{r * law.primary[c] + s * law.secondary[c]}, Float1{float(tokens)})[0];
}

using Double4 = double __attribute__((vector_size(32)));
using Long4   = int64_t __attribute__((vector_size(32)));
using Float4  = float __attribute__((vector_size(16)));
using Double1 = double __attribute__((vector_size(8)));
using Long1   = int64_t __attribute__((vector_size(8)));

template <class V>
[[gnu::always_inline]] inline V load(const void* p)
{
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
[[gnu::always_inline]] inline void store(void* p, V v)
{
  std::memcpy(p, &v, sizeof v);
}

template <class D, class L>
[[gnu::always_inline]] inline D select(L mask, D yes, D no)
{
  return std::bit_cast<D>((std::bit_cast<L>(yes) & mask) | (std::bit_cast<L>(no) & ~mask));
}

// x[0] + ... + x[n-1] in four interleaved partial sums, added in a fixed order: the same result on
// every machine, without a chain of dependent additions.
__attribute__((target_clones("avx2", "default"))) double lane_sum(const double* x, size_t n)
{
  Double4 acc{};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    acc += load<Double4>(x + i);
  double tail = 0;
  for (; i < n; ++i)
    tail += x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + tail;
}

// apply() on the cells [c, c + lanes of D): factors (one token: 1 - p, computed here; prompts:
// precomputed in single precision) multiplied in (kJoin) or divided out, keeping each cell's count of
// near-certain members and its scale. Adds the change of the cells' miss probabilities to `delta`
// lane by lane. Vector types of any width run the same IEEE operations per lane.
template <bool kOneToken, bool kJoin, class D, class L, class F>
[[gnu::always_inline]] inline void apply_cells(const TokenLaw& law, const float* prompt_factor, size_t c,
                                               double* miss, double* certain, double* scale, D& delta)
{
  D f;
  if constexpr (kOneToken) {
    const D a = __builtin_convertvector(load<F>(law.primary + c), D);
    const D b = __builtin_convertvector(load<F>(law.secondary + c), D);
    const double s = law.share;
    f = 1.0 - ((1.0 - s) * a + s * b);
  } else {
    f = __builtin_convertvector(load<F>(prompt_factor + c), D);
  }
  const D zero{}, one = zero + 1.0;
  const L sure   = f < kCertain;
  D m            = load<D>(miss + c);
  D k            = load<D>(certain + c);
  D e            = load<D>(scale + c);
  const D before = select((k > 0.0) | (e > 0.0), zero, m);
  if constexpr (kJoin) {
    m              = select(sure, m, m * f);
    k              = k + select(sure, one, zero);
    const L rescale = m < kUnscale;
    m              = select(rescale, m * kRescale, m);
    e              = e + select(rescale, one, zero);
  } else {
    m              = select(sure, m, m / f);
    k              = k - select(sure, one, zero);
    const L unscale = (e > 0.0) & (m >= 1.0);
    m              = select(unscale, m * kUnscale, m);
    e              = e - select(unscale, one, zero);
  }
  store(miss + c, m);
  store(certain + c, k);
  store(scale + c, e);
  delta += select((k > 0.0) | (e > 0.0), zero, m) - before;
}

template <bool kOneToken, bool kJoin>
__attribute__((target_clones("avx2", "default"))) void apply_all(const TokenLaw& law, const float* prompt_factor,
                                                                 int layers, int experts, double* miss,
                                                                 double* certain, double* scale, double* missing)
{
  using Float1 = float __attribute__((vector_size(4)));
  for (int l = 0; l < layers; ++l) {
    const size_t begin = size_t(l) * size_t(experts), end = begin + size_t(experts);
    Double4 delta4{};
    Double1 delta1{};
    size_t c = begin;
    for (; c + 4 <= end; c += 4)
      apply_cells<kOneToken, kJoin, Double4, Long4, Float4>(law, prompt_factor, c, miss, certain, scale, delta4);
    for (; c < end; ++c)
      apply_cells<kOneToken, kJoin, Double1, Long1, Float1>(law, prompt_factor, c, miss, certain, scale, delta1);
    // A fixed order of the partial sums: the same result on every machine.
    missing[l] += ((delta4[0] + delta4[1]) + (delta4[2] + delta4[3])) + delta1[0];
  }
}

}  // namespace

ExpectedUnion::ExpectedUnion(int layers, int experts)
    : layers_(layers)
    , experts_(experts)
    , miss_(size_t(layers) * size_t(experts), 1.0)
    , certain_(miss_.size(), 0.0)
    , scale_(miss_.size(), 0.0)
    , missing_(size_t(layers), double(experts))
{
}

void ExpectedUnion::apply(const TokenLaw& law, int tokens, int sign)
{
  double *m = miss_.data(), *k = certain_.data(), *e = scale_.data(), *s = missing_.data();
  if (tokens == 1) {
    if (sign > 0)
      apply_all<true, true>(law, nullptr, layers_, experts_, m, k, e, s);
    else
      apply_all<true, false>(law, nullptr, layers_, experts_, m, k, e, s);
    return;
  }
  factor_.resize(miss_.size());
  prompt_factors(law, tokens, factor_);
  if (sign > 0)
    apply_all<false, true>(law, factor_.data(), layers_, experts_, m, k, e, s);
  else
    apply_all<false, false>(law, factor_.data(), layers_, experts_, m, k, e, s);
}

void ExpectedUnion::join(const TokenLaw& law, int tokens)
{
  if (tokens <= 0)
    return;
  apply(law, tokens, +1);
  members_.push_back({law, tokens});
}

void ExpectedUnion::leave(const TokenLaw& law, int tokens)
{
  if (tokens <= 0)
    return;
  auto it = std::find_if(members_.begin(), members_.end(),
                         [&](const Member& m) { return m.law == law && m.tokens == tokens; });
  if (it == members_.end())
    throw std::logic_error("ExpectedUnion::leave: no member of this law and token count joined");
  members_.erase(it);
  if (++leaves_ % kRebuildEvery == 0 || members_.empty())
    return rebuild();
  apply(law, tokens, -1);
}

void ExpectedUnion::clear()
{
  members_.clear();
  std::fill(miss_.begin(), miss_.end(), 1.0);
  std::fill(certain_.begin(), certain_.end(), 0.0);
  std::fill(scale_.begin(), scale_.end(), 0.0);
  std::fill(missing_.begin(), missing_.end(), double(experts_));
}

void ExpectedUnion::rebuild()
{
  std::vector<Member> members;
  members.swap(members_);
  clear();
  for (const Member& m : members)
    apply(m.law, m.tokens, +1);
  members_.swap(members);
  // The per-layer sums from scratch, not as the sum of the joins' changes.
  for (int l = 0; l < layers_; ++l) {
    double sum = 0;
    for (int e = 0; e < experts_; ++e)
      sum += miss(size_t(l) * size_t(experts_) + size_t(e));
    missing_[size_t(l)] = sum;
  }
}

double ExpectedUnion::distinct(std::span<double> per_layer) const
{
  double total = 0;
  for (int l = 0; l < layers_; ++l) {
    per_layer[size_t(l)] = double(experts_) - missing_[size_t(l)];
    total += per_layer[size_t(l)];
  }
  return total;
}

double expected_prompt_distinct(const ExpertRoutingSource& source, std::span<const PromptTokens> prompts,
                                std::span<double> per_layer)
{
  struct Owner {
    const Request* request;
    TokenLaw law;
    std::vector<std::pair<int, int>> spans;
  };
  thread_local std::vector<PromptRun> runs;
  thread_local std::vector<Owner> owners;
  thread_local std::vector<float> factor;
  thread_local std::vector<double> miss;
  runs.clear();
  for (const PromptTokens& p : prompts)
    if (p.from < p.to)
      source.prompt_runs(*p.request, p.from, p.to, runs);
  // Group by owner in order of first appearance (not by address: the order fixes the rounding).
  owners.clear();
  for (const PromptRun& r : runs) {
    auto it = std::find_if(owners.begin(), owners.end(), [&](const Owner& o) { return o.request == r.owner; });
    if (it == owners.end()) {
      owners.push_back({r.owner, r.law, {}});
      it = owners.end() - 1;
    }
    it->spans.emplace_back(r.from, r.to);
  }
  const RoutingShape& shape = source.shape();
  const size_t cells        = size_t(shape.layers) * size_t(shape.experts);
  factor.resize(cells);
  miss.resize(cells);
  // A prefill batch only grows: the products need no division, so no counting of near-certain experts.
  for (size_t i = 0; i < owners.size(); ++i) {
    Owner& o = owners[i];
    // The owner's distinct positions: the union of its spans.
    std::sort(o.spans.begin(), o.spans.end());
    int tokens = 0, covered = std::numeric_limits<int>::min();
    for (auto [from, to] : o.spans) {
      from = std::max(from, covered);
      if (to > from)
        tokens += to - from;
      covered = std::max(covered, to);
    }
    if (tokens == 1)
      for (size_t c = 0; c < cells; ++c)
        factor[c] = float(1.0 - o.law.probability(c));
    else
      prompt_factors(o.law, tokens, factor);
    if (i == 0)  // the first owner's factors are the products so far
      std::copy(factor.begin(), factor.end(), miss.begin());
    else
      for (size_t c = 0; c < cells; ++c)
        miss[c] *= double(factor[c]);
  }
  if (owners.empty())
    std::fill(miss.begin(), miss.end(), 1.0);
  double total = 0;
  for (int l = 0; l < shape.layers; ++l) {
    per_layer[size_t(l)] = double(shape.experts) - lane_sum(&miss[size_t(l) * size_t(shape.experts)], size_t(shape.experts));
    total += per_layer[size_t(l)];
  }
  return total;
}

}  // namespace eldr
