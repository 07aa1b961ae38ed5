// Speculative decoding's tokens (sim/gating/speculative_tokens.hpp): the window's miss probability and
// expected union by hand, the sampled window masks at the model's extremes, and the acceptance draws.
#include "sim/gating/expected_union.hpp"
#include "sim/gating/speculative_tokens.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace eldr;

namespace {

// Two layers of two experts; request i follows tables[i] and its token t picks records[t] (one
// word per layer).
class TwoLayerSource : public GatingSource {
 public:
  TwoLayerSource(std::vector<std::vector<float>> tables, std::vector<std::vector<uint64_t>> records)
      : tables_(std::move(tables)), records_(std::move(records))
  {
  }
  const GatingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request&, int token) const override { return records_[size_t(token)]; }
  bool has_token_laws() const override { return true; }
  TokenLaw token_law(const Request& r, int) const override
  {
    const float* t = tables_[r.id].data();
    return {t, t, 0.f};
  }

 private:
  GatingShape shape_{2, 2, 1, 1};
  std::vector<std::vector<float>> tables_;
  std::vector<std::vector<uint64_t>> records_;
};

}  // namespace

TEST_CASE("window_miss: one token is 1 - p, a kept expert adds nothing, a fresh one is independent")
{
  CHECK(window_miss(0.3, 0, 0.5) == doctest::Approx(0.7));
  CHECK(window_miss(0.3, 3, 1.0) == doctest::Approx(0.7));  // every token repeats the first
  // persistence p: P(pick | not picked before) = p (1 - p) / (1 - p) = p, the tokens independent
  CHECK(window_miss(0.3, 2, 0.3) == doctest::Approx(0.7 * 0.7 * 0.7));
  // p = 0.5, rho = 0.5: f = 0.5 x 0.5 / 0.5 = 0.5, miss = 0.5 x 0.5
  CHECK(window_miss(0.5, 1, 0.5) == doctest::Approx(0.25));
  CHECK(window_miss(1.0, 2, 0.4) == 0.0);
  CHECK(window_miss(0.75, 1, 0.5) == 0.0);  // f = 0.75 x 0.5 / 0.25 capped at 1
}

TEST_CASE("Expected union of two sequences over two layers with one speculative token, by hand")
{
  // Layer 0: both sequences p = (0.5, 0.5). Layer 1: A always picks expert 0, B p = (0.5, 0.5).
  std::vector<float> a{0.5f, 0.5f, 1.0f, 0.0f}, b{0.5f, 0.5f, 0.5f, 0.5f};
  const TokenLaw la{a.data(), a.data(), 0.f}, lb{b.data(), b.data(), 0.f};
  ExpectedUnion u(2, 2);
  std::vector<double> d(2);
  SUBCASE("k = 0: one token each")
  {
    u.join(window_law(la, 0, 0.5));
    u.join(window_law(lb, 0, 0.5));
    // layer 0: 2 (1 - 0.5 x 0.5) = 1.5; layer 1: expert 0 sure, expert 1 missed with 1 x 0.5: 1.5
    CHECK(u.distinct(d) == doctest::Approx(3.0));
    CHECK(d[0] == doctest::Approx(1.5));
    CHECK(d[1] == doctest::Approx(1.5));
  }
  SUBCASE("k = 1, persistence 0.5")
  {
    u.join(window_law(la, 1, 0.5));
    u.join(window_law(lb, 1, 0.5));
    // a window of p = 0.5 misses with 0.25 (window_miss above), one of p = 1 with 0, of p = 0 with 1.
    // layer 0: 2 (1 - 0.25 x 0.25) = 1.875; layer 1: expert 0 sure, expert 1 missed with 1 x 0.25: 1.75
    CHECK(d.size() == 2);
    CHECK(u.distinct(d) == doctest::Approx(3.625));
    CHECK(d[0] == doctest::Approx(1.875));
    CHECK(d[1] == doctest::Approx(1.75));
    u.leave(window_law(lb, 1, 0.5));  // a window leaves as it joined
    CHECK(u.distinct(d) == doctest::Approx(1.5 + 1.0));
  }
}

TEST_CASE("window_masks: persistence 1 repeats the first token, 0 with p = 0 takes each token's new experts")
{
  // Records: token 0 picks expert 0 at both layers, token 1 expert 1 at layer 0 and 0 at layer 1,
  // token 2 both experts at layer 0.
  std::vector<std::vector<uint64_t>> records{{1, 1}, {2, 1}, {3, 2}};
  Request r;
  r.id            = 0;
  r.prompt_tokens = 0;
  r.output_tokens = 3;
  std::vector<uint64_t> out;
  SUBCASE("persistence 1")
  {
    TwoLayerSource src({{0.5f, 0.5f, 0.5f, 0.5f}}, records);
    window_masks(src, r, 0, 2, 1.0, 7, {}, out);
    CHECK(out == std::vector<uint64_t>{1, 1, 1, 1, 1, 1});
  }
  SUBCASE("persistence 0, p = 0: no expert kept, every new one added")
  {
    TwoLayerSource src({{0.f, 0.f, 0.f, 0.f}}, records);
    window_masks(src, r, 0, 2, 0.0, 7, {}, out);
    // token 1: layer 0 {1} (new), layer 1 {} (its expert 0 is token 0's: not kept);
    // token 2: layer 0 own {0, 1} minus token 1's {1} = {0}; layer 1 own {1}, token 1 had none: {1}
    CHECK(out == std::vector<uint64_t>{1, 1, 2, 0, 1, 2});
  }
  SUBCASE("window 0: the token as given")
  {
    TwoLayerSource src({{0.f, 0.f, 0.f, 0.f}}, records);
    window_masks(src, r, 1, 0, 0.0, 7, {}, out);
    CHECK(out == std::vector<uint64_t>{2, 1});
  }
}

TEST_CASE("Acceptance: 1 + a emitted, P(a >= i) the product of the first i acceptances")
{
  const std::vector<double> alpha{0.8, 0.5};
  CHECK(expected_emitted(alpha) == doctest::Approx(1 + 0.8 + 0.4));
  CHECK(expected_emitted({}) == 1.0);
  std::vector<long> count(3, 0);
  const int n = 200000;
  for (int g = 0; g < n; ++g)
    ++count[size_t(accepted_drafts(11, uint32_t(g % 97), g, alpha))];
  // P(a = 0) = 0.2, P(a = 1) = 0.8 x 0.5 = 0.4, P(a = 2) = 0.4; binomial sd < 0.0012 at n = 200000
  CHECK(double(count[0]) / n == doctest::Approx(0.2).epsilon(0.03));
  CHECK(double(count[1]) / n == doctest::Approx(0.4).epsilon(0.03));
  CHECK(double(count[2]) / n == doctest::Approx(0.4).epsilon(0.03));
  CHECK(accepted_drafts(11, 3, 40, alpha) == accepted_drafts(11, 3, 40, alpha));  // counter-based
  CHECK(accepted_drafts(11, 3, 40, std::vector<double>{1.0, 1.0, 1.0}) == 3);
  CHECK(accepted_drafts(11, 3, 40, std::vector<double>{0.0, 1.0}) == 0);
}
