// Prompt sharing for prefix caching: the generator's prompt pool and system prompts
// (workload_generator.hpp), shared-prefix routing (shared_prefix_gating.hpp), ELDR's signature
// cache (cached_profile.hpp) and the cost of a prefill with a cached prefix (cost_model.hpp).
#include "sim/cache/cached_profile.hpp"
#include "sim/cache/prefix_blocks.hpp"
#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/shared_prefix_gating.hpp"
#include "sim/workload/workload_factory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

using namespace eldr;

namespace {

struct Shared {
  Experiment x;
  Workload w;
  std::unique_ptr<GatingSource> routing;
  // The system-prompt and pool cases run without the model's chat template (its own cases below).
  explicit Shared(std::vector<Override> o, bool chat_template = false)
  {
    o.push_back({"workload.chat_template", chat_template ? "true" : "false"});
    o.push_back({"workload.measured_requests", "400"});
    o.push_back({"workload.warmup_requests", "0"});
    o.push_back({"workload.calibration_requests", "50"});
    x       = load_experiment("configs/default.json", o);
    w       = make_workload(x);
    routing = make_gating_source(x, w);
  }
};

bool same_masks(const GatingSource& sa, const Request& a, int ta, const GatingSource& sb, const Request& b, int tb)
{
  auto ma = sa.token_experts(a, ta);
  std::vector<uint64_t> copy(ma.begin(), ma.end());
  auto mb = sb.token_experts(b, tb);
  return std::equal(copy.begin(), copy.end(), mb.begin(), mb.end());
}

}  // namespace

TEST_CASE("prompt pool: every prompt once in a shuffled order, then repeats, repeats are identical")
{
  Shared s(std::vector<Override>{{"workload.distinct_prompts", "100"}});
  REQUIRE(s.w.requests.size() == 400);
  CHECK(s.w.prefix_block_tokens == 16);
  std::set<uint64_t> first;
  for (size_t i = 0; i < 100; ++i)
    first.insert(s.w.requests[i].prefix_hash);
  CHECK(first.size() == 100);  // the first 100 requests are the 100 prompts, each once
  std::map<uint64_t, const Request*> seen;
  long repeats = 0;
  for (const Request& r : s.w.requests) {
    CHECK(first.count(r.prefix_hash) == 1);  // no prompt outside the pool
    auto [it, fresh] = seen.emplace(r.prefix_hash, &r);
    if (fresh)
      continue;
    ++repeats;
    const Request& o = *it->second;
    CHECK(r.label == o.label);
    CHECK(r.prompt_tokens == o.prompt_tokens);
    CHECK(r.routing_seed == o.routing_seed);
    auto hr = s.w.hashes(r), ho = s.w.hashes(o);
    CHECK(std::equal(hr.begin(), hr.end(), ho.begin(), ho.end()));
  }
  CHECK(repeats == 300);
  // The hashes are those of 16-token blocks, one per started block.
  for (const Request& r : s.w.requests)
    CHECK(r.hash_count == uint32_t((r.prompt_tokens + 15) / 16));
}

TEST_CASE("system prompts: a shared prefix of whole blocks, then the request's own prompt")
{
  Shared s(std::vector<Override>{{"workload.system_prompts", "3"}, {"workload.system_prompt_tokens", "40"}});
  // Without a pool every prompt is new: requests share at most the 2 full blocks of their system prompt.
  std::map<uint64_t, int> first_hashes;
  for (const Request& r : s.w.requests) {
    REQUIRE(r.prompt_tokens >= 40 + 4);
    auto h = s.w.hashes(r);
    REQUIRE(h.size() >= 3);
    ++first_hashes[h[0]];
    CHECK(r.prefix_hash == h[0]);  // prefill affinity follows the shared prefix
  }
  CHECK(first_hashes.size() == 3);
  std::map<uint64_t, int> third;
  for (const Request& r : s.w.requests)
    ++third[s.w.hashes(r)[2]];  // tokens 32..47 straddle the system prompt's end: never shared
  CHECK(third.size() == s.w.requests.size());
}

TEST_CASE("shared-prefix routing: shared prompt blocks route as their first holder's, the rest is the request's")
{
  Shared s(std::vector<Override>{{"workload.system_prompts", "2"}, {"workload.system_prompt_tokens", "48"}});
  const auto* shared = dynamic_cast<const SharedPrefixGating*>(s.routing.get());
  REQUIRE(shared != nullptr);
  const GatingSource& inner = shared->inner();
  // Find two served requests with the same system prompt.
  const Request *a = nullptr, *b = nullptr;
  for (size_t i = 0; i < s.w.requests.size() && !b; ++i)
    for (size_t j = i + 1; j < s.w.requests.size() && !b; ++j)
      if (s.w.hashes(s.w.requests[i])[0] == s.w.hashes(s.w.requests[j])[0])
        a = &s.w.requests[i], b = &s.w.requests[j];
  REQUIRE(b != nullptr);
  const Request& owner = shared->owner(*b, 0);
  CHECK(&shared->owner(*a, 0) == &owner);  // one owner for the shared blocks
  for (int t = 0; t < 48; ++t) {
    CHECK(same_masks(*s.routing, *a, t, *s.routing, *b, t));
    CHECK(same_masks(*s.routing, *b, t, inner, owner, t));
  }
  // Own prompt tokens and output tokens are the inner source's for the request itself.
  for (int t : {48, b->prompt_tokens - 1, b->prompt_tokens, b->prompt_tokens + 100}) {
    CHECK(&shared->owner(*b, t) == b);
    CHECK(same_masks(*s.routing, *b, t, inner, *b, t));
  }
  // The batch union goes through the same mapping.
  std::vector<TokenRef> tokens{{b, 3}, {a, 50}, {b, b->prompt_tokens + 2}};
  std::vector<uint64_t> u1(size_t(s.routing->shape().words()), 0), u2 = u1;
  s.routing->accumulate_tokens(tokens, u1);
  for (const TokenRef& t : tokens)
    accumulate(u2, s.routing->token_experts(*t.request, t.position));
  CHECK(u1 == u2);
  CHECK(shared->shared_tokens() > 0);
  // A workload without shared prefixes is not wrapped.
  Shared plain(std::vector<Override>{});
  CHECK(dynamic_cast<const SharedPrefixGating*>(plain.routing.get()) == nullptr);
}

TEST_CASE("chat template: every prompt holds the model's template, whose tokens route alike and as no label's")
{
  // Qwen3-30B-A3B's template: 3 tokens before the message, 5 after (models/qwen3-30b-a3b.json).
  Shared t({}, true), bare({});
  CHECK(t.x.workload.template_prefix_tokens == 3);
  CHECK(t.x.workload.template_suffix_tokens == 5);
  CHECK(bare.x.workload.template_prefix_tokens == 0);
  REQUIRE(t.w.requests.size() == bare.w.requests.size());
  for (size_t i = 0; i < t.w.requests.size(); ++i) {  // the same draws, 8 tokens longer
    CHECK(t.w.requests[i].prompt_tokens == bare.w.requests[i].prompt_tokens + 8);
    CHECK(t.w.requests[i].prefix_hash == bare.w.requests[i].prefix_hash);  // prefill affinity unchanged
  }
  const auto* shared = dynamic_cast<const SharedPrefixGating*>(t.routing.get());
  REQUIRE(shared != nullptr);
  REQUIRE(t.w.template_owner() != nullptr);
  const Request& owner = *t.w.template_owner();
  CHECK(owner.label == kTemplateLabel);
  CHECK(owner.prompt_tokens == 8);
  const Request &a = t.w.requests[0], &b = t.w.requests[1];
  for (int k = 0; k < 8; ++k) {
    CHECK(&shared->owner(a, k) == &owner);
    CHECK(same_masks(*t.routing, a, k, *t.routing, b, k));
    CHECK(same_masks(*t.routing, a, k, shared->inner(), owner, k));
  }
  CHECK(&shared->owner(a, 8) == &a);
  CHECK(same_masks(*t.routing, a, 8, shared->inner(), a, 8));
  // Every request, calibration ones included, routes its 8 template tokens as the template's.
  CHECK(shared->shared_tokens() == 8 * long(t.w.requests.size() + t.w.calibration.size()));

  // The template's law is no label's: its expert frequencies are about as close to every label's
  // mean prompt law (cosine over layer x expert cells), where a request's own law is closest to its
  // label's. (Routed as a calibration request's, as before, it was as close to that request's label
  // as the request itself.)
  const GatingSource& inner = shared->inner();
  const size_t cells        = size_t(inner.shape().layers) * size_t(inner.shape().experts);
  const size_t L            = t.w.labels.size();
  std::vector<std::vector<double>> label_law(L, std::vector<double>(cells, 0));
  for (const Request& r : t.w.calibration) {
    const TokenLaw law = inner.token_law(r, 0);
    for (size_t c = 0; c < cells; ++c)
      label_law[r.label][c] += law.probability(c);
  }
  auto cosine = [&](const TokenLaw& law, const std::vector<double>& v) {
    double dot = 0, aa = 0, bb = 0;
    for (size_t c = 0; c < cells; ++c) {
      dot += law.probability(c) * v[c];
      aa += double(law.probability(c)) * law.probability(c);
      bb += v[c] * v[c];
    }
    return dot / std::sqrt(aa * bb);
  };
  std::vector<double> tmpl, own;
  for (size_t l = 0; l < L; ++l) {
    tmpl.push_back(cosine(inner.token_law(owner, 0), label_law[l]));
    own.push_back(cosine(inner.token_law(t.w.calibration.front(), 0), label_law[l]));
  }
  const auto [lo, hi] = std::minmax_element(tmpl.begin(), tmpl.end());
  INFO("template vs labels: " << *lo << " - " << *hi);
  CHECK(*hi / *lo < 1.1);
  const size_t mine = t.w.calibration.front().label;
  for (size_t l = 0; l < L; ++l)
    if (l != mine)
      CHECK(own[mine] > 1.2 * own[l]);

  // GPT-OSS-120B's harmony template opens with a 64-token system message: with a prompt pool the
  // shared 4 blocks are hashed as shared, and the prefill affinity is the first block past them.
  Shared g({{"model", "gpt-oss-120b"}, {"workload.distinct_prompts", "50"}}, true);
  CHECK(g.x.workload.template_prefix_tokens == 64);
  std::set<uint64_t> first, affinity;
  for (const Request& r : g.w.requests) {
    REQUIRE(r.hash_count >= 5);
    first.insert(g.w.hashes(r)[0]);
    affinity.insert(r.prefix_hash);
    CHECK(r.prefix_hash == g.w.hashes(r)[4]);
  }
  CHECK(first.size() == 1);      // the template's blocks: one prefix for all
  CHECK(affinity.size() == 50);  // the proxy hashes what the client sent: one key per prompt
}

TEST_CASE("signature cache: a warm prompt's profile equals its cold one, without it only the tail counts")
{
  Shared s({{"workload.distinct_prompts", "40"},
            {"workload.system_prompts", "2"},
            {"workload.system_prompt_tokens", "64"},
            {"workload.routing", "generated"}});
  const GatingSource& src = *s.routing;
  auto gates              = make_gate_source(src);
  REQUIRE(gates != nullptr);
  const int B = s.x.model.kv_block_tokens;
  const ProfileFields all{true, true};
  // Fill a cache with every request's blocks in order, as one prefill worker would; each later
  // request's profile from its cached blocks' origins plus its tail must equal its cold profile.
  BlockCache cache(1 << 20);
  long warm = 0, partial = 0;
  std::vector<uint64_t> keys;
  for (const Request& r : s.w.requests) {
    prompt_block_keys(s.w, r, B, keys);
    const long usable = usable_prefix_blocks(cache.match(keys), r.prompt_tokens, B);
    std::vector<BlockOrigin> cached;
    for (long i = 0; i < usable; ++i)
      cached.push_back(cache.origin(keys[size_t(i)]));
    std::vector<BlockOrigin> origins;
    for (size_t i = 0; i < keys.size(); ++i)
      origins.push_back({&r, int(i) * B});
    cache.acquire(keys, 0, origins);
    if (cached.empty())
      continue;
    ++warm;
    partial += cached.size() < keys.size();
    const PromptProfile cold = count_prompt(src, r, all, gates.get());
    const PromptProfile got  = cached_prompt_profile(src, r, cached, B, true, all, gates.get());
    CHECK(got.counts == cold.counts);
    // Gate sums: the same terms added in another order (block by block), so equal to rounding.
    long off_gate = 0;
    for (size_t i = 0; i < cold.counts.size(); ++i)
      off_gate += std::abs(got.gate_prob[i] - cold.gate_prob[i]) > 1e-5f * (1 + cold.gate_prob[i]) ||
                  std::abs(got.gate_score[i] - cold.gate_score[i]) > 1e-4f * (1 + std::abs(cold.gate_score[i]));
    CHECK(off_gate == 0);
    // Off: the cached blocks add nothing; the computed tail is the request's own tokens.
    const PromptProfile off = cached_prompt_profile(src, r, cached, B, false);
    PromptProfile tail      = empty_profile(src.shape());
    add_tokens(src, r, int(cached.size()) * B, r.prompt_tokens, tail);
    CHECK(off.counts == tail.counts);
    CHECK(off.counts != cold.counts);
  }
  CHECK(warm > 300);   // most requests repeat a prompt, or at least share a system prompt
  CHECK(partial > 0);  // ... and some (first uses of a pooled prompt) hit the system prompt only
}

TEST_CASE("prefill cost with a cached prefix: the computed tail only, attending to the prefix")
{
  const Experiment x = load_experiment("configs/default.json");
  const CostModel c(x.model, x.hardware, x.calibration);
  std::vector<uint16_t> distinct(size_t(x.model.layers), 32);
  const double cold = c.prefill_s(std::vector<PrefillPrompt>{{800, 0}}, distinct);
  CHECK(cold == doctest::Approx(c.prefill_s(std::vector<int>{800}, distinct)).epsilon(1e-15));
  const double warm = c.prefill_s(std::vector<PrefillPrompt>{{800, 768}}, distinct);
  const double tiny = c.prefill_s(std::vector<PrefillPrompt>{{32, 0}}, distinct);
  CHECK(warm < cold);
  CHECK(warm > tiny);  // the 32 computed tokens attend to 800 positions, and read the cached KV
  // Fully cached (the engine still computes the last token): the per-batch and per-layer fixed costs.
  // (32 tokens or 1 cost alike: so few tokens leave every layer bound by its weight reads.)
  const double none = c.prefill_s(std::vector<PrefillPrompt>{{800, 799}}, distinct);
  CHECK(none <= warm);
  CHECK(none > 0);
  // Attention pairs of the computed tail, by hand: positions 768..799 see 769..800 keys.
  CHECK(CostModel::causal_pairs(800, 0) - CostModel::causal_pairs(768, 0) == doctest::Approx(32.0 * (769 + 800) / 2));
}
