#pragma once
// Expected distinct experts of a batch (docs/design.md section 8, docs/model.md section 6). When tokens
// draw their experts independently from known laws (TokenLaw), the number of distinct experts a
// batch activates at layer l has the exact mean
//
//   E[D_l] = sum_e (1 - prod_t (1 - p_t[l][e]))
//
// over the batch's tokens t: expert e stays unpicked only if every token misses it.
//
// ExpectedUnion keeps a decode batch's products P[l][e] = prod_t (1 - p_t): a sequence joining
// multiplies its factors in, one leaving divides them out, and each layer's sum of P is kept along,
// so a batch change costs one pass over the (layer, expert) cells and reading E[D] a pass over the
// layers, not one per token and step.
//
// Numerics (single precision products, sums per layer in double): a factor below 2^-20 (an expert
// the token all but certainly picks) is counted instead of multiplied, so no division meets a
// vanishing divisor (treating it as 0 moves a cell by < 1e-6); a product is kept as a mantissa and a
// count of 2^-60 scalings, so it never underflows; and after kRebuildEvery leaves (or 4x the
// members, if more) everything is rebuilt from the members, so rounding cannot drift (relative
// error of a product ~1e-7 per change since the last rebuild). IEEE arithmetic without fused
// multiply-adds, partial sums in a fixed order: the same bits on every x86-64 path (baseline, the
// AVX2 clone or the AVX-512 instances).
#include "sim/gating/gating_source.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace eldr {

class ExpectedUnion {
 public:
  ExpectedUnion(int layers, int experts);

  // One token of `law` joins; leave() takes back a join of the same law.
  void join(const TokenLaw& law);
  void leave(const TokenLaw& law);
  void clear();

  // E[D_l] for every layer into `per_layer` (size layers); returns their sum.
  double distinct(std::span<double> per_layer) const;
  // prod over the members of (1 - p) for (layer, expert) cell c: the probability nobody picks it.
  double miss(size_t cell) const { return zero_[cell] != 0 ? 0.0 : double(product_[cell]); }
  size_t members() const { return members_.size(); }
  // Counts the changes (join, leave, clear, rebuild): distinct() is the same while this is.
  long changes() const { return changes_; }
  // Recomputes every product and sum from the members: what join/leave keep incrementally.
  void rebuild();

  static constexpr long kRebuildEvery = 256;

 private:
  void apply(const TokenLaw& law, bool join);

  int layers_;
  int experts_;
  std::vector<float> product_;  // the product of the factors that are not near 0, a mantissa
  // Per cell: near-zero factors (low 16 bits) + 2^16 x the 2^-60 scalings of product_; nonzero: the
  // cell's miss probability is (all but) 0.
  std::vector<int32_t> zero_;
  std::vector<double> missing_;  // per layer: the sum of miss() over its experts
  std::vector<TokenLaw> members_;
  long leaves_  = 0;  // since the last rebuild
  long changes_ = 0;
};

// A prompt's computed tokens in a prefill batch: positions [from, to) of `request`.
struct PromptTokens {
  const Request* request;
  int from;
  int to;
};

// The per-cell logs n log2(1 - p) of prompt tokens that many prefill batches hold (the chat template's
// owner is in every batch, a shared prefix's in many), kept by everything they depend on (source,
// law, token count), so such a batch reuses them instead of a pass of logarithms. One per prefill
// worker; a few entries, least recently used replaced.
class PromptLogCache {
 public:
  // n log2(1 - p) of `tokens` tokens of `law` for every cell (computed on a miss); valid until the
  // next start_batch().
  std::span<const float> logs(const GatingSource& source, const TokenLaw& law, int tokens, size_t cells);
  // Before a batch's look-ups: the entries a batch holds are not replaced during it.
  void start_batch();
  size_t entries() const { return entries_.size(); }

  static constexpr size_t kEntries = 4;

 private:
  struct Entry {
    const GatingSource* source = nullptr;
    TokenLaw law;
    int tokens = 0;
    long used  = 0;  // when last looked up
    std::vector<float> logs;
  };
  std::vector<Entry> entries_;
  long uses_  = 0;  // look-up clock: one tick a batch
  long batch_ = 0;  // the current batch's tick
};

// Expected distinct experts per layer of a prefill batch into `per_layer`; returns their sum. A
// prompt's n tokens miss an expert with (1 - p)^n = 2^(n log2(1 - p)). Tokens that two prompts route
// alike (a shared prefix's owner and position, SharedPrefixGating) count once, as they are one set
// of experts. `cache` (optional) keeps the logs of owners of other prompts' tokens across batches:
// the same result, bit for bit.
double expected_prompt_distinct(const GatingSource& source, std::span<const PromptTokens> prompts,
                                std::span<double> per_layer, PromptLogCache* cache = nullptr);

namespace detail {
// For tests and benchmarks: the kernels every expected union and prefill batch uses from now on,
// 0 = baseline x86-64 or AVX2 (as the CPU has it), 1 = AVX-512, -1 = the best the CPU has (the
// default). They give the same bits. False (nothing changed) when the CPU lacks the kernel.
bool use_expected_union_kernel(int kernel);
}  // namespace detail

}  // namespace eldr
