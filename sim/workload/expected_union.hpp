#pragma once
// Expected distinct experts of a batch (DESIGN.md section 8, docs/model.md section 2b). When tokens
// draw their experts independently from known laws (TokenLaw), the number of distinct experts a
// batch activates at layer l has the exact mean
//
//   E[D_l] = sum_e (1 - prod_t (1 - p_t[l][e]))
//
// over the batch's tokens t: expert e stays unpicked only if every token misses it. This class keeps
// the products (the miss probabilities, one per layer and expert) as tokens join and leave, so a
// decode worker pays per change of its batch, not per token and step.
//
// Numerics: a join multiplies each product by the member's miss factor (1 - p)^n, a leave divides by
// it. A factor below 2^-20 (an expert the member all but certainly picks) is counted instead of
// multiplied, so a division never meets a vanishing divisor; a product is kept as a mantissa and a
// count of 2^-500 scalings, so it never underflows; and every kRebuildEvery-th leave rebuilds the
// products from the members, so rounding cannot drift. Each layer's summed miss probability is kept
// the same way, so distinct() costs a pass over the layers. (1 - p)^n for n > 1 (prompts) is 2^(n log2(1 - p)) in single
// precision, relative error ~1e-7 n in the factor; one token's factor is exact to double rounding.
// All of it is IEEE arithmetic without fused multiply-adds: the same bits on every x86-64 path.
#include "sim/workload/expert_routing.hpp"

#include <span>
#include <vector>

namespace eldr {

class ExpectedUnion {
public:
  ExpectedUnion(int layers, int experts);

  // `tokens` tokens of one law join; leave() takes back a join of the same law and count.
  void join(const TokenLaw& law, int tokens = 1);
  void leave(const TokenLaw& law, int tokens = 1);
  void clear();

  // E[D_l] for every layer into `per_layer` (size layers); returns their sum.
  double distinct(std::span<double> per_layer) const;
  // prod over tokens of (1 - p) for (layer, expert) cell c: the probability that nobody picks it.
  double miss(size_t cell) const { return certain_[cell] > 0 || scale_[cell] > 0 ? 0.0 : miss_[cell]; }
  size_t members() const { return members_.size(); }
  // Recomputes every product from the members: what join/leave maintain incrementally.
  void rebuild();

  static constexpr long kRebuildEvery = 1024;

private:
  struct Member {
    TokenLaw law;
    int tokens;
  };
  // Multiplies (sign +1) or divides (-1) the law's factors into the products, keeping missing_.
  void apply(const TokenLaw& law, int tokens, int sign);

  int layers_;
  int experts_;
  std::vector<double> miss_;      // product of the members' factors that are not near 0: a mantissa
  std::vector<double> certain_;   // members whose factor is near 0 (counted, not multiplied)
  std::vector<double> scale_;     // the product is miss_ x 2^(-500 scale_)
  std::vector<double> missing_;   // per layer: the sum of miss(c) over its experts
  std::vector<Member> members_;
  mutable std::vector<float> factor_;  // scratch: prompts' factors
  long leaves_ = 0;
};

// A prompt's computed tokens in a prefill batch: positions [from, to) of `request`.
struct PromptTokens {
  const Request* request;
  int from;
  int to;
};

// Expected distinct experts per layer of a prefill batch into `per_layer`; returns their sum. Tokens
// that two prompts route alike (a shared prefix's owner and position, SharedPrefixRouting) count once,
// as they are one set of experts.
double expected_prompt_distinct(const ExpertRoutingSource& source, std::span<const PromptTokens> prompts,
                                std::span<double> per_layer);

}  // namespace eldr
