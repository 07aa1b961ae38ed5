// ELDR signatures (sim/routing/eldr/signature.hpp): profile counting, gate sums, IDF and the six variants,
// with values by hand.
#include "sim/common/rng.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/gating/replay_gating.hpp"
#include "sim/gating/uniform_gating.hpp"
#include "sim/routing/eldr/signature.hpp"
#include "sim/workload/workload_factory.hpp"
#include "trace_test_util.hpp"

#include <cpuid.h>
#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <vector>

using namespace eldr;

namespace {

PromptProfile profile(int layers, int experts, std::vector<uint16_t> counts, std::vector<float> prob = {},
                      std::vector<float> score = {})
{
  PromptProfile p;
  p.layers     = layers;
  p.experts    = experts;
  p.counts     = std::move(counts);
  p.gate_prob  = std::move(prob);
  p.gate_score = std::move(score);
  return p;
}

void check_values(const Signature& s, const std::vector<double>& raw)
{
  double n2 = 0;
  for (double x : raw)
    n2 += x * x;
  REQUIRE(s.size() == raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    CHECK(s[i] == doctest::Approx(raw[i] / std::sqrt(n2)).epsilon(1e-6));
}

// The default config's generated routing (Qwen3-30B-A3B task) without the chat template (the bare
// generator), a small workload.
struct Generated {
  Experiment x                          = load_experiment("configs/default.json", {{"workload.measured_requests", "40"},
                                                                                   {"workload.chat_template", "false"},
                                                                                   {"workload.warmup_requests", "0"},
                                                                                   {"workload.calibration_requests", "10"}});
  Workload w                            = make_workload(x);
  std::unique_ptr<GatingSource> routing = make_gating_source(x, w);
};

}  // namespace

TEST_CASE("signature: IDF by hand on three requests")
{
  // 2 layers x 3 experts. Activated cells (count > 0):
  //   r0: l0 {0, 2}, l1 {2};  r1: l0 {0}, l1 {1, 2};  r2: l0 {2}, l1 {1}
  // df: l0 [2, 0, 2], l1 [0, 2, 2]; N = 3: idf = ln(4 / (df + 1)) = ln(4/3) for df 2, ln 4 for df 0.
  std::vector<PromptProfile> cal{profile(2, 3, {2, 0, 1, 0, 0, 3}), profile(2, 3, {1, 0, 0, 0, 1, 1}),
                                 profile(2, 3, {0, 0, 4, 0, 2, 0})};
  IdfTable t = fit_idf(cal);
  CHECK(t.requests == 3);
  CHECK(t.layers == 2);
  CHECK(t.experts == 3);
  const double a = std::log(4.0 / 3.0), b = std::log(4.0);  // 0.2876821, 1.3862944
  CHECK(t.at(0, 0) == doctest::Approx(a));
  CHECK(t.at(0, 1) == doctest::Approx(b));
  CHECK(t.at(0, 2) == doctest::Approx(a));
  CHECK(t.at(1, 0) == doctest::Approx(b));
  CHECK(t.at(1, 1) == doctest::Approx(a));
  CHECK(t.at(1, 2) == doctest::Approx(a));
  // A cell every request activates gets ln((N+1)/(N+1)) = 0.
  IdfTable all = fit_idf(std::vector<PromptProfile>{profile(1, 2, {1, 0}), profile(1, 2, {5, 1})});
  CHECK(all.at(0, 0) == 0.f);
  CHECK(all.at(0, 1) == doctest::Approx(std::log(3.0 / 2.0)));
  CHECK_THROWS_AS(fit_idf(std::vector<PromptProfile>{}), std::invalid_argument);
  CHECK_THROWS_AS(fit_idf(std::vector<PromptProfile>{profile(1, 2, {1, 0}), profile(2, 1, {1, 0})}),
                  std::invalid_argument);
}

TEST_CASE("signature: each variant by hand, mask order and one global L2 normalisation")
{
  // 2 layers x 4 experts.
  //            counts        gate_prob              gate_score            idf
  //   layer 0: [3, 0, 1, 0]  [0.9, 0, 0.2, 0]       [1.5, 0, -0.5, 0]     [0.5, 1, 2, 1]
  //   layer 1: [0, 4, 0, 2]  [0, 1.6, 0, 0.5]       [0, 2, 0, 1]          [1, 0.25, 1, 3]
  const PromptProfile p =
      profile(2, 4, {3, 0, 1, 0, 0, 4, 0, 2}, {0.9f, 0, 0.2f, 0, 0, 1.6f, 0, 0.5f}, {1.5f, 0, -0.5f, 0, 0, 2, 0, 1});
  IdfTable idf;
  idf.layers   = 2;
  idf.experts  = 4;
  idf.requests = 10;
  idf.idf      = {0.5f, 1, 2, 1, 1, 0.25f, 1, 3};
  const std::vector<int> mask{1, 0};  // layer 1 first: signatures concatenate in mask order

  // counts: [0 4 0 2 | 3 0 1 0], norm^2 = 16 + 4 + 9 + 1 = 30
  check_values(make_signature(p, SignatureVariant::counts, nullptr, mask), {0, 4, 0, 2, 3, 0, 1, 0});
  // counts x idf: [0 1 0 6 | 1.5 0 2 0], norm^2 = 1 + 36 + 2.25 + 4 = 43.25
  check_values(make_signature(p, SignatureVariant::counts_idf, &idf, mask), {0, 1, 0, 6, 1.5, 0, 2, 0});
  // sqrt: [0 2 0 sqrt2 | sqrt3 0 1 0], norm^2 = 10
  check_values(make_signature(p, SignatureVariant::sqrt_counts, nullptr, mask),
               {0, 2, 0, std::sqrt(2.0), std::sqrt(3.0), 0, 1, 0});
  // binary: [0 1 0 1 | 1 0 1 0] / 2
  check_values(make_signature(p, SignatureVariant::binary, nullptr, mask), {0, 1, 0, 1, 1, 0, 1, 0});
  // gate_prob: [0 1.6 0 0.5 | 0.9 0 0.2 0], norm^2 = 3.66
  check_values(make_signature(p, SignatureVariant::gate_prob, nullptr, mask), {0, 1.6, 0, 0.5, 0.9, 0, 0.2, 0});
  // gate_score (raw, may be negative): [0 2 0 1 | 1.5 0 -0.5 0], norm^2 = 7.5
  check_values(make_signature(p, SignatureVariant::gate_score, nullptr, mask), {0, 2, 0, 1, 1.5, 0, -0.5, 0});

  // By hand, one value: counts, the first cell of layer 0's part = 3 / sqrt(30) = 0.5477226.
  Signature s = make_signature(p, SignatureVariant::counts, nullptr, mask);
  CHECK(s[4] == doctest::Approx(0.5477226));
  // One global normalisation, not per layer: layer 1's part has norm sqrt(20/30), not 1.
  CHECK(std::sqrt(dot({s.data(), 4}, {s.data(), 4})) == doctest::Approx(std::sqrt(20.0 / 30.0)));
  CHECK(dot(s, s) == doctest::Approx(1.0));

  // A one-layer mask keeps only that layer: [3 0 1 0] / sqrt(10).
  check_values(make_signature(p, SignatureVariant::counts, nullptr, std::vector<int>{0}), {3, 0, 1, 0});
  // IDF on layer 0 only: [1.5 0 2 0] / 2.5
  Signature l0 = make_signature(p, SignatureVariant::counts_idf, &idf, std::vector<int>{0});
  CHECK(l0[0] == doctest::Approx(0.6));
  CHECK(l0[2] == doctest::Approx(0.8));

  // A profile with nothing on the mask gives all zeros (no division by zero).
  const PromptProfile empty = profile(2, 4, {1, 0, 0, 0, 0, 0, 0, 0});
  Signature z               = make_signature(empty, SignatureVariant::counts, nullptr, std::vector<int>{1});
  CHECK(std::all_of(z.begin(), z.end(), [](float x) { return x == 0.f; }));
  CHECK(cosine(z, z) == 0.0);

  // Errors: counts_idf without (or with a mis-shaped) IDF, gate variants without gate sums, bad layers.
  CHECK_THROWS_AS(make_signature(p, SignatureVariant::counts_idf, nullptr, mask), std::invalid_argument);
  IdfTable small = idf;
  small.experts  = 2;
  CHECK_THROWS_AS(make_signature(p, SignatureVariant::counts_idf, &small, mask), std::invalid_argument);
  CHECK_THROWS_AS(make_signature(empty, SignatureVariant::gate_prob, nullptr, mask), std::invalid_argument);
  CHECK_THROWS_AS(make_signature(empty, SignatureVariant::gate_score, nullptr, mask), std::invalid_argument);
  CHECK_THROWS_AS(make_signature(p, SignatureVariant::counts, nullptr, std::vector<int>{2}), std::invalid_argument);
}

TEST_CASE("signature: names, dot and cosine, transport bytes")
{
  for (SignatureVariant v : kAllSignatureVariants)
    CHECK(parse_signature_variant(to_string(v)) == v);
  CHECK(!parse_signature_variant("idf").has_value());
  CHECK(to_string(kDefaultSignatureVariant) == "counts_idf");

  // dot over 19 floats (two blocks of 8 and a tail of 3): sum of i * 2 for i = 1..19 = 380.
  std::vector<float> a(19), b(19, 2.f);
  std::iota(a.begin(), a.end(), 1.f);
  CHECK(dot(a, b) == doctest::Approx(380.0));
  CHECK(cosine(std::vector<float>{1, 0}, std::vector<float>{1, 1}) == doctest::Approx(std::sqrt(0.5)));
  CHECK(cosine(std::vector<float>{3, 4}, std::vector<float>{6, 8}) == doctest::Approx(1.0));

  // Qwen3-30B-A3B: an int16 48 x 128 count matrix = 12 KiB; gate variants carry float32 sums.
  GatingShape q{48, 128, 8, 2};
  CHECK(signature_transport_bytes(q) == 12288);
  CHECK(signature_transport_bytes(q, SignatureVariant::binary) == 12288);
  CHECK(signature_transport_bytes(q, SignatureVariant::gate_prob) == 24576);
}

TEST_CASE("signature: profiles counted from masks equal counts from the replayed ids, gates follow the ids")
{
  // 3 layers x 80 experts (two mask words a layer), top-3, random distinct ids in random order and
  // random gate values, written as a routing file and replayed.
  test::ScratchDir d("signature");
  const int L = 3, E = 80, K = 3;
  const std::vector<std::pair<int, int>> lengths{{37, 6}, {5, 4}};
  Rng rng(7, "test.signature.ids");
  std::vector<std::vector<uint16_t>> ids;  // per record: tokens x layers x top_k
  std::vector<std::vector<float>> gates;
  {
    GatingWriter w(d.file("r.bin"), L, E, K, true);
    for (auto [prompt, output] : lengths) {
      std::vector<uint16_t> rid;
      std::vector<float> rg;
      for (int t = 0; t < prompt + output; ++t)
        for (int l = 0; l < L; ++l) {
          std::vector<uint16_t> pick;
          while (int(pick.size()) < K) {
            uint16_t e = uint16_t(rng.below(E));
            if (std::find(pick.begin(), pick.end(), e) == pick.end())
              pick.push_back(e);
          }
          for (uint16_t e : pick) {
            rid.push_back(e);
            rg.push_back(float(rng.uniform01()));
          }
        }
      w.add_record(uint32_t(prompt), uint32_t(output), rid, rg);
      ids.push_back(rid);
      gates.push_back(rg);
    }
    w.close();
  }
  ReplayGating src(d.file("r.bin"));
  auto g = make_gate_source(src);
  REQUIRE(g != nullptr);
  CHECK(!g->has_scores());
  CHECK(gates_support(g.get(), SignatureVariant::gate_prob));
  CHECK(!gates_support(g.get(), SignatureVariant::gate_score));
  CHECK(gates_support(nullptr, SignatureVariant::counts_idf));
  CHECK(!gates_support(nullptr, SignatureVariant::gate_prob));

  for (size_t rec = 0; rec < lengths.size(); ++rec) {
    Request r;
    r.id             = uint32_t(rec);
    r.routing_record = int32_t(rec);
    r.prompt_tokens  = lengths[rec].first;
    r.output_tokens  = lengths[rec].second + 1;  // the last output token is never fed
    std::vector<uint16_t> want(size_t(L * E), 0), want_dec(size_t(L * E), 0);
    std::vector<double> want_prob(size_t(L * E), 0);
    for (int t = 0; t < r.prompt_tokens + r.output_tokens - 1; ++t)
      for (int l = 0; l < L; ++l)
        for (int j = 0; j < K; ++j) {
          const size_t at   = (size_t(t) * L + size_t(l)) * K + size_t(j);
          const size_t cell = size_t(l) * E + ids[rec][at];
          if (t < r.prompt_tokens) {
            ++want[cell];
            want_prob[cell] += gates[rec][at];
          } else {
            ++want_dec[cell];
          }
        }
    PromptProfile p = count_prompt(src, r, {true, false}, g.get());
    CHECK(p.counts == want);
    CHECK(count_decode(src, r) == want_dec);
    for (size_t c = 0; c < want_prob.size(); ++c)
      CHECK(p.gate_prob[c] == doctest::Approx(want_prob[c]).epsilon(1e-5));
    CHECK(std::accumulate(p.counts.begin(), p.counts.end(), 0) == r.prompt_tokens * L * K);
    // Only layer 1 (per-token gate path): layer 1's cells as above, the others untouched.
    PromptProfile one = count_prompt(src, r, {true, false}, g.get(), std::vector<int>{1});
    for (int l = 0; l < L; ++l)
      for (int e = 0; e < E; ++e) {
        const size_t c = size_t(l * E + e);
        CHECK(one.counts[c] == (l == 1 ? want[c] : 0));
        CHECK(one.gate_prob[c] == doctest::Approx(l == 1 ? want_prob[c] : 0.0).epsilon(1e-5));
      }
    // Raw scores are not in the file: asking for them is an error.
    CHECK_THROWS_AS(count_prompt(src, r, {false, true}, g.get()), std::invalid_argument);
    // Gate sums without a gate source are an error too.
    CHECK_THROWS_AS(count_prompt(src, r, {true, false}, nullptr), std::invalid_argument);
  }

  // Without gates in the file there is no gate source.
  test::write_synthetic_routing(d.file("n.bin"), L, E, K, {{4, 2}});
  ReplayGating plain(d.file("n.bin"));
  CHECK(make_gate_source(plain) == nullptr);
}

TEST_CASE("signature: generated routing gates are each token's own, and block profiles add up")
{
  Generated g;
  const GatingSource& src = *g.routing;
  const auto& gen         = dynamic_cast<const GeneratedGating&>(src);
  const GatingShape& s    = src.shape();
  auto gates              = make_gate_source(src);
  REQUIRE(gates != nullptr);
  CHECK(gates->has_scores());

  Request r       = g.w.calibration[0];
  r.prompt_tokens = 70;
  PromptProfile p = count_prompt(src, r, {true, true}, gates.get());

  // By hand: every (token, layer, expert) bit tested one by one, the gate values from token_gates in
  // the order of the bits.
  const size_t K = size_t(s.top_k);
  std::vector<uint16_t> want(size_t(s.layers) * s.experts, 0);
  std::vector<double> prob(want.size(), 0), score(want.size(), 0);
  for (int t = 0; t < r.prompt_tokens; ++t) {
    std::span<const uint64_t> m = src.token_experts(r, t);
    const auto [tp, ts, te]     = gates->token_gates(r, t);
    REQUIRE(te.size() == tp.size());  // a generated source keeps its picks' ids
    std::span<const float> z = gen.palette_logits(gen.palette_of(r, t));
    for (int l = 0; l < s.layers; ++l) {
      size_t j         = size_t(l) * K;
      double layer_sum = 0, zmax = -1e30;
      for (int e = 0; e < s.experts; ++e)
        zmax = std::max(zmax, double(z[size_t(l) * s.experts + e]));
      for (int e = 0; e < s.experts; ++e)
        if (m[size_t(l * s.words_per_layer + e / 64)] >> (e % 64) & 1) {
          const size_t c = size_t(l) * s.experts + e;
          ++want[c];
          prob[c] += tp[j];
          score[c] += ts[j];
          CHECK(te[j] == e);
          layer_sum += tp[j];
          CHECK(tp[j] > 0);
          // A token's own logit at a pick is the palette's plus its Gumbel: finite, on the palette's scale.
          CHECK(std::isfinite(ts[j]));
          CHECK(ts[j] > zmax - 40);
          ++j;
        }
      CHECK(j == size_t(l + 1) * K);
      CHECK(layer_sum == doctest::Approx(1.0).epsilon(1e-5));  // Qwen3 renormalizes over its top 8
    }
  }
  CHECK(p.counts == want);
  int bad = 0;
  for (size_t c = 0; c < want.size(); ++c)
    if (std::abs(p.gate_prob[c] - prob[c]) > 1e-5 * (1 + prob[c]) ||
        std::abs(p.gate_score[c] - score[c]) > 1e-4 * (1 + std::abs(score[c]))) {
      if (++bad < 5)
        MESSAGE("cell ", c, " count ", want[c], " prob ", p.gate_prob[c], " vs ", prob[c], " score ", p.gate_score[c],
                " vs ", score[c]);
    }
  CHECK(bad == 0);

  // A token's gates are its record's: another gate source of the same routing gives the same values,
  // whatever order its palettes' tables were drawn in. They are not a function of the palette and the
  // picks (the noise is per token): two tokens of one palette that picked the same experts in a layer
  // have different gate values there.
  auto again = make_gate_source(src);
  again->token_gates(r, 69);
  const TokenGates a = again->token_gates(r, 0), b = gates->token_gates(r, 0);
  CHECK(std::equal(a.prob.begin(), a.prob.end(), b.prob.begin(), b.prob.end()));
  CHECK(std::equal(a.score.begin(), a.score.end(), b.score.begin(), b.score.end()));
  // (palette, layer, picks) -> the first such token's record and gate values there
  std::map<std::tuple<int, int, std::vector<uint64_t>>, std::pair<size_t, std::vector<float>>> seen;
  int same_picks = 0, same_gates = 0;
  Request longer       = r;
  longer.prompt_tokens = 3000;  // enough repeats of a layer's picks within one palette whatever the mix
  for (int t = 0; t < longer.prompt_tokens; ++t) {
    std::span<const float> tp   = gates->token_gates(longer, t).prob;
    std::span<const uint64_t> m = src.token_experts(longer, t);
    for (int l = 0; l < s.layers; ++l) {
      auto at = m.begin() + l * s.words_per_layer;
      std::vector<uint64_t> picks(at, at + s.words_per_layer);
      std::vector<float> values(tp.begin() + l * K, tp.begin() + (l + 1) * K);
      const size_t record = gen.record_of(longer, t);
      auto [it, fresh]    = seen.try_emplace({gen.palette_of(longer, t), l, picks}, record, values);
      if (fresh)
        continue;
      if (it->second.first == record) {
        CHECK(it->second.second == values);  // one record, one set of gates
        continue;
      }
      ++same_picks;
      same_gates += it->second.second == values;
    }
  }
  CHECK(same_picks > 100);
  CHECK(same_gates == 0);

  // KV blocks of 16 tokens: their profiles add up to the prompt's.
  PromptProfile sum = empty_profile(s, {true, true});
  for (int b = 0; b < r.prompt_tokens; b += 16) {
    PromptProfile block = empty_profile(s, {true, true});
    add_tokens(src, r, b, std::min(b + 16, r.prompt_tokens), block, gates.get());
    add_profile(sum, block);
  }
  CHECK(sum.counts == p.counts);
  bad = 0;
  for (size_t c = 0; c < want.size(); ++c)
    bad += std::abs(sum.gate_prob[c] - p.gate_prob[c]) > 1e-5f * (1 + p.gate_prob[c]) ||
           std::abs(sum.gate_score[c] - p.gate_score[c]) > 1e-5f * (1 + std::abs(p.gate_score[c]));
  CHECK(bad == 0);

  // Decode profile: positions P .. P+O-2, one short of the output (the last token is only sampled).
  std::vector<uint16_t> dec = count_decode(src, r);
  CHECK(std::accumulate(dec.begin(), dec.end(), 0L) == long(r.output_tokens - 1) * s.layers * s.top_k);
  PromptProfile out = empty_profile(s);
  add_tokens(src, r, r.prompt_tokens, r.prompt_tokens + r.output_tokens - 1, out);
  CHECK(out.counts == dec);

  // Counting only some layers gives the same cells there and leaves the others alone, on every path:
  // counts only (counters in registers for masks of up to 12 layers, across the 255-token flushes;
  // in memory for larger ones), per-token gates, and few tokens (scalar).
  const std::vector<int> three{3, 40, 17}, thirteen{0, 2, 5, 9, 11, 20, 21, 30, 33, 38, 41, 44, 47};
  for (int n : {600, 70, 5})
    for (const std::vector<int>& some : {three, thirteen}) {
      Request q                 = r;
      q.prompt_tokens           = n;
      const PromptProfile whole = count_prompt(src, q, {true, true}, gates.get());
      for (ProfileFields f : {ProfileFields{}, ProfileFields{true, true}}) {
        const PromptProfile part = count_prompt(src, q, f, gates.get(), some);
        int wrong                = 0;
        for (int l = 0; l < s.layers; ++l) {
          const bool in = std::find(some.begin(), some.end(), l) != some.end();
          for (int e = 0; e < s.experts; ++e) {
            const size_t c = size_t(l) * s.experts + e;
            wrong += part.counts[c] != (in ? whole.counts[c] : 0);
            if (f.gate_prob)
              wrong += std::abs(part.gate_prob[c] - (in ? whole.gate_prob[c] : 0.f)) > 1e-5f * (1 + whole.gate_prob[c]);
          }
        }
        CHECK(wrong == 0);
      }
    }
  CHECK_THROWS_AS(count_prompt(src, r, {}, nullptr, std::vector<int>{48}), std::invalid_argument);

  // Uniform routing has no gates.
  UniformGating u(g.x.model, 1);
  CHECK(make_gate_source(u) == nullptr);
}

TEST_CASE("signature: the scalar, AVX2 and AVX-512 counting kernels agree")
{
  // Random masks of 3 layers x 80 experts (the second word of a layer half used), top-5, 600 tokens:
  // more than 255, so the byte counters are flushed on the way.
  const GatingShape s{3, 80, 5, 2};
  Rng rng(3, "test.signature.kernels");
  std::vector<std::vector<uint64_t>> masks(600, std::vector<uint64_t>(size_t(s.words()), 0));
  std::vector<uint16_t> want(size_t(s.layers * s.experts), 0);
  for (auto& m : masks)
    for (int l = 0; l < s.layers; ++l)
      for (int k = 0; k < s.top_k;) {
        const int e = int(rng.below(uint64_t(s.experts)));
        uint64_t& w = m[size_t(l * s.words_per_layer + e / 64)];
        if (w >> (e % 64) & 1)
          continue;
        w |= uint64_t(1) << (e % 64);
        ++want[size_t(l * s.experts + e)];
        ++k;
      }
  std::vector<std::span<const uint64_t>> tokens(masks.begin(), masks.end());
  int ran = 0;
  for (int kernel : {0, 1, 2, -1}) {
    CAPTURE(kernel);
    std::vector<uint16_t> got(want.size(), 7);  // adds to what is there
    if (!detail::count_masks_with(kernel, tokens, s, got))
      continue;  // the CPU lacks it
    ++ran;
    for (size_t c = 0; c < want.size(); ++c)
      CHECK(got[c] == want[c] + 7);
  }
  // Scalar and the automatic choice always; AVX2 and AVX-512BW where the CPU has them.
  __builtin_cpu_init();
  CHECK(ran == 2 + int(__builtin_cpu_supports("avx2") != 0) +
                   int(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")));
  std::vector<uint16_t> full(want.size(), 65535);
  CHECK_THROWS_AS(detail::count_masks_with(0, tokens, s, full), std::overflow_error);
}

TEST_CASE("signature: the counting kernels agree on distinct masks with multiplicities")
{
  // Random words (any bits below the expert count), random multiplicities of 1 .. 300: runs of
  // masks cross the byte counters' 255 between flushes, and a mask above the room on its own goes
  // through the token-by-token add. 13 layers x 2 words: the register kernels take several passes
  // (AVX2 6 words each, AVX-512 24) and a last, shorter one; also on a few layers.
  const GatingShape s{13, 100, 8, 2};
  Rng rng(5, "test.signature.counted_kernels");
  for (int round = 0; round < 6; ++round) {
    const size_t n = size_t(1 + rng.below(round < 3 ? 40 : 400));
    std::vector<std::vector<uint64_t>> masks(n, std::vector<uint64_t>(size_t(s.words()), 0));
    std::vector<MaskCount> counted;
    long total = 0;
    for (auto& m : masks) {
      for (int l = 0; l < s.layers; ++l) {
        m[size_t(2 * l)]     = rng();
        m[size_t(2 * l + 1)] = rng() & ((uint64_t(1) << (s.experts - 64)) - 1);
      }
      // Mostly 1 (a prompt's records), some large.
      const uint32_t times = rng.below(3) == 0 ? uint32_t(1 + rng.below(300)) : 1;
      counted.push_back({m.data(), times});
      total += times;
    }
    REQUIRE(total < 65535 - 7);
    const std::vector<int> few{11, 0, 6};
    for (const std::vector<int>& only : {std::vector<int>{}, few}) {
      CAPTURE(round);
      CAPTURE(only.size());
      std::vector<uint16_t> want(size_t(s.layers * s.experts), 7);
      for (const MaskCount& m : counted)
        for (int l = 0; l < s.layers; ++l) {
          if (!only.empty() && std::find(only.begin(), only.end(), l) == only.end())
            continue;
          for (int e = 0; e < s.experts; ++e)
            if (m.masks[size_t(2 * l + e / 64)] >> (e % 64) & 1)
              want[size_t(l * s.experts + e)] = uint16_t(want[size_t(l * s.experts + e)] + m.count);
        }
      for (int kernel : {0, 1, 2, -1}) {
        CAPTURE(kernel);
        std::vector<uint16_t> got(want.size(), 7);
        if (!detail::count_mask_counts_with(kernel, counted, s, got, only))
          continue;  // the CPU lacks it
        int wrong = 0;
        for (size_t c = 0; c < want.size(); ++c)
          wrong += got[c] != want[c];
        CHECK(wrong == 0);
      }
    }
  }
}

namespace {

// Two masks, token t takes mask t % 5 == 0 ? 1 : 0: as distinct masks, (mask 0, 4/5 of the tokens)
// and (mask 1, 1/5), or token by token when `pooled` is off.
class TwoMaskSource : public GatingSource {
 public:
  explicit TwoMaskSource(bool pooled) : pooled_(pooled)
  {
    masks_[0] = {0b1011, 0, 0b110, 0};
    masks_[1] = {0b1, 0b1, 0, 0b11};
  }
  const GatingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request&, int token) const override { return masks_[token % 5 == 0]; }
  bool distinct_masks(const Request&, int begin, int end, std::vector<MaskCount>& out) const override
  {
    if (!pooled_)
      return false;
    uint32_t ones = 0;
    for (int t = begin; t < end; ++t)
      ones += t % 5 == 0;
    out.push_back({masks_[0].data(), uint32_t(end - begin) - ones});
    out.push_back({masks_[1].data(), ones});
    return true;
  }

 private:
  GatingShape shape_{2, 128, 3, 2};
  std::array<std::vector<uint64_t>, 2> masks_;
  bool pooled_;
};

}  // namespace

TEST_CASE("signature: counting distinct masks with multiplicities equals counting token by token")
{
  // 3001 tokens: multiplicities far above the byte counters' 255, split across flushes.
  Request r;
  r.prompt_tokens = 3001;
  for (std::vector<int> only : {std::vector<int>{}, std::vector<int>{1}}) {
    const PromptProfile pooled = count_prompt(TwoMaskSource(true), r, {}, nullptr, only);
    const PromptProfile tokens = count_prompt(TwoMaskSource(false), r, {}, nullptr, only);
    CHECK(pooled.counts == tokens.counts);
    CHECK(tokens.counts[128 + 1] == 3001 - 601);           // layer 1, expert 1: mask 0 only
    CHECK(tokens.counts[128 + 64] == 601);                 // layer 1, expert 64: mask 1 only
    CHECK(tokens.counts[0] == (only.empty() ? 3001 : 0));  // layer 0, expert 0: both masks
  }
  // A short range: the scalar kernel.
  r.prompt_tokens = 5;
  CHECK(count_prompt(TwoMaskSource(true), r).counts == count_prompt(TwoMaskSource(false), r).counts);
}

TEST_CASE("generated routing: distinct masks are the tokens' records with their multiplicities")
{
  Generated g;
  const GatingSource& src = *g.routing;
  Request r               = g.w.calibration[1];
  std::vector<MaskCount> got;
  REQUIRE(src.distinct_masks(r, 0, r.prompt_tokens + r.output_tokens, got));
  long total = 0;
  for (const MaskCount& m : got) {
    total += m.count;
    long same = 0;  // tokens whose record is this one
    for (int t = 0; t < r.prompt_tokens + r.output_tokens; ++t)
      same += src.token_experts(r, t).data() == m.masks;
    CHECK(same == long(m.count));
  }
  CHECK(total == r.prompt_tokens + r.output_tokens);
  CHECK(got.size() < size_t(r.prompt_tokens + r.output_tokens));  // records repeat
}

TEST_CASE("signature: centroid_dots equals dot() bit for bit, on every kernel")
{
  // Random centroids and signatures with 0 to 100 % zeros (some -0.0), dimensions around the 8- and
  // 32-float blocks of dot_kernel, K around the 16-centroid groups.
  Rng rng(5, "test.signature.centroid_dots");
  auto value = [&] { return float(rng.uniform01() * 2 - 1); };
  int ran    = 0;
  for (int dim : {1, 7, 8, 9, 31, 32, 33, 40, 64, 100, 135, 1152}) {
    for (int k : {1, 3, 16, 17, 40}) {
      CAPTURE(dim);
      CAPTURE(k);
      std::vector<float> rows(size_t(k) * size_t(dim));
      for (float& v : rows)
        v = value();
      const CentroidTable table(rows, k, dim);
      REQUIRE(table.rows() == k);
      REQUIRE(table.cols() == dim);
      CHECK(reinterpret_cast<uintptr_t>(table.data()) % 64 == 0);
      for (double zeros : {0.0, 0.4, 0.9, 1.0}) {
        std::vector<float> x(static_cast<size_t>(dim));
        for (float& v : x)
          v = rng.uniform01() < zeros ? (rng.uniform01() < 0.5 ? 0.f : -0.f) : value();
        std::vector<float> want(static_cast<size_t>(k));
        for (int c = 0; c < k; ++c)
          want[size_t(c)] = dot(std::span<const float>(rows).subspan(size_t(c) * size_t(dim), size_t(dim)), x);
        for (int kernel : {0, 1, 2, -1}) {
          CAPTURE(kernel);
          std::vector<float> got(size_t(k), 99.f);
          if (!detail::centroid_dots_with(kernel, table, x, got))
            continue;  // the CPU lacks it
          ++ran;
          for (int c = 0; c < k; ++c)
            CHECK(std::bit_cast<uint32_t>(got[size_t(c)]) == std::bit_cast<uint32_t>(want[size_t(c)]));
        }
      }
    }
  }
  // 12 dimensions x 5 sizes x 4 densities, each on kernel 0 and the automatic choice, and on the
  // AVX-512 and AVX2 kernels where the CPU has them.
  __builtin_cpu_init();
  CHECK(ran ==
        12 * 5 * 4 * (2 + int(__builtin_cpu_supports("avx512f") != 0) + int(__builtin_cpu_supports("avx2") != 0)));
  const CentroidTable table(std::vector<float>(6, 1.f), 2, 3);
  std::vector<float> out(2), x(4);
  CHECK_THROWS_AS(centroid_dots(table, x, out), std::invalid_argument);
  CHECK_THROWS_AS(CentroidTable(std::vector<float>(5), 2, 3), std::invalid_argument);
}

namespace {

// Which approx_centroid_dots kernels the CPU has (1 AVX-512F, 2 AVX2 + FMA + F16C).
bool has_approx_kernel(int kernel)
{
  __builtin_cpu_init();
  unsigned a = 0, b = 0, c = 0, d = 0;  // F16C from cpuid (clang's __builtin_cpu_supports lacks it)
  return kernel == 1 ? bool(__builtin_cpu_supports("avx512f"))
                     : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

// Runs every approx kernel the CPU has on x: each within its bound of dot() (and the bound at most
// max_bound), all kernels the same bits as the automatic choice. Returns the kernels run; none
// where the CPU has none (then the automatic choice must give nothing).
int check_approx_kernels(const CentroidTable& table, std::span<const float> rows, std::span<const float> x,
                         double max_bound)
{
  const int k = table.rows(), dim = table.cols();
  const size_t n = static_cast<size_t>(k);
  std::vector<float> approx(n), bound(n), want_approx(n), want_bound(n);
  const bool any = has_approx_kernel(1) || has_approx_kernel(2);
  CHECK(table.has_half() == any);
  if (!detail::approx_centroid_dots_with(-1, table, x, want_approx, want_bound)) {
    for (int kernel : {1, 2})
      CHECK(!detail::approx_centroid_dots_with(kernel, table, x, approx, bound));
    return 0;
  }
  CHECK(any);
  int ran = 0;
  for (int kernel : {1, 2}) {
    CAPTURE(kernel);
    std::fill(approx.begin(), approx.end(), 99.f);
    const bool got = detail::approx_centroid_dots_with(kernel, table, x, approx, bound);
    CHECK(got == has_approx_kernel(kernel));
    if (!got)
      continue;
    ++ran;
    for (int c = 0; c < k; ++c) {
      const float exact = dot(rows.subspan(size_t(c) * size_t(dim), size_t(dim)), x);
      CHECK(std::abs(double(approx[size_t(c)]) - exact) <= bound[size_t(c)]);
      CHECK(bound[size_t(c)] <= max_bound);
      CHECK(std::bit_cast<uint32_t>(approx[size_t(c)]) == std::bit_cast<uint32_t>(want_approx[size_t(c)]));
      CHECK(std::bit_cast<uint32_t>(bound[size_t(c)]) == std::bit_cast<uint32_t>(want_bound[size_t(c)]));
    }
  }
  return ran;
}

}  // namespace

TEST_CASE("signature: approx_centroid_dots stays within its bound of dot(), and the bound is small")
{
  Rng rng(6, "test.signature.approx_dots");
  // The estimates exist exactly where the CPU has AVX-512F, or AVX2 with FMA and F16C: each kernel the
  // CPU has is checked against dot() and against the others, bit for bit (ELDRSIM_TEST_PORTABLE cannot
  // hide them from the library, so this test does not honour it).
  const bool wide   = has_approx_kernel(1) || has_approx_kernel(2);
  const int kernels = int(has_approx_kernel(1)) + int(has_approx_kernel(2));
  int ran = 0, cases = 0;
  for (int dim : {1, 17, 33, 128, 1152}) {
    for (int k : {1, 16, 19}) {
      CAPTURE(dim);
      CAPTURE(k);
      std::vector<float> rows(size_t(k) * size_t(dim));
      for (int c = 0; c < k; ++c) {
        // Unit rows with values of every magnitude (float16 subnormals included).
        double n2 = 0;
        for (int i = 0; i < dim; ++i) {
          const float v             = float((rng.uniform01() - 0.5) * std::pow(10.0, -6 * rng.uniform01()));
          rows[size_t(c * dim + i)] = v;
          n2 += double(v) * v;
        }
        for (int i = 0; i < dim; ++i)
          rows[size_t(c * dim + i)] = float(rows[size_t(c * dim + i)] / std::sqrt(n2));
      }
      const CentroidTable table(rows, k, dim);
      for (double scale : {1.0, 1e-3, 1e4}) {
        std::vector<float> x(static_cast<size_t>(dim));
        double n2 = 0;
        for (float& v : x) {
          v = rng.uniform01() < 0.4 ? 0.f : float(rng.uniform01() - 0.3);
          n2 += double(v) * v;
        }
        for (float& v : x)
          v = float(v / std::sqrt(n2) * scale);
        cases += n2 > 0;  // an all-zero draw normalises to NaN: no estimate on any CPU
        // Without estimates the router computes every similarity exactly (centroid_dots, tested above
        // on every kernel).
        ran += check_approx_kernels(table, rows, x, 1e-3 * scale);
      }
      std::vector<float> bad(static_cast<size_t>(dim), 0.f), approx(static_cast<size_t>(k)),
          bound(static_cast<size_t>(k));
      bad[0] = std::numeric_limits<float>::quiet_NaN();
      for (int kernel : {1, 2, -1})
        CHECK(!detail::approx_centroid_dots_with(kernel, table, bad, approx, bound));
    }
  }
  MESSAGE("approx kernel runs: " << ran);
  CHECK(ran == (wide ? cases * kernels : 0));
}

TEST_CASE("signature: approx_centroid_dots on signature-like inputs, every kernel within its bound and alike")
{
  // As ELDR sees them: signatures of non-negative weighted counts, ~40 % zeros (whole experts
  // unused), unit norm; centroids the normalised means of 30 such signatures (K-means), 64 of them
  // (a 4x cluster) over the default mask's 9 x 128 dimensions.
  Rng rng(7, "test.signature.approx_dots_real");
  const int dim = 9 * 128, k = 64;
  auto signature = [&] {
    std::vector<float> x(static_cast<size_t>(dim));
    double n2 = 0;
    for (float& v : x) {
      v = rng.uniform01() < 0.4 ? 0.f : float(std::floor(1 + 20 * rng.uniform01() * rng.uniform01()) * 0.7);
      n2 += double(v) * v;
    }
    for (float& v : x)
      v = float(v / std::sqrt(n2));
    return x;
  };
  std::vector<float> rows(size_t(k) * size_t(dim));
  for (int c = 0; c < k; ++c) {
    std::vector<double> mean(static_cast<size_t>(dim));
    for (int j = 0; j < 30; ++j) {
      const auto x = signature();
      for (int i = 0; i < dim; ++i)
        mean[size_t(i)] += x[size_t(i)];
    }
    double n2 = 0;
    for (double m : mean)
      n2 += m * m;
    for (int i = 0; i < dim; ++i)
      rows[size_t(c * dim + i)] = float(mean[size_t(i)] / std::sqrt(n2));
  }
  const CentroidTable table(rows, k, dim);
  const int kernels = int(has_approx_kernel(1)) + int(has_approx_kernel(2));
  int ran           = 0;
  for (int s = 0; s < 40; ++s) {
    const auto x = signature();
    ran += check_approx_kernels(table, rows, x, 1e-3);
  }
  CHECK(ran == 40 * kernels);
}

namespace {

// distinct_layer_masks lists what distinct_masks lists, in the same order and with the same counts,
// each mask cut to the layers asked (in their order).
void check_layer_masks(const GatingSource& src, const Request& r, int begin, int end, const std::vector<int>& layers)
{
  const size_t W = size_t(src.shape().words_per_layer);
  std::vector<MaskCount> whole, cut;
  REQUIRE(src.distinct_masks(r, begin, end, whole));
  REQUIRE(src.distinct_layer_masks(r, begin, end, layers, cut));
  REQUIRE(cut.size() == whole.size());
  for (size_t m = 0; m < cut.size(); ++m) {
    CHECK(cut[m].count == whole[m].count);
    for (size_t i = 0; i < layers.size(); ++i)
      for (size_t w = 0; w < W; ++w)
        CHECK(cut[m].masks[i * W + w] == whole[m].masks[size_t(layers[i]) * W + w]);
  }
}

}  // namespace

TEST_CASE("generated routing: distinct layer masks are the distinct records cut to those layers")
{
  Generated g;
  const Request& r = g.w.calibration[1];
  const int n      = r.prompt_tokens + r.output_tokens;
  check_layer_masks(*g.routing, r, 0, n, {20, 3, 47, 21});
  check_layer_masks(*g.routing, r, 5, 9, {20, 3, 47, 21});  // from the copy made above
  check_layer_masks(*g.routing, r, 5, 9, {0});              // another set: a copy of its own
  std::vector<MaskCount> none;
  CHECK_FALSE(g.routing->distinct_layer_masks(r, 0, n, std::vector<int>{48}, none));  // out of range
  CHECK_FALSE(g.routing->distinct_layer_masks(r, 0, n, std::vector<int>{}, none));
  CHECK(none.empty());
  // Behind the shared-prefix source (the chat template's tokens route as the template's request).
  Experiment x = load_experiment("configs/default.json", {{"workload.measured_requests", "20"},
                                                          {"workload.warmup_requests", "0"},
                                                          {"workload.calibration_requests", "10"}});
  Workload w   = make_workload(x);
  auto shared  = make_gating_source(x, w);
  REQUIRE(w.template_owner() != nullptr);
  check_layer_masks(*shared, w.requests[2], 0, w.requests[2].prompt_tokens, {30, 10});
}

TEST_CASE("signature: counting a few layers from their copy equals counting them in whole records")
{
  Generated g;
  const std::vector<int> layers = {20, 3, 47, 21, 22};
  for (int i : {0, 1, 2}) {
    const Request& r = g.w.calibration[size_t(i)];
    CAPTURE(i);
    const PromptProfile all  = count_prompt(*g.routing, r);
    const PromptProfile some = count_prompt(*g.routing, r, {}, nullptr, layers);
    std::vector<uint16_t> want(all.counts.size(), 0);
    for (int l : layers)
      std::copy_n(&all.counts[size_t(l) * 128], 128, &want[size_t(l) * 128]);
    CHECK(some.counts == want);
    // A block of a few tokens (the scalar kernel), added to what is there.
    PromptProfile part = empty_profile(g.routing->shape());
    add_tokens(*g.routing, r, 0, 5, part, nullptr, layers);
    add_tokens(*g.routing, r, 5, r.prompt_tokens, part, nullptr, layers);
    CHECK(part.counts == want);
  }
}

TEST_CASE("signature: a count's room is checked on the layers counted only")
{
  Request r;
  r.prompt_tokens = 10;
  const TwoMaskSource src(true);
  PromptProfile p = empty_profile(src.shape());
  p.counts[0]     = 65535;  // layer 0 full: counting layer 1 alone leaves it alone
  add_tokens(src, r, 0, 10, p, nullptr, std::vector<int>{1});
  CHECK(p.counts[0] == 65535);
  CHECK(p.counts[128 + 1] == 8);
  CHECK_THROWS_AS(add_tokens(src, r, 0, 10, p, nullptr, std::vector<int>{0}), std::overflow_error);
  CHECK_THROWS_AS(add_tokens(src, r, 0, 10, p), std::overflow_error);
  CHECK_THROWS_AS(add_tokens(src, r, 0, 10, p, nullptr, std::vector<int>{2}), std::invalid_argument);
}
