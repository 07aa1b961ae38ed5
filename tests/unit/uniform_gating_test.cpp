// UniformGating (sim/gating/uniform_gating.hpp): the no-locality reference routing source.
#include "sim/common/rng.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/gating/uniform_gating.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <vector>

using namespace eldr;

namespace {

ModelSpec qwen()
{
  return load_model("models/qwen3-30b-a3b.json");
}

Request request_with_seed(uint64_t seed)
{
  Request r;
  r.routing_seed = seed;
  return r;
}

int popcount_layer(std::span<const uint64_t> masks, const GatingShape& s, int layer)
{
  int n = 0;
  for (int k = 0; k < s.words_per_layer; ++k)
    n += std::popcount(masks[size_t(layer * s.words_per_layer + k)]);
  return n;
}

}  // namespace

TEST_CASE("uniform routing: the shape follows the model")
{
  ModelSpec m = qwen();
  UniformGating u(m, 1);
  CHECK(u.shape().layers == 48);
  CHECK(u.shape().experts == 128);
  CHECK(u.shape().top_k == 8);
  CHECK(u.shape().words_per_layer == 2);
  CHECK(u.shape().words() == 96);
  CHECK(u.token_experts(request_with_seed(1), 0).size() == 96);
}

TEST_CASE("uniform routing: every token picks exactly top_k experts per layer and none out of range")
{
  for (auto [experts, top_k] : {std::pair{128, 8}, std::pair{128, 4}, std::pair{100, 6}, std::pair{64, 6}}) {
    ModelSpec m = qwen();
    m.experts   = experts;
    m.top_k     = top_k;
    m.layers    = 5;
    UniformGating u(m, 3);
    const GatingShape& s = u.shape();
    CHECK(s.words_per_layer == (experts + 63) / 64);
    Rng rng(2, "test");
    long wrong = 0, out_of_range = 0;
    for (int i = 0; i < 3000; ++i) {
      auto masks = u.token_experts(request_with_seed(rng()), i % 700);
      for (int l = 0; l < s.layers; ++l) {
        wrong += popcount_layer(masks, s, l) != top_k;
        // Bits at or above `experts` in the layer's last word must be clear.
        const int spare = s.words_per_layer * 64 - experts;
        if (spare > 0) {
          uint64_t last = masks[size_t(l * s.words_per_layer + s.words_per_layer - 1)];
          out_of_range += (last >> (64 - spare)) != 0;
        }
      }
    }
    CAPTURE(experts);
    CAPTURE(top_k);
    CHECK(wrong == 0);
    CHECK(out_of_range == 0);
  }
}

TEST_CASE("uniform routing: token choices are a pure function of request and token and seed")
{
  ModelSpec m = qwen();
  UniformGating a(m, 5), b(m, 5), c(m, 6);
  Request r = request_with_seed(12345);
  auto copy = [](std::span<const uint64_t> s) { return std::vector<uint64_t>(s.begin(), s.end()); };
  auto t3   = copy(a.token_experts(r, 3));
  CHECK(copy(b.token_experts(r, 3)) == t3);
  CHECK(copy(a.token_experts(r, 3)) == t3);
  CHECK(copy(a.token_experts(r, 4)) != t3);
  CHECK(copy(a.token_experts(request_with_seed(12346), 3)) != t3);
  CHECK(copy(c.token_experts(r, 3)) != t3);
}

TEST_CASE("uniform routing: each expert is picked with frequency top_k / experts")
{
  ModelSpec m = qwen();
  UniformGating u(m, 9);
  const GatingShape& s = u.shape();
  std::vector<long> per_cell(size_t(s.layers * s.experts), 0), per_expert(size_t(s.experts), 0);
  Rng rng(4, "test");
  const long tokens = 40000;
  for (long i = 0; i < tokens; ++i) {
    auto masks = u.token_experts(request_with_seed(rng()), int(i % 512));
    for (int l = 0; l < s.layers; ++l)
      for (int e = 0; e < s.experts; ++e)
        if (masks[size_t(l * s.words_per_layer + e / 64)] >> (e % 64) & 1) {
          ++per_cell[size_t(l * s.experts + e)];
          ++per_expert[size_t(e)];
        }
  }
  // Every token contributes exactly top_k picks per layer.
  for (int l = 0; l < s.layers; ++l) {
    long picks = 0;
    for (int e = 0; e < s.experts; ++e)
      picks += per_cell[size_t(l * s.experts + e)];
    CHECK(picks == tokens * s.top_k);
  }
  // 8 / 128 = 1/16. Tokens draw from a pool of P = 2048 sampled records (sized to fit L2, see
  // uniform_gating.hpp), so a (layer, expert) cell's frequency is the pool's: Binomial(P, 1/16)/P,
  // relative sd sqrt(15/P) = 8.6%, plus sampling noise of 40000 draws (~2%). Per expert summed over
  // 48 independent layers: sd ~ 1.3% -> within 6%. Per cell: within 45% (5 sd).
  for (int e = 0; e < s.experts; ++e) {
    CAPTURE(e);
    CHECK(double(per_expert[size_t(e)]) / (tokens * s.layers) == doctest::Approx(1.0 / 16).epsilon(0.06));
  }
  long outliers = 0;
  double sum2   = 0;
  for (long c : per_cell) {
    outliers += std::abs(double(c) / 2500.0 - 1.0) > 0.45;
    sum2 += (double(c) / 2500.0 - 1.0) * (double(c) / 2500.0 - 1.0);
  }
  CHECK(outliers == 0);
  // And the spread is what a 2048-record pool implies, no more: rms relative deviation ~ 9%.
  CHECK(std::sqrt(sum2 / double(per_cell.size())) < 0.12);
}

TEST_CASE("uniform routing: distinct experts of B tokens match E(D) = E (1 - (1 - k/E)^B)")
{
  ModelSpec m = qwen();
  UniformGating u(m, 13);
  const GatingShape& s = u.shape();
  Rng rng(8, "test");
  for (int batch : {1, 8, 32, 128}) {
    const int trials = 1500;
    double sum       = 0;
    std::vector<uint64_t> un(size_t(s.words()));
    for (int t = 0; t < trials; ++t) {
      std::fill(un.begin(), un.end(), 0);
      for (int b = 0; b < batch; ++b)
        accumulate(un, u.token_experts(request_with_seed(rng()), int(rng.below(1536))));
      for (int l = 0; l < s.layers; ++l)
        sum += popcount_layer(un, s, l);
    }
    const double measured = sum / (double(trials) * s.layers);
    // Each expert is missed by one token with probability 1 - k/E, by B independent tokens with (1 - k/E)^B.
    const double expected = 128.0 * (1.0 - std::pow(1.0 - 8.0 / 128.0, batch));
    CAPTURE(batch);
    CAPTURE(measured);
    CAPTURE(expected);
    CHECK(measured == doctest::Approx(expected).epsilon(0.01));
  }
}

TEST_CASE("expert masks: accumulate ORs every word and count_distinct popcounts per layer")
{
  // accumulate() has an AVX2 clone: compare it with a plain OR on lengths around vector widths.
  Rng rng(21, "test");
  for (size_t n : {size_t(1), size_t(3), size_t(4), size_t(5), size_t(8), size_t(17), size_t(96), size_t(250)}) {
    std::vector<uint64_t> a(n), b(n), want(n);
    for (size_t i = 0; i < n; ++i) {
      a[i]    = rng() & rng();
      b[i]    = rng() & rng();
      want[i] = a[i] | b[i];
    }
    accumulate(a, b);
    CAPTURE(n);
    CHECK(a == want);
  }

  // 3 layers of 100 experts (2 words per layer; the top 28 bits of each second word unused).
  GatingShape s;
  s.layers          = 3;
  s.experts         = 100;
  s.top_k           = 2;
  s.words_per_layer = 2;
  std::vector<uint64_t> u(6, 0);
  std::vector<uint16_t> d(3);
  u[0] = 0b1011;                   // layer 0: experts 0, 1, 3
  u[1] = uint64_t(1) << 35;        // layer 0: expert 99
  u[2] = ~uint64_t(0);             // layer 1: experts 0-63
  u[5] = (uint64_t(1) << 36) - 1;  // layer 2: experts 64-99
  CHECK(count_distinct(u, s, d) == 4 + 64 + 36);
  CHECK(d == std::vector<uint16_t>{4, 64, 36});
  CHECK_FALSE(union_is_full(u, s));
  u[0] = u[2] = u[4] = ~uint64_t(0);
  u[1] = u[3] = u[5] = (uint64_t(1) << 36) - 1;
  CHECK(union_is_full(u, s));
  CHECK(count_distinct(u, s, d) == 300);
  u[3] &= ~(uint64_t(1) << 20);  // layer 1 misses expert 84
  CHECK_FALSE(union_is_full(u, s));

  // Exactly 64 and 128 experts: whole words.
  GatingShape q = s;
  q.experts     = 128;
  std::vector<uint64_t> full(6, ~uint64_t(0));
  CHECK(union_is_full(full, q));
  full[5] = ~uint64_t(0) >> 1;
  CHECK_FALSE(union_is_full(full, q));
}

TEST_CASE("uniform routing: accumulate_tokens equals the OR of token_experts over the tokens")
{
  // The override prefetches a few tokens ahead; its result must equal the plain definition.
  ModelSpec m = qwen();
  UniformGating u(m, 17);
  const GatingShape& s = u.shape();
  Rng rng(6, "test");
  std::vector<Request> requests(300);
  for (auto& r : requests)
    r.routing_seed = rng();
  for (size_t n :
       {size_t(0), size_t(1), size_t(2), size_t(3), size_t(4), size_t(5), size_t(9), size_t(64), size_t(300)}) {
    std::vector<TokenRef> tokens;
    for (size_t i = 0; i < n; ++i)
      tokens.push_back({&requests[i], int(rng.below(1536))});
    std::vector<uint64_t> want(size_t(s.words()), 0), got(size_t(s.words()), 0);
    for (const TokenRef& t : tokens) {
      auto masks = u.token_experts(*t.request, t.position);
      for (size_t w = 0; w < want.size(); ++w)
        want[w] |= masks[w];
    }
    u.accumulate_tokens(tokens, got);
    CAPTURE(n);
    CHECK(got == want);
    // It ORs into the union, keeping what was there.
    std::vector<uint64_t> pre(size_t(s.words()), 0);
    pre[0]  = 1;
    pre[95] = uint64_t(1) << 63;
    u.accumulate_tokens(tokens, pre);
    CHECK((pre[0] & 1) == 1);
    CHECK((pre[95] >> 63) == 1);
  }
}
