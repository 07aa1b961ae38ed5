#include "sim/gating/expected_union.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

// 32-byte vectors in a file built for baseline x86-64 and an AVX2 clone: GCC warns that passing them
// by value would change the ABI; none crosses a function boundary here (all always inlined).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace eldr {

namespace {

// GCC vector types: the same IEEE operations in every lane whatever the instruction set (SSE2 runs
// an 8-lane vector as two halves, AVX2 as one), and a 1-lane vector is the scalar tail. clang
// rejects 32-byte vector arguments in functions built without AVX, even inlined ones: its builds
// (the fuzzers) use 4 lanes, which changes the order of the partial sums and so the last bits of
// their results; every GCC build gives the same bits.
#if defined(__clang__)
constexpr int kLanes = 4;
#else
constexpr int kLanes = 8;
#endif
using Float8 = float __attribute__((vector_size(4 * kLanes)));
using Int8   = int32_t __attribute__((vector_size(4 * kLanes)));
// Two vectors' worth, for the AVX-512 instances: their cells are computed 16 at a time and their
// partial sums still added 8 lanes at a time (low half, then high), so every instance sums alike.
using Wide    = float __attribute__((vector_size(8 * kLanes)));
using WideInt = int32_t __attribute__((vector_size(8 * kLanes)));
using Float1  = float __attribute__((vector_size(4)));
using Int1    = int32_t __attribute__((vector_size(4)));

constexpr float kRoundMagic = 12582912.0f;  // 1.5 x 2^23: x + it - it rounds |x| < 2^22 to an integer
constexpr float kCertain    = 0x1p-20f;     // a factor below it counts as a zero, not a product
constexpr float kRescale    = 0x1p60f;      // products below 1 / kRescale are rescaled by it
constexpr int32_t kNearZero = 1;            // zero_ counts near-zero factors in its low 16 bits (a batch
                                            // is far below 65536 sequences: KV memory bounds it)
constexpr int32_t kScaled = 1 << 16;        // and scalings above them

template <class V> [[gnu::always_inline]] inline V load(const void* p)
{
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V> [[gnu::always_inline]] inline void store(void* p, V v)
{
  std::memcpy(p, &v, sizeof v);
}

template <class F, class I> [[gnu::always_inline]] inline F select(I mask, F yes, F no)
{
  return std::bit_cast<F>((std::bit_cast<I>(yes) & mask) | (std::bit_cast<I>(no) & ~mask));
}

// log2(1 - p) for p in [0, 1] (-127 for p = 1). Where 1 - p >= sqrt(1/2) the argument is 1 + t with
// t = -p exactly (no rounding of 1 - p, so small p keep their relative precision); otherwise the
// mantissa of 1 - p, in [sqrt(1/2), sqrt(2)), and its exponent. log2(1 + t) = t P(t), P of degree 5
// fitted on Chebyshev nodes of that interval: absolute error < 4e-6, relative error near t = 0 far
// smaller (a prompt's n tokens multiply the error by n only where (1 - p)^n is not negligible, i.e.
// for small p, where it is smallest).
template <class F, class I> [[gnu::always_inline]] inline F log2_one_minus(F p)
{
  const F q    = 1.0f - p;
  const I bits = std::bit_cast<I>(q);
  I e          = ((bits >> 23) & 0xff) - 127;
  F m          = std::bit_cast<F>((bits & 0x7fffff) | 0x3f800000);  // [1, 2)
  const I high = m > 1.41421356f;                                   // all ones where true
  m            = select(high, m * 0.5f, m);
  e            = e - high;  // high is -1 where true
  const I near = q >= 0.70710678f;
  const F t    = select(near, F{} - p, m - 1.0f);
  e            = e & ~near;
  const F poly =
      1.4427018f + t * (-0.72120847f + t * (0.47979388f + t * (-0.36641326f + t * (0.31840712f + t * -0.20685812f))));
  return __builtin_convertvector(e, F) + t * poly;
}

// 2^x for x <= 0 (0 below 2^-126): x = n + f with |f| <= 1/2, 2^f = 1 + f Q(f) with Q of degree 4
// fitted on Chebyshev nodes (relative error < 2.1e-7; 2^0 is exactly 1, so an expert nobody can
// pick adds exactly nothing), 2^n by the exponent bits.
template <class F, class I> [[gnu::always_inline]] inline F exp2_nonpositive(F x)
{
  x               = select(x > -126.0f, x, F{} - 126.0f);
  const F shifted = x + kRoundMagic;
  const F n       = shifted - kRoundMagic;
  const F f       = x - n;
  const F poly = 1.0f + f * (0.69314719f + f * (0.24022349f + f * (0.05550357f + f * (0.00966637f + f * 0.00133909f))));
  const I scale = ((std::bit_cast<I>(shifted) - 0x4B400000) + 127) << 23;
  return poly * std::bit_cast<F>(scale);
}

[[gnu::always_inline]] inline void add_halves(Float8& acc, const Wide& v)
{
  Float8 low, high;
  std::memcpy(&low, &v, sizeof low);
  std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
  acc += low;
  acc += high;
}

// The lanes' sum in a fixed order: the same result on every machine.
[[gnu::always_inline]] inline double lane_sum(Float8 v)
{
  if constexpr (kLanes == 8)
    return double(((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])));
  else
    return double((v[0] + v[1]) + (v[2] + v[3]));
}

template <class F> [[gnu::always_inline]] inline F law_probability(const TokenLaw& law, size_t c)
{
  return (1.0f - law.share) * load<F>(law.primary + c) + law.share * load<F>(law.secondary + c);
}

// The probability that a member misses cell c: 1 - p for one token; for a window of consecutive
// tokens (TokenLaw::window) (1 - p) (1 - f)^window, f = p (1 - persistence) / (1 - p) the chance that
// a token picks an expert the one before it lacks (stationary: the picks stay p; f capped at 1, which
// also turns p = 1's 0/0 into 1). window_miss (speculative_tokens.cpp) in single precision.
template <class F> [[gnu::always_inline]] inline F miss_factor(const TokenLaw& law, size_t c)
{
  const F p   = law_probability<F>(law, c);
  const F one = 1.0f - p;
  if (law.window == 0)
    return one;
  F fresh      = p * (1.0f - law.persistence) / one;
  fresh        = select(fresh < 1.0f, fresh, F{} + 1.0f);
  const F stay = 1.0f - fresh;
  F miss       = one;
  for (int i = 0; i < law.window; ++i)
    miss *= stay;
  return miss;
}

// One batch change on the cells [c, c + lanes of F): the law's factors 1 - p multiplied in (kJoin) or
// divided out, near-zero factors counted, products rescaled; returns the change of the cells' miss
// probabilities, lane by lane.
template <bool kJoin, class F, class I> [[gnu::always_inline]] inline F
change_cells(const TokenLaw& law, size_t c, float* __restrict product, int32_t* __restrict zero)
{
  const F q    = miss_factor<F>(law, c);
  const I sure = q < kCertain;
  const F m0   = load<F>(product + c);
  const I z0   = load<I>(zero + c);
  F m;
  I z;
  if constexpr (kJoin) {
    m               = select(sure, m0, m0 * q);
    z               = z0 + (sure & kNearZero);
    const I rescale = m < 1.0f / kRescale;
    m               = select(rescale, m * kRescale, m);
    z               = z + (rescale & kScaled);
  } else {
    m = select(sure, m0, m0 / q);
    z = z0 - (sure & kNearZero);
    // (z >= kScaled) & (m >= 1) as one compare: GCC 12 scalarizes the & of two compares in 16 lanes.
    const I unscale = select(z >= kScaled, m, F{} + 0.5f) >= 1.0f;
    m               = select(unscale, m * (1.0f / kRescale), m);
    z               = z - (unscale & kScaled);
  }
  store(product + c, m);
  store(zero + c, z);
  const F zero_f{};
  return select(z == 0, m, zero_f) - select(z0 == 0, m0, zero_f);
}

// kWide: the AVX-512 instance, 16 cells a step.
template <bool kJoin, bool kWide> [[gnu::always_inline]] inline void
change_all(const TokenLaw& law, int layers, int experts, float* product, int32_t* zero, double* missing)
{
  for (int l = 0; l < layers; ++l) {
    const size_t begin = size_t(l) * size_t(experts), end = begin + size_t(experts);
    Float8 delta8{};
    Float1 delta1{};
    size_t c = begin;
    if constexpr (kWide)
      for (; c + 2 * kLanes <= end; c += 2 * kLanes)
        add_halves(delta8, change_cells<kJoin, Wide, WideInt>(law, c, product, zero));
    for (; c + kLanes <= end; c += kLanes)
      delta8 += change_cells<kJoin, Float8, Int8>(law, c, product, zero);
    for (; c < end; ++c)
      delta1 += change_cells<kJoin, Float1, Int1>(law, c, product, zero);
    missing[l] += lane_sum(delta8) + double(delta1[0]);
  }
}

// The instances as plain functions (clang cannot clone templates for target_clones): baseline x86-64
// or AVX2 by target_clones, AVX-512 where `kernels` says (the same bits).
__attribute__((target_clones("avx2", "default"))) void join_all(const TokenLaw& law, int layers, int experts,
                                                                float* product, int32_t* zero, double* missing)
{
  change_all<true, false>(law, layers, experts, product, zero, missing);
}

__attribute__((target_clones("avx2", "default"))) void leave_all(const TokenLaw& law, int layers, int experts,
                                                                 float* product, int32_t* zero, double* missing)
{
  change_all<false, false>(law, layers, experts, product, zero, missing);
}

__attribute__((target("avx512f"))) void join_all_avx512(const TokenLaw& law, int layers, int experts, float* product,
                                                        int32_t* zero, double* missing)
{
  change_all<true, true>(law, layers, experts, product, zero, missing);
}

__attribute__((target("avx512f"))) void leave_all_avx512(const TokenLaw& law, int layers, int experts, float* product,
                                                         int32_t* zero, double* missing)
{
  change_all<false, true>(law, layers, experts, product, zero, missing);
}

// Prefill: out[c] = base[c] + tokens x log2(1 - p) (no base: the product alone), single precision.
// out may be base (in place).
template <bool kWide> [[gnu::always_inline]] inline void prompt_logs(const TokenLaw& law, float tokens,
                                                                     const float* base, std::span<float> out)
{
  const size_t n = out.size();
  size_t c       = 0;
  if constexpr (kWide)
    for (; c + 2 * kLanes <= n; c += 2 * kLanes) {
      const Wide x = tokens * log2_one_minus<Wide, WideInt>(law_probability<Wide>(law, c));
      store(&out[c], base ? load<Wide>(base + c) + x : x);
    }
  for (; c + kLanes <= n; c += kLanes) {
    const Float8 x = tokens * log2_one_minus<Float8, Int8>(law_probability<Float8>(law, c));
    store(&out[c], base ? load<Float8>(base + c) + x : x);
  }
  for (; c < n; ++c) {
    const float x = tokens * log2_one_minus<Float1, Int1>(law_probability<Float1>(law, c))[0];
    out[c]        = base ? base[c] + x : x;
  }
}

__attribute__((target_clones("avx2", "default"))) void add_prompt_logs(const TokenLaw& law, float tokens,
                                                                       const float* base, std::span<float> out)
{
  prompt_logs<false>(law, tokens, base, out);
}

__attribute__((target("avx512f"))) void add_prompt_logs_avx512(const TokenLaw& law, float tokens, const float* base,
                                                               std::span<float> out)
{
  prompt_logs<true>(law, tokens, base, out);
}

// Where a prefill batch's logs L[c] = sum tokens x log2(1 - p) come from: stored (several owners) or
// computed on the fly from one owner's law.
struct StoredLogs {
  const float* logs;
  template <class F, class I> [[gnu::always_inline]] F at(size_t c) const { return load<F>(logs + c); }
};
struct OwnerLogs {
  const TokenLaw& law;
  float tokens;
  template <class F, class I> [[gnu::always_inline]] F at(size_t c) const
  {
    return tokens * log2_one_minus<F, I>(law_probability<F>(law, c));
  }
};

// E[D_l] per layer from prefill logs: experts - sum_e 2^L.
template <bool kWide, class Logs>
[[gnu::always_inline]] inline double distinct_of(const Logs& logs, int layers, int experts, std::span<double> per_layer)
{
  double total = 0;
  for (int l = 0; l < layers; ++l) {
    const size_t begin = size_t(l) * size_t(experts), end = begin + size_t(experts);
    Float8 acc{};
    float tail = 0;
    size_t c   = begin;
    if constexpr (kWide)
      for (; c + 2 * kLanes <= end; c += 2 * kLanes)
        add_halves(acc, exp2_nonpositive<Wide, WideInt>(logs.template at<Wide, WideInt>(c)));
    for (; c + kLanes <= end; c += kLanes)
      acc += exp2_nonpositive<Float8, Int8>(logs.template at<Float8, Int8>(c));
    for (; c < end; ++c)
      tail += exp2_nonpositive<Float1, Int1>(logs.template at<Float1, Int1>(c))[0];
    per_layer[size_t(l)] = double(experts) - (lane_sum(acc) + double(tail));
    total += per_layer[size_t(l)];
  }
  return total;
}

__attribute__((target_clones("avx2", "default"))) double distinct_from_logs(std::span<const float> logs, int layers,
                                                                            int experts, std::span<double> per_layer)
{
  return distinct_of<false>(StoredLogs{logs.data()}, layers, experts, per_layer);
}

__attribute__((target("avx512f"))) double distinct_from_logs_avx512(std::span<const float> logs, int layers,
                                                                    int experts, std::span<double> per_layer)
{
  return distinct_of<true>(StoredLogs{logs.data()}, layers, experts, per_layer);
}

// A batch of one owner in one pass: the same operations as add_prompt_logs then distinct_from_logs,
// without storing the logs. (Only for one owner: with more, the log pass into a base and the exp2 pass
// are faster apart, their iterations independent, than fused into the per-layer sums' chains.)
__attribute__((target_clones("avx2", "default"))) double
single_owner_distinct(const TokenLaw& law, float tokens, int layers, int experts, std::span<double> per_layer)
{
  return distinct_of<false>(OwnerLogs{law, tokens}, layers, experts, per_layer);
}

__attribute__((target("avx512f"))) double single_owner_distinct_avx512(const TokenLaw& law, float tokens, int layers,
                                                                       int experts, std::span<double> per_layer)
{
  return distinct_of<true>(OwnerLogs{law, tokens}, layers, experts, per_layer);
}

// 1 = the AVX-512 instances, 0 = the others (baseline or AVX2, by target_clones).
int best_kernel()
{
  __builtin_cpu_init();  // this runs as a static initializer, maybe before libgcc's
  return __builtin_cpu_supports("avx512f") ? 1 : 0;
}

// The instances of each kernel, by best_kernel()'s numbering.
struct Kernels {
  void (*join)(const TokenLaw&, int, int, float*, int32_t*, double*);
  void (*leave)(const TokenLaw&, int, int, float*, int32_t*, double*);
  void (*prompt_logs)(const TokenLaw&, float, const float*, std::span<float>);
  double (*from_logs)(std::span<const float>, int, int, std::span<double>);
  double (*single_owner)(const TokenLaw&, float, int, int, std::span<double>);
};
const Kernels kKernels[2] = {{join_all, leave_all, add_prompt_logs, distinct_from_logs, single_owner_distinct},
                             {join_all_avx512, leave_all_avx512, add_prompt_logs_avx512, distinct_from_logs_avx512,
                              single_owner_distinct_avx512}};

// The kernels in use (tests change them: detail::use_expected_union_kernel).
const Kernels* kernels = &kKernels[best_kernel()];

}  // namespace

ExpectedUnion::ExpectedUnion(int layers, int experts)
    : layers_(layers), experts_(experts), product_(size_t(layers) * size_t(experts), 1.0f), zero_(product_.size(), 0),
      missing_(size_t(layers), double(experts))
{
}

namespace detail {

bool use_expected_union_kernel(int kernel)
{
  if (kernel < 0)
    kernel = best_kernel();
  if (kernel > best_kernel())
    return false;
  kernels = &kKernels[kernel];
  return true;
}

}  // namespace detail

void ExpectedUnion::apply(const TokenLaw& law, bool join)
{
  ++changes_;
  (join ? kernels->join : kernels->leave)(law, layers_, experts_, product_.data(), zero_.data(), missing_.data());
}

void ExpectedUnion::join(const TokenLaw& law)
{
  apply(law, true);
  members_.push_back(law);
}

void ExpectedUnion::leave(const TokenLaw& law)
{
  auto it = std::find(members_.begin(), members_.end(), law);
  if (it == members_.end())
    throw std::logic_error("ExpectedUnion::leave: no member of this law joined");
  members_.erase(it);
  if (++leaves_ >= std::max<long>(kRebuildEvery, 4 * long(members_.size())) || members_.empty())
    return rebuild();
  apply(law, false);
}

void ExpectedUnion::clear()
{
  ++changes_;
  members_.clear();
  std::fill(product_.begin(), product_.end(), 1.0f);
  std::fill(zero_.begin(), zero_.end(), 0);
  std::fill(missing_.begin(), missing_.end(), double(experts_));
}

void ExpectedUnion::rebuild()
{
  ++changes_;
  leaves_ = 0;
  std::fill(product_.begin(), product_.end(), 1.0f);
  std::fill(zero_.begin(), zero_.end(), 0);
  for (const TokenLaw& law : members_)
    apply(law, true);
  // The per-layer sums from the products, not as the sum of the joins' changes.
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

std::span<const float> PromptLogCache::logs(const GatingSource& source, const TokenLaw& law, int tokens, size_t cells)
{
  for (Entry& e : entries_)
    if (e.source == &source && e.law == law && e.tokens == tokens && e.logs.size() == cells) {
      e.used = uses_;
      return e.logs;
    }
  // Replace the least recently used entry that no owner of this batch holds; grow if all are held.
  Entry* slot = nullptr;
  for (Entry& e : entries_)
    if (e.used < batch_ && (!slot || e.used < slot->used))
      slot = &e;
  if (!slot || entries_.size() < kEntries)
    slot = &entries_.emplace_back();
  slot->source = &source;
  slot->law    = law;
  slot->tokens = tokens;
  slot->used   = uses_;
  slot->logs.resize(cells);
  kernels->prompt_logs(law, float(tokens), nullptr, slot->logs);
  return slot->logs;
}

void PromptLogCache::start_batch()
{
  // A batch with many shared owners grew the cache beyond kEntries: drop the least recently used.
  while (entries_.size() > kEntries)
    entries_.erase(std::min_element(entries_.begin(), entries_.end(),
                                    [](const Entry& a, const Entry& b) { return a.used < b.used; }));
  batch_ = ++uses_;
}

double expected_prompt_distinct(const GatingSource& source, std::span<const PromptTokens> prompts,
                                std::span<double> per_layer, PromptLogCache* cache)
{
  struct Owner {
    const Request* request;
    TokenLaw law;
    bool shared;  // another prompt's tokens (a chat template's, a shared prefix's): cacheable
    std::vector<std::pair<int, int>> spans;
  };
  thread_local std::vector<PromptRun> runs;
  thread_local std::vector<const Request*> run_prompt;  // the prompt each of runs came from
  thread_local std::vector<Owner> owners;
  thread_local std::vector<float> logs;
  runs.clear();
  run_prompt.clear();
  for (const PromptTokens& p : prompts)
    if (p.from < p.to) {
      source.prompt_runs(*p.request, p.from, p.to, runs);
      run_prompt.resize(runs.size(), p.request);
    }
  // Group by owner in order of first appearance (not by address: the order fixes the rounding).
  size_t n = 0;  // owners in use (the others keep their spans' memory for the next batch)
  for (size_t k = 0; k < runs.size(); ++k) {
    const PromptRun& r = runs[k];
    auto it =
        std::find_if(owners.begin(), owners.begin() + long(n), [&](const Owner& o) { return o.request == r.owner; });
    if (it == owners.begin() + long(n)) {
      if (n == owners.size())
        owners.emplace_back();
      it          = owners.begin() + long(n++);
      it->request = r.owner;
      it->law     = r.law;
      it->shared  = false;
      it->spans.clear();
    }
    it->shared = it->shared || r.owner != run_prompt[k];
    it->spans.emplace_back(r.from, r.to);
  }
  const GatingShape& shape = source.shape();
  const size_t cells       = size_t(shape.layers) * size_t(shape.experts);
  if (n == 0) {  // a batch without tokens adds nothing: all zeros
    logs.assign(cells, 0.f);
    return kernels->from_logs(logs, shape.layers, shape.experts, per_layer);
  }
  logs.resize(cells);
  if (cache)
    cache->start_batch();
  // base: the logs of the owners so far, in `logs` or a cache entry (none before the first).
  const float* base = nullptr;
  for (size_t i = 0; i < n; ++i) {
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
    if (cache && o.shared) {  // its logs as add_prompt_logs computes them, kept across batches
      const std::span<const float> own = cache->logs(source, o.law, tokens, cells);
      if (base) {
        for (size_t c = 0; c < cells; ++c)
          logs[c] = base[c] + own[c];
        base = logs.data();
      } else {
        base = own.data();
      }
    } else if (n == 1) {  // most batches without a chat template
      return kernels->single_owner(o.law, float(tokens), shape.layers, shape.experts, per_layer);
    } else {
      kernels->prompt_logs(o.law, float(tokens), base, logs);
      base = logs.data();
    }
  }
  return kernels->from_logs({base, cells}, shape.layers, shape.experts, per_layer);
}

}  // namespace eldr
