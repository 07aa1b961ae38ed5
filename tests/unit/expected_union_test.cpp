// Expected unions (sim/gating/expected_union.hpp): hand-computed cases, the incremental products
// against a from-scratch computation, and the expectation against the mean of sampled unions drawn
// from the same generated routing (the sampled mode, an independent computation of the same law).
#include "sim/config/experiment.hpp"
#include "sim/gating/expected_union.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/gating/shared_prefix_gating.hpp"
#include "sim/gating/speculative_tokens.hpp"
#include "sim/workload/workload_factory.hpp"
#include "tests/unit/test_cpu.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace eldr;

namespace {

// A source of one layer whose laws are given tables: request i follows laws[i] in both phases.
class TableSource : public GatingSource {
 public:
  TableSource(int experts, std::vector<std::vector<float>> tables) : tables_(std::move(tables))
  {
    shape_ = {1, experts, 1, (experts + 63) / 64};
  }
  const GatingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request&, int) const override { return {}; }
  bool has_token_laws() const override { return true; }
  TokenLaw token_law(const Request& r, int) const override
  {
    const float* t = tables_[r.id].data();
    return {t, t, 0.f};
  }

 private:
  GatingShape shape_;
  std::vector<std::vector<float>> tables_;
};

// The default scenario (or `routing`) with `requests` measured requests and no warm-up, and its source.
struct Scenario {
  Experiment x;
  Workload w;
  std::unique_ptr<GatingSource> src;
};

Scenario scenario(int requests, const std::string& routing = "generated")
{
  Scenario s;
  s.x   = load_experiment("configs/default.json", {{"workload.routing", routing},
                                                   {"workload.warmup_requests", "0"},
                                                   {"workload.measured_requests", std::to_string(requests)},
                                                   {"workload.calibration_requests", "100"}});
  s.w   = make_workload(s.x);
  s.src = make_gating_source(s.x, s.w);
  return s;
}

double expected_of(const ExpectedUnion& u, int layers)
{
  std::vector<double> d(static_cast<size_t>(layers));
  return u.distinct(d);
}

}  // namespace

TEST_CASE("expected union: two requests by hand, joining and leaving")
{
  // One layer of four experts. Request 1 picks them with p = (0.5, 0.25, 0, 1), request 2 with
  // (0.5, 0.5, 0.25, 0). E[D] = sum of 1 - (1 - p1)(1 - p2):
  //   0.75 + (1 - 0.75 * 0.5) + 0.25 + 1 = 2.625; request 1 alone: sum p1 = 1.75.
  std::vector<float> p1{0.5f, 0.25f, 0.f, 1.f}, p2{0.5f, 0.5f, 0.25f, 0.f};
  const TokenLaw a{p1.data(), p1.data(), 0.f}, b{p2.data(), p2.data(), 0.f};
  ExpectedUnion u(1, 4);
  CHECK(expected_of(u, 1) == 0.0);
  // (Single precision products: relative errors of a few 1e-7.)
  u.join(a);
  CHECK(expected_of(u, 1) == doctest::Approx(1.75).epsilon(1e-5));
  u.join(b);
  CHECK(expected_of(u, 1) == doctest::Approx(2.625).epsilon(1e-5));
  CHECK(u.miss(3) == 0.0);  // request 1 always picks expert 3: counted as certain, not multiplied
  CHECK(u.miss(2) == doctest::Approx(0.75).epsilon(1e-5));
  u.leave(a);
  CHECK(expected_of(u, 1) == doctest::Approx(1.25).epsilon(1e-5));  // sum p2
  u.leave(b);
  CHECK(expected_of(u, 1) == 0.0);  // the last leave rebuilds: exactly empty
  CHECK_THROWS(u.leave(b));         // nobody of that law left

  // A mixed law: share 0.25 of the secondary table. p = 0.75 * p1 + 0.25 * p2 = (0.5, 0.3125, 0.0625, 0.75).
  u.join({p1.data(), p2.data(), 0.25f});
  CHECK(expected_of(u, 1) == doctest::Approx(0.5 + 0.3125 + 0.0625 + 0.75).epsilon(1e-5));
}

TEST_CASE("expected union: a prompt's n tokens miss an expert with (1 - p)^n, shared positions count once")
{
  // Request 0: p = (0.5, 0.1, 0, 0.9); request 1: (0.2, 0.2, 0.2, 0.2). Three tokens of request 0:
  //   E[D] = (1 - 0.5^3) + (1 - 0.9^3) + 0 + (1 - 0.1^3) = 0.875 + 0.271 + 0.999 = 2.145.
  TableSource src(4, {{0.5f, 0.1f, 0.f, 0.9f}, {0.2f, 0.2f, 0.2f, 0.2f}});
  Request r0, r1;
  r0.id = 0, r0.prompt_tokens = 10;
  r1.id = 1, r1.prompt_tokens = 10;
  std::vector<double> d(1);
  std::vector<PromptTokens> three{{&r0, 2, 5}};
  CHECK(expected_prompt_distinct(src, three, d) == doctest::Approx(2.145).epsilon(1e-6));  // single precision power
  // Overlapping spans of one owner are one set of tokens: positions 2..6 are 5 tokens, not 3 + 3.
  std::vector<PromptTokens> overlap{{&r0, 2, 5}, {&r0, 3, 7}};
  const double five = (1 - std::pow(0.5, 5)) + (1 - std::pow(0.9, 5)) + (1 - std::pow(0.1, 5));
  CHECK(expected_prompt_distinct(src, overlap, d) == doctest::Approx(five).epsilon(1e-6));
  // Two owners multiply: one token each. (1 - 0.5 * 0.8) + (1 - 0.9 * 0.8) + (1 - 0.8) + (1 - 0.1 * 0.8).
  std::vector<PromptTokens> two{{&r0, 0, 1}, {&r1, 0, 1}};
  CHECK(expected_prompt_distinct(src, two, d) == doctest::Approx(0.6 + 0.28 + 0.2 + 0.92).epsilon(1e-7));
  // A long prompt saturates: every expert with p > 0 is certain, the one with p = 0 never appears.
  std::vector<PromptTokens> long_prompt{{&r0, 0, 1000}};
  CHECK(expected_prompt_distinct(src, long_prompt, d) == doctest::Approx(3.0).epsilon(1e-7));
}

TEST_CASE("expected union: incremental products equal a from-scratch computation after thousands of changes")
{
  // Laws of the default scenario's generated routing, joined and left at random (decode tokens), with
  // batches up to 400 so that near-certain experts and vanishing products are common.
  const Scenario s  = scenario(2000);
  const Workload& w = s.w;
  const auto& src   = s.src;
  REQUIRE(src->has_token_laws());
  const GatingShape& shape = src->shape();
  ExpectedUnion u(shape.layers, shape.experts);
  std::vector<const Request*> in;
  std::mt19937_64 rng(7);
  size_t next  = 0;
  long changes = 0;
  for (int round = 0; round < 6000; ++round) {
    const size_t target = round < 3000 ? 400 : 30;  // grow to 400, then shrink and churn around 30
    const bool join     = in.size() < target ? rng() % 4 != 0 : rng() % 4 == 0;
    if (join || in.empty()) {
      const Request* r = &w.requests[next++ % w.requests.size()];
      u.join(src->token_law(*r, 1));
      in.push_back(r);
    } else {
      const size_t i = size_t(rng() % in.size());
      u.leave(src->token_law(*in[i], 1));
      in.erase(in.begin() + long(i));
    }
    ++changes;
  }
  CHECK(changes > 4 * ExpectedUnion::kRebuildEvery);
  ExpectedUnion fresh(shape.layers, shape.experts);
  for (const Request* r : in)
    fresh.join(src->token_law(*r, 1));
  std::vector<double> a(size_t(shape.layers)), b(size_t(shape.layers));
  u.distinct(a);
  fresh.distinct(b);
  for (int l = 0; l < shape.layers; ++l)
    CHECK(a[size_t(l)] == doctest::Approx(b[size_t(l)]).epsilon(1e-6));
  // And the products against a direct product over the members in double precision, cell by cell.
  for (size_t c = 0; c < size_t(shape.layers * shape.experts); c += 97) {
    double m = 1;
    for (const Request* r : in)
      m *= 1.0 - double(src->token_law(*r, 1).probability(c));
    CHECK(std::abs(u.miss(c) - m) < 1e-6 + 1e-5 * m);
  }
}

TEST_CASE("expected union: the mean of sampled unions of the generated routing converges to it")
{
  // 32 decode sequences of the default scenario; sampled unions of 4000 steps (each sequence's
  // next output token) against the expectation of their laws. The per-step union's standard deviation
  // is a few experts over all layers, so the mean of 4000 is within ~0.1 of the expectation.
  const Scenario s         = scenario(200);
  const Workload& w        = s.w;
  const auto& src          = s.src;
  const GatingShape& shape = src->shape();
  ExpectedUnion u(shape.layers, shape.experts);
  for (int i = 0; i < 32; ++i)
    u.join(src->token_law(w.requests[size_t(i)], 1));
  std::vector<double> per_layer(size_t(shape.layers));
  const double expected = u.distinct(per_layer);

  std::vector<uint64_t> mask(size_t(shape.words()));
  std::vector<uint16_t> counts(size_t(shape.layers));
  std::vector<TokenRef> tokens;
  double sum = 0, sum2 = 0;
  const int steps = 4000;
  for (int t = 0; t < steps; ++t) {
    tokens.clear();
    for (int i = 0; i < 32; ++i)
      tokens.push_back({&w.requests[size_t(i)], w.requests[size_t(i)].prompt_tokens + 1 + t});
    std::fill(mask.begin(), mask.end(), 0);
    src->accumulate_tokens(tokens, mask);
    const double d = double(count_distinct(mask, shape, counts));
    sum += d;
    sum2 += d * d;
  }
  const double mean = sum / steps, sd = std::sqrt(sum2 / steps - mean * mean), se = sd / std::sqrt(double(steps));
  MESSAGE("expected ", expected / shape.layers, " per layer, sampled ", mean / shape.layers, " +- ", se / shape.layers);
  CHECK(std::abs(mean - expected) < 4 * se);
  CHECK(se < 0.002 * expected);  // the check above is tight: a 0.8% bias would fail it
}

TEST_CASE("expected union: sampled speculative windows of the generated routing converge to the window law")
{
  // 8 decode sequences, each step verifying 3 consecutive tokens (2 drafts) with persistence 0.278:
  // window_masks' draws against window_law's expectation; a draft keeps top_k experts on average
  // (the model keeps every token's picks at p), the hot cells making up where f > p.
  const Scenario s         = scenario(200);
  const Workload& w        = s.w;
  const auto& src          = s.src;
  const GatingShape& shape = src->shape();
  const int window = 2, batch = 8;
  const double rho = 0.278;
  ExpectedUnion u(shape.layers, shape.experts);
  std::vector<std::vector<uint32_t>> hot;
  for (int i = 0; i < batch; ++i) {
    u.join(window_law(src->token_law(w.requests[size_t(i)], 1), window, rho));
    hot.push_back(hot_cells(src->token_law(w.requests[size_t(i)], 1), size_t(shape.layers * shape.experts), rho));
  }
  std::vector<double> per_layer(size_t(shape.layers));
  const double expected = u.distinct(per_layer);

  std::vector<uint64_t> mask(size_t(shape.words())), masks;
  std::vector<uint16_t> counts(size_t(shape.layers));
  double sum = 0, sum2 = 0, one = 0;
  const int steps = 3000;
  for (int t = 0; t < steps; ++t) {
    std::fill(mask.begin(), mask.end(), 0);
    for (int i = 0; i < batch; ++i) {
      const Request& r = w.requests[size_t(i)];
      masks.clear();
      window_masks(*src, r, r.prompt_tokens + 1 + 3 * t, window, rho, 5, hot[size_t(i)], masks);
      for (int j = 0; j <= window; ++j)
        accumulate(mask, std::span(masks).subspan(size_t(j * shape.words()), size_t(shape.words())));
      if (i == 0)  // a draft token picks top_k experts on average (here the last of the window)
        one += double(count_distinct(std::span(masks).subspan(size_t(window * shape.words())), shape, counts));
    }
    const double d = double(count_distinct(mask, shape, counts));
    sum += d;
    sum2 += d * d;
  }
  const double mean = sum / steps, sd = std::sqrt(sum2 / steps - mean * mean), se = sd / std::sqrt(double(steps));
  MESSAGE("window of 3: expected ", expected / shape.layers, " per layer, sampled ", mean / shape.layers, " +- ",
          se / shape.layers, "; a draft's experts per layer ", one / steps / shape.layers);
  CHECK(std::abs(mean - expected) < 4 * se);
  CHECK(one / steps / shape.layers == doctest::Approx(shape.top_k).epsilon(0.03));
  // and more than one token's worth, less than three independent tokens' worth
  ExpectedUnion single(shape.layers, shape.experts), independent(shape.layers, shape.experts);
  for (int i = 0; i < batch; ++i)
    for (int j = 0; j <= window; ++j) {
      independent.join(src->token_law(w.requests[size_t(i)], 1));
      if (j == 0)
        single.join(src->token_law(w.requests[size_t(i)], 1));
    }
  CHECK(expected > single.distinct(per_layer));
  CHECK(expected < independent.distinct(per_layer));
}

TEST_CASE("expected union: uniform routing's law is its pool's record frequencies, near top_k / experts")
{
  const Scenario s         = scenario(50, "uniform");
  const TokenLaw law       = s.src->token_law(s.w.requests[0], 1);
  const GatingShape& shape = s.src->shape();
  for (int l = 0; l < shape.layers; l += 7) {
    double sum = 0;
    for (int e = 0; e < shape.experts; ++e)
      sum += law.probability(size_t(l * shape.experts + e));
    CHECK(sum == doctest::Approx(shape.top_k).epsilon(1e-6));  // every record picks top_k per layer
  }
  CHECK(law.probability(5) == doctest::Approx(double(shape.top_k) / shape.experts).epsilon(0.25));
}

TEST_CASE("workload.union: expected by default for generated routing, sampled for traces, errors otherwise")
{
  CHECK(load_experiment("configs/default.json", {}).workload.expert_union == UnionMode::expected);
  CHECK(load_experiment("configs/default.json", {{"workload.union", "sampled"}}).workload.expert_union ==
        UnionMode::sampled);
  CHECK_THROWS_AS(load_experiment("configs/default.json", {{"workload.union", "exact"}}), InputError);
}

TEST_CASE("expected union: the default kernels equal a plain computation, and the AVX-512 ones their bits")
{
  // Decode changes (joins, leaves, rebuilds) and prefill batches of one and of several owners, on the
  // default scenario's laws and on a layer of 45 experts (45 = 2 x 16 + 8 + 5: the 16-, 8- and 1-lane
  // loops all run). The default kernels (kernel 0: baseline or AVX2) are held against the definition
  // computed plainly in double on every CPU; where the CPU has AVX-512F (and ELDRSIM_TEST_PORTABLE is
  // unset, test_cpu.hpp) the AVX-512 kernels must give kernel 0's results bit for bit.
  const Scenario s = scenario(300);
  std::vector<std::vector<float>> tables;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 300; ++i) {
    std::vector<float> t(45);
    for (float& p : t)  // zeros, near-certain picks and everything between
      p = rng() % 5 == 0 ? 0.f : rng() % 7 == 0 ? 1.f - 0x1p-22f : float(rng() % 10000) / 10000.f;
    tables.push_back(t);
  }
  const TableSource odd(45, tables);
  // The same changes for every path: which requests are in the decode batch after each round.
  std::vector<std::vector<size_t>> batches;
  {
    std::mt19937_64 order(5);
    std::vector<size_t> in;
    for (int round = 0; round < 900; ++round) {
      if (in.size() < 60 && (in.empty() || order() % 3 != 0))
        in.push_back(size_t(round % 300));
      else
        in.erase(in.begin() + long(order() % in.size()));
      batches.push_back(in);
    }
  }
  auto run = [&](const GatingSource& src) {
    const GatingShape& shape = src.shape();
    std::vector<double> out, d(size_t(shape.layers));
    ExpectedUnion u(shape.layers, shape.experts);
    std::vector<size_t> in;
    for (const std::vector<size_t>& next : batches) {
      if (next.size() > in.size())
        u.join(src.token_law(s.w.requests[next.back()], 1));
      else
        for (size_t i = 0; i < in.size(); ++i)
          if (i == next.size() || in[i] != next[i]) {
            u.leave(src.token_law(s.w.requests[in[i]], 1));
            break;
          }
      in = next;
      u.distinct(d);
      out.insert(out.end(), d.begin(), d.end());
    }
    for (size_t n = 1; n <= 4; ++n) {  // prefill batches of n owners
      std::vector<PromptTokens> batch;
      for (size_t i = 0; i < n; ++i)
        batch.push_back({&s.w.requests[i * 7], 0, s.w.requests[i * 7].prompt_tokens});
      expected_prompt_distinct(src, batch, d);
      out.insert(out.end(), d.begin(), d.end());
    }
    return out;
  };
  // The definition, in double: sum over experts of 1 - prod (1 - p)^n (n = 1 for a decode token, the
  // prompt's length for a prompt without shared tokens: the table source's).
  auto plain = [&](const GatingSource& src, bool prefill) {
    const GatingShape& shape = src.shape();
    std::vector<double> out;
    auto add = [&](const std::vector<std::pair<size_t, int>>& members, int phase) {
      for (int l = 0; l < shape.layers; ++l) {
        double sum = 0;
        for (int e = 0; e < shape.experts; ++e) {
          double miss = 1;
          for (const auto& [r, n] : members)
            miss *= std::pow(1.0 - double(src.token_law(s.w.requests[r], phase)
                                              .probability(size_t(l) * size_t(shape.experts) + size_t(e))),
                             n);
          sum += 1 - miss;
        }
        out.push_back(sum);
      }
    };
    for (const std::vector<size_t>& in : batches) {
      std::vector<std::pair<size_t, int>> members;
      for (size_t r : in)
        members.emplace_back(r, 1);
      add(members, 1);
    }
    for (size_t n = 1; prefill && n <= 4; ++n) {
      std::vector<std::pair<size_t, int>> members;
      for (size_t i = 0; i < n; ++i)
        members.emplace_back(i * 7, s.w.requests[i * 7].prompt_tokens);
      add(members, 0);
    }
    return out;
  };
  const bool wide = test_cpu::vector_path_avx512f();
  if (!wide)
    MESSAGE(
        "AVX-512F not used (absent, or ELDRSIM_TEST_PORTABLE set): the default kernels against the plain sums only");
  for (const GatingSource* src :
       {static_cast<const GatingSource*>(s.src.get()), static_cast<const GatingSource*>(&odd)}) {
    REQUIRE(detail::use_expected_union_kernel(0));
    const std::vector<double> base = run(*src);
    // The generated source's prompts share template tokens (counted once): only its decode part has
    // the plain form; the table source's prompts share nothing.
    const std::vector<double> want = plain(*src, src == &odd);
    REQUIRE(base.size() >= want.size());
    size_t off = 0;
    for (size_t i = 0; i < want.size(); ++i)
      off += std::abs(base[i] - want[i]) > 1e-4 * (1 + want[i]);
    CHECK(off == 0);
    if (!wide)
      continue;
    REQUIRE(detail::use_expected_union_kernel(1));
    const std::vector<double> vec = run(*src);
    REQUIRE(base.size() == vec.size());
    size_t differ = 0;
    for (size_t i = 0; i < base.size(); ++i)
      differ += std::memcmp(&base[i], &vec[i], sizeof(double)) != 0;
    CHECK(differ == 0);
  }
  detail::use_expected_union_kernel(-1);
}

namespace {

// TableSource whose prompts' first `head` tokens are owned by request `owners[(r.id) % owners.size()]`
// (a chat template, a shared prefix): the owners' logs are what PromptLogCache keeps.
class SharedHeadSource : public TableSource {
 public:
  SharedHeadSource(int experts, std::vector<std::vector<float>> tables, std::vector<const Request*> owners, int head)
      : TableSource(experts, std::move(tables)), owners_(std::move(owners)), head_(head)
  {
  }
  void prompt_runs(const Request& r, int from, int to, std::vector<PromptRun>& out) const override
  {
    const Request* owner = owners_[r.id % owners_.size()];
    if (from < head_ && owner != &r)
      out.push_back({token_law(*owner, 0), owner, from, std::min(head_, to)});
    from = owner != &r ? std::max(from, head_) : from;
    if (from < to)
      out.push_back({token_law(r, 0), &r, from, to});
  }

 private:
  std::vector<const Request*> owners_;
  int head_;
};

std::vector<double> batch_distinct(const GatingSource& src, const std::vector<PromptTokens>& batch,
                                   PromptLogCache* cache)
{
  std::vector<double> d(size_t(src.shape().layers));
  d.push_back(expected_prompt_distinct(src, batch, d, cache));
  return d;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("prompt log cache: a shared owner's logs by hand, the same bits as computed in each batch")
{
  // Request 0 owns the first 2 tokens of every prompt (a template): p0 = (0.5, 0.25, 0, 1). Request 1,
  // p1 = (0.5, 0.5, 0.25, 0), prompts 0..5: its own 4 tokens 2..5. E[D] = sum 1 - (1 - p0)^2 (1 - p1)^4:
  //   (1 - 0.25 * 0.0625) + (1 - 0.5625 * 0.0625) + (1 - 0.31640625) + 1.
  std::vector<Request> reqs(2);
  for (uint32_t i = 0; i < 2; ++i)
    reqs[i].id = i, reqs[i].prompt_tokens = 6;
  const SharedHeadSource src(4, {{0.5f, 0.25f, 0.f, 1.f}, {0.5f, 0.5f, 0.25f, 0.f}}, {&reqs[0]}, 2);
  const std::vector<PromptTokens> batch{{&reqs[1], 0, 6}};
  const double want = (1 - 0.25 * 0.0625) + (1 - 0.5625 * 0.0625) + (1 - 0.31640625) + 1;
  PromptLogCache cache;
  const std::vector<double> plain = batch_distinct(src, batch, nullptr);
  CHECK(plain.back() == doctest::Approx(want).epsilon(1e-5));
  for (int round = 0; round < 3; ++round) {  // a miss, then hits
    CHECK(same_bits(batch_distinct(src, batch, &cache), plain));
    CHECK(cache.entries() == 1);
  }
  // The owner's logs: 2 log2(1 - p0), exactly -2 for p = 0.5, 0 for p = 0, -254 for p = 1 (2^-127).
  const std::span<const float> logs = cache.logs(src, src.token_law(reqs[0], 0), 2, 4);
  CHECK(logs[0] == -2.f);
  CHECK(logs[1] == doctest::Approx(2 * std::log2(0.75)).epsilon(1e-5));
  CHECK(logs[2] == 0.f);
  CHECK(logs[3] == -254.f);
}

TEST_CASE("prompt log cache: batches of shared and own owners give the bits computed without it")
{
  // Six requests own the shared heads (more than the cache keeps, so entries are replaced and looked
  // up again); prompts of 40 requests in batches of 1 to 5, whole or from a cached position, some with
  // only shared tokens, in an order that revisits owners. The generated source (its chat template
  // owner is in every batch) likewise. Every kernel.
  constexpr int kExperts = 45;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<std::vector<float>> tables(40, std::vector<float>(kExperts));
  for (auto& t : tables)
    for (float& p : t)
      p = unit(rng) < 0.1f ? (unit(rng) < 0.5f ? 0.f : 1.f) : unit(rng);
  std::vector<Request> reqs(40);
  for (uint32_t i = 0; i < reqs.size(); ++i)
    reqs[i].id = i, reqs[i].prompt_tokens = 20 + int(i);
  std::vector<const Request*> owners;
  for (size_t i = 0; i < 6; ++i)
    owners.push_back(&reqs[i]);
  const SharedHeadSource table_src(kExperts, tables, owners, 12);
  std::vector<std::vector<PromptTokens>> table_batches;
  for (int b = 0; b < 60; ++b) {
    std::vector<PromptTokens> batch;
    for (size_t n = 1 + rng() % 5; batch.size() < n;) {
      const Request& r = reqs[6 + rng() % 34];
      const int from   = rng() % 3 == 0 ? int(rng() % 16) : 0;
      const int to     = rng() % 7 == 0 ? std::min(from + 4, 12) : r.prompt_tokens;
      batch.push_back({&r, from, std::max(from, to)});
    }
    table_batches.push_back(batch);
  }
  const Scenario s = scenario(200);
  std::vector<std::vector<PromptTokens>> gen_batches;
  for (size_t b = 0; b < 30; ++b) {
    std::vector<PromptTokens> batch;
    for (size_t i = 0; i <= b % 4; ++i) {
      const Request& r = s.w.requests[(b * 5 + i * 3) % s.w.requests.size()];
      batch.push_back({&r, i == 2 ? 16 : 0, r.prompt_tokens});
    }
    gen_batches.push_back(batch);
  }
  const bool wide = test_cpu::vector_path_avx512f();
  for (int kernel = 0; kernel <= (wide ? 1 : 0); ++kernel) {
    REQUIRE(detail::use_expected_union_kernel(kernel));
    for (const auto& [src, batches] : {std::pair{static_cast<const GatingSource*>(&table_src), &table_batches},
                                       std::pair{static_cast<const GatingSource*>(s.src.get()), &gen_batches}}) {
      PromptLogCache cache;
      size_t differ = 0;
      for (const std::vector<PromptTokens>& batch : *batches) {
        differ += !same_bits(batch_distinct(*src, batch, &cache), batch_distinct(*src, batch, nullptr));
        CHECK(cache.entries() <= PromptLogCache::kEntries + batch.size());
      }
      CHECK(differ == 0);
      CHECK(cache.entries() > 0);
    }
  }
  detail::use_expected_union_kernel(-1);
}

TEST_CASE("expected union: changes() moves with every change that can move distinct()")
{
  // DecodeWorker reads distinct() again only when changes() has moved.
  std::vector<float> p(12, 0.25f), q(12, 0.5f);
  ExpectedUnion u(2, 6);
  std::vector<long> seen{u.changes()};
  auto moved = [&] {
    const bool fresh = std::find(seen.begin(), seen.end(), u.changes()) == seen.end();
    seen.push_back(u.changes());
    return fresh;
  };
  const TokenLaw a{p.data(), p.data(), 0.f}, b{q.data(), q.data(), 0.f};
  u.join(a);
  CHECK(moved());
  u.join(b);
  CHECK(moved());
  u.leave(a);
  CHECK(moved());
  u.rebuild();
  CHECK(moved());
  u.leave(b);  // the last member: a rebuild
  CHECK(moved());
  u.join(a);
  u.clear();
  CHECK(moved());
  std::vector<double> d(2);
  CHECK(u.distinct(d) == 0);
}
