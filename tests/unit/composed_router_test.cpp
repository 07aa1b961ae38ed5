// The composed router (sim/routing/compose/): each filter, scorer and picker on hand-made loads, the
// run-time fallback of a filter that empties the set, and the section's reader. The built-in routers'
// behaviour as compositions is router_registry_test.cpp's; their byte-identity in whole runs, tests/cli/composed.sh.
#include "sim/common/input_error.hpp"
#include "sim/routing/compose/composed_router.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "tests/support/router_workload.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace eldr;

namespace {

Composition composition(const std::string& json)
{
  return read_composition(Json::parse(json), "test.json");
}

std::unique_ptr<DecodeRouter> composed(const std::string& json, uint64_t seed = 1)
{
  return make_composed_router(composition(json), RouterSetup{4, seed, &test::two_label_workload()});
}

std::string error_of(const std::string& json)
{
  try {
    composition(json);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

double stat(const DecodeRouter& r, const std::string& name)
{
  for (const auto& [k, v] : r.stats())
    if (k == name)
      return v;
  return -1;
}

}  // namespace

TEST_CASE("composed: the section's defaults are a max-score picker over no scores, named composed")
{
  const Composition c = composition("{}");
  CHECK(c.name == "composed");
  CHECK(c.filters.empty());
  CHECK(c.scorers.empty());
  CHECK(c.picker.type() == "max-score-picker");
  CHECK(c.picker.params["tie_break"] == "random");
}

TEST_CASE("composed: plugins run in the declarations' order whatever the JSON's")
{
  const Composition c = composition(R"({"scorers": {"label-match-scorer": {"weight": 2}, "queue-scorer": {}},
                                       "filters": {"locality-band-filter": {}, "label-pool-filter": {}}})");
  REQUIRE(c.filters.size() == 2);
  CHECK(c.filters[0].type() == "label-pool-filter");
  CHECK(c.filters[1].type() == "locality-band-filter");
  REQUIRE(c.scorers.size() == 2);
  CHECK(c.scorers[0].type() == "queue-scorer");
  CHECK(c.scorers[0].weight == 1);
  CHECK(c.scorers[1].type() == "label-match-scorer");
  CHECK(c.scorers[1].weight == 2);
}

TEST_CASE("composed: a scorer of weight 0 is not run")
{
  const Composition c = composition(R"({"scorers": {"queue-scorer": {"weight": 0}, "label-match-scorer": {}}})");
  REQUIRE(c.scorers.size() == 1);
  CHECK(c.scorers[0].type() == "label-match-scorer");
}

TEST_CASE("composed: bad sections are one-line input errors")
{
  CHECK(error_of(R"({"scorers": {"queue-scorrer": {}}})") ==
        "test.json: composed.scorers.queue-scorrer: unknown key (did you mean 'queue-scorer'?); keys here: "
        "queue-scorer, kv-cache-utilization-scorer, prefix-cache-scorer, expert-locality-scorer, label-match-scorer, "
        "precise-prefix-cache-scorer, active-request-scorer, kv-headroom-scorer");
  CHECK(error_of(R"({"scorers": {"queue-scorer": {"weight": -1}}})") ==
        "test.json: composed.scorers.queue-scorer.weight: must be between 0 and 1e+06, got -1");
  CHECK(error_of(R"({"picker": {"p2c-picker": {}, "random-picker": {}}})") ==
        "test.json: composed.picker.random-picker: a second picker (give exactly one; the first is 'p2c-picker')");
  CHECK(error_of(R"({"picker": {"best-picker": {}}})")
            .starts_with("test.json: composed.picker.best-picker: unknown key"));
  CHECK(error_of(R"({"filters": {"load-threshold-filter": {"max_in_flight": 2.5}}})") ==
        "test.json: composed.filters.load-threshold-filter.max_in_flight: must be an integer, got 2.5");
  CHECK(error_of(R"({"name": ""})") == "test.json: composed.name: must not be empty (it names the policy and its "
                                       "random stream)");
  CHECK(error_of(R"({"picker": {"max-score-picker": {"tie_break": "first"}}})")
            .starts_with("test.json: composed.picker.max-score-picker.tie_break: unknown value 'first'"));
}

TEST_CASE("composed: queue scores are (max - n) / (max - min) over the candidates")
{
  // Loads 2, 6, 4, 2: scores 1, 0, .5, 1; with the label-match scorer (two labels over 4 workers:
  // label 0's pool is workers 0-1, label 1's 2-3) at weight .6, label 1 totals 1, 0, 1.1, 1.6: worker 3.
  auto r = composed(
      R"({"scorers": {"queue-scorer": {}, "label-match-scorer": {"weight": 0.6}},
          "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})");
  std::vector<int> load = {2, 6, 4, 2};
  Request q;
  q.label = 1;
  CHECK(r->choose(q, DecodeLoadView{load}) == 3);
  // Label 0: 1.6, .6, .5, 1: worker 0.
  q.label = 0;
  CHECK(r->choose(q, DecodeLoadView{load}) == 0);
  // Worker 3 loaded to 5 (max 6, min 2): label 1 totals 1, 0, 1.1, .85 -> worker 2.
  load[3] = 5;
  q.label = 1;
  CHECK(r->choose(q, DecodeLoadView{load}) == 2);
}

TEST_CASE("composed: the load threshold filters, and falls back (counted) when it would leave no one")
{
  auto r =
      composed(R"({"filters": {"load-threshold-filter": {"max_in_flight": 3}}, "picker": {"round-robin-picker": {}}})");
  Request q;
  std::vector<int> load = {5, 3, 9, 0};
  // Round robin over workers 1 and 3 only (0 and 2 hold more than 3).
  CHECK(r->choose(q, DecodeLoadView{load}) == 1);
  CHECK(r->choose(q, DecodeLoadView{load}) == 3);
  CHECK(r->choose(q, DecodeLoadView{load}) == 1);
  CHECK(stat(*r, "filter_fallbacks") == 0);
  // Everyone above 3: the filter is skipped, all four take turns (next after 1 is 2).
  load = {4, 4, 4, 4};
  CHECK(r->choose(q, DecodeLoadView{load}) == 2);
  CHECK(r->choose(q, DecodeLoadView{load}) == 3);
  CHECK(r->choose(q, DecodeLoadView{load}) == 0);
  CHECK(stat(*r, "filter_fallbacks") == 3);
  // Compositions whose filters cannot empty the set report nothing.
  CHECK(composed(R"({"filters": {"label-pool-filter": {}}})")->stats().empty());
}

TEST_CASE("composed: the label-pool filter keeps the label's pool, any worker without one")
{
  auto r = composed(R"({"filters": {"label-pool-filter": {}}, "picker": {"random-picker": {}}})");
  std::vector<int> load(4, 0);
  Request q;
  q.label = 1;
  for (int i = 0; i < 100; ++i) {
    const int w = r->choose(q, DecodeLoadView{load});
    CHECK((w == 2 || w == 3));
  }
  q.label = 9;  // no pool
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 200; ++i)
    ++seen[size_t(r->choose(q, DecodeLoadView{load}))];
  for (int n : seen)
    CHECK(n > 0);
  q.label = 0;
  CHECK(r->home_workers(q, {}) == std::vector<int>{0, 1});
}

TEST_CASE("composed: KV-cache utilisation scores free memory, cached blocks nobody holds count as free")
{
  // Capacities of 10 blocks: worker 0 holds 6 private blocks (score .4), worker 1 holds 2 (.8), worker
  // 2 had 9 released to the cache (evictable: score 1), worker 3 holds 5 (.5).
  std::vector<BlockCache> caches(4, BlockCache(10));
  caches[0].acquire({}, 6);
  caches[1].acquire({}, 2);
  std::vector<uint64_t> keys = {11, 12, 13, 14, 15, 16, 17, 18, 19};
  caches[2].acquire(keys, 0);
  caches[2].release(keys, 0);
  caches[3].acquire({}, 5);
  auto r                = composed(R"({"scorers": {"kv-cache-utilization-scorer": {}}})");
  std::vector<int> load = {0, 0, 0, 0};
  Request q;
  CHECK(r->choose(q, DecodeLoadView{load, 0, caches}) == 2);
  // With queue weight 1 as well and worker 2 the busiest (loads 0, 1, 4, 2: queue 1, .75, 0, .5):
  // totals 1.4, 1.55, 1, 1 -> worker 1.
  auto both = composed(R"({"scorers": {"queue-scorer": {}, "kv-cache-utilization-scorer": {}}})");
  load      = {0, 1, 4, 2};
  CHECK(both->choose(q, DecodeLoadView{load, 0, caches}) == 1);
}

TEST_CASE("composed: the prefix-cache scorer is the fraction of the prompt's blocks a worker holds")
{
  std::vector<BlockCache> caches(4, BlockCache(100));
  const std::vector<uint64_t> prompt = {1, 2, 3, 4};
  caches[1].acquire(std::span(prompt).first(1), 0);  // 1 of 4
  caches[3].acquire(std::span(prompt).first(3), 0);  // 3 of 4
  auto r = composed(R"({"scorers": {"prefix-cache-scorer": {}, "queue-scorer": {"weight": 0.4}}})");
  // Loads 0, 0, 0, 3: queue 1, 1, 1, 0; prefix 0, .25, 0, .75: totals .4, .65, .4, .75 -> worker 3.
  std::vector<int> load = {0, 0, 0, 3};
  Request q;
  CHECK(r->choose(q, DecodeLoadView{load, 0, caches, prompt}) == 3);
  // Worker 3 at 5 in flight (queue 1, 1, 1, 0 still): the same; at weight .6 the queue wins: .6, .85, .6, .75.
  auto q6 = composed(R"({"scorers": {"prefix-cache-scorer": {}, "queue-scorer": {"weight": 0.6}}})");
  CHECK(q6->choose(q, DecodeLoadView{load, 0, caches, prompt}) == 1);
  // No prompt blocks (prefix caching off): every score 0.
  CHECK(r->choose(q, DecodeLoadView{load, 0, caches}) != 3);
}

TEST_CASE("composed: the precise prefix-cache scorer normalises the hits over the workers that have one")
{
  // llm-d's precise-prefix-cache-scorer: hits 0, 1, 2, 3 blocks -> 0, 0, .5, 1 ((n - 1) / (3 - 1), no hit 0).
  std::vector<BlockCache> caches(4, BlockCache(100));
  const std::vector<uint64_t> prompt = {1, 2, 3, 4};
  caches[1].acquire(std::span(prompt).first(1), 0);
  caches[2].acquire(std::span(prompt).first(2), 0);
  caches[3].acquire(std::span(prompt).first(3), 0);
  // With the queue scorer at .9 (loads 0, 0, 0, 4: 1, 1, 1, 0): totals .9, .9, 1.4, 1 -> worker 2.
  auto r = composed(R"({"scorers": {"precise-prefix-cache-scorer": {}, "queue-scorer": {"weight": 0.9}}})");
  std::vector<int> load = {0, 0, 0, 4};
  Request q;
  CHECK(r->choose(q, DecodeLoadView{load, 0, caches, prompt}) == 2);
  // One worker with a hit scores 1 whatever its count: worker 1 alone, one block of four.
  std::vector<BlockCache> one(4, BlockCache(100));
  one[1].acquire(std::span(prompt).first(1), 0);
  auto alone = composed(R"({"scorers": {"precise-prefix-cache-scorer": {}, "queue-scorer": {"weight": 0.9}}})");
  load       = {0, 1, 0, 0};  // queue 1, 0, 1, 1: totals .9, 1, .9, .9
  CHECK(alone->choose(q, DecodeLoadView{load, 0, one, prompt}) == 1);
  auto fraction = composed(R"({"scorers": {"prefix-cache-scorer": {}, "queue-scorer": {"weight": 0.9}}})");
  CHECK(fraction->choose(q, DecodeLoadView{load, 0, one, prompt}) != 1);  // .25 + 0 against .9
}

TEST_CASE("composed: the active-request scorer, its idle threshold and its busiest-worker scale")
{
  // Loads 0, 2, 4, 8 (max 8): 1, .75, .5, 0; idle_threshold 2 makes worker 1 score 1 as well.
  std::vector<int> load = {3, 2, 4, 8};
  Request q;
  auto plain = composed(R"({"scorers": {"active-request-scorer": {}, "label-match-scorer": {"weight": 0.3}}})");
  // Label 1 (pool: workers 2-3): (8-3)/8 = .625, .75, .5 + .3, 0 + .3 -> worker 2 (.8).
  q.label = 1;
  CHECK(plain->choose(q, DecodeLoadView{load}) == 2);
  // idle_threshold 3: workers 0 and 1 score 1, worker 2 .5 + .3: worker 0 or 1.
  auto idle = composed(
      R"({"scorers": {"active-request-scorer": {"idle_threshold": 3}, "label-match-scorer": {"weight": 0.3}},
          "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})");
  CHECK(idle->choose(q, DecodeLoadView{load}) == 0);
  // max_busy_score .5 with idle_threshold 2: worker 1 is idle (1), the others .3125, .25 + .3, 0 + .3.
  auto busy = composed(
      R"({"scorers": {"active-request-scorer": {"idle_threshold": 2, "max_busy_score": 0.5},
                      "label-match-scorer": {"weight": 0.3}}})");
  CHECK(busy->choose(q, DecodeLoadView{load}) == 1);
  CHECK(error_of(R"({"scorers": {"active-request-scorer": {"max_busy_score": 1.5}}})") ==
        "test.json: composed.scorers.active-request-scorer.max_busy_score: must be between 0 and 1, got 1.5");
}

TEST_CASE("composed: random-picker's top_k draws only among the k best totals")
{
  auto r                = composed(R"({"scorers": {"queue-scorer": {}}, "picker": {"random-picker": {"top_k": 2}}})");
  std::vector<int> load = {3, 0, 7, 1};
  std::vector<int> seen(4, 0);
  Request q;
  for (int i = 0; i < 400; ++i)
    ++seen[size_t(r->choose(q, DecodeLoadView{load}))];
  CHECK(seen[0] == 0);
  CHECK(seen[2] == 0);
  CHECK(seen[1] > 150);
  CHECK(seen[3] > 150);
}

TEST_CASE("composed: a composition named after a built-in router draws its numbers")
{
  const RouterEntry* jsq = find_decode_router("jsq");
  REQUIRE(jsq);
  auto built_in = make_decode_router("jsq", RouterSetup{8, 3, &test::two_label_workload()});
  auto mine     = make_composed_router(composition(R"({"name": "jsq", "scorers": {"queue-scorer": {}}})"),
                                       RouterSetup{8, 3, &test::two_label_workload()});
  auto other    = make_composed_router(composition(R"({"scorers": {"queue-scorer": {}}})"),
                                       RouterSetup{8, 3, &test::two_label_workload()});
  std::vector<int> load(8, 2);
  Request q;
  std::vector<int> a, b, c;
  for (int i = 0; i < 200; ++i) {
    a.push_back(built_in->choose(q, DecodeLoadView{load}));
    b.push_back(mine->choose(q, DecodeLoadView{load}));
    c.push_back(other->choose(q, DecodeLoadView{load}));
  }
  CHECK(a == b);
  CHECK(a != c);  // another stream
}

TEST_CASE("composed: the prefill router is a composition only when its section gives a plugin")
{
  CHECK(!read_prefill_composition(Json::object(), "test.json"));
  CHECK(!read_prefill_composition(Json::parse(R"({"name": "ring"})"), "test.json"));
  const auto c = read_prefill_composition(Json::parse(R"({"scorers": {"queue-scorer": {}}})"), "test.json");
  REQUIRE(c);
  CHECK(c->name == "prefill");
  REQUIRE(c->scorers.size() == 1);
  CHECK(c->scorers[0].type() == "queue-scorer");
}

TEST_CASE("plugin table: unique type names, one factory each, parameters relative to the plugin's section")
{
  std::vector<std::string_view> types;
  for (const PluginEntry* e : plugin_table()) {
    CHECK(std::count(types.begin(), types.end(), e->type) == 0);
    types.push_back(e->type);
    CHECK(int(e->filter != nullptr) + int(e->scorer != nullptr) + int(e->picker != nullptr) == 1);
    CHECK(e->help.size() > 10);
    for (const ConfigKey& k : e->keys)
      CHECK(k.path.find('.') == std::string_view::npos);
    CHECK(find_plugin(plugin_table(), e->type) == e);
  }
  // The first picker is a section's when it names none.
  const auto first_picker = std::find_if(plugin_table().begin(), plugin_table().end(),
                                         [](const PluginEntry* e) { return e->picker != nullptr; });
  REQUIRE(first_picker != plugin_table().end());
  CHECK((*first_picker)->type == "max-score-picker");
  // Kinds in the pipeline's order: every filter before every scorer, every scorer before every picker.
  std::string kinds;
  for (const PluginEntry* e : plugin_table())
    if (kinds.empty() || kinds.back() != plugin_kind(*e)[0])
      kinds += plugin_kind(*e)[0];
  CHECK(kinds == "fsp");
}

namespace {

struct Counted : RouterPart {
  static inline int built = 0;
  static std::unique_ptr<Counted> make(const RouterSetup&)
  {
    ++built;
    return std::make_unique<Counted>();
  }
};

}  // namespace

TEST_CASE("plugin context: one shared state of each type per router, built for the first plugin asking")
{
  const RouterSetup setup{4, 1, nullptr};
  PluginContext ctx(setup);
  Counted::built = 0;
  Counted& a     = ctx.shared(&Counted::make);
  Counted& b     = ctx.shared(&Counted::make);
  CHECK(&a == &b);
  CHECK(Counted::built == 1);
  auto states = ctx.take_shared();
  REQUIRE(states.size() == 1);
  CHECK(states[0].get() == &a);
  PluginContext other(setup);  // another router: its own
  CHECK(&other.shared(&Counted::make) != &a);
  CHECK(Counted::built == 2);
}

TEST_CASE("composed: the label filter and scorer together share one set of pools, the label pool its home")
{
  // The pool filter and the match scorer together: label 1's pool is workers 2-3 (two labels over 4).
  auto r = composed(R"({"filters": {"label-pool-filter": {}}, "scorers": {"label-match-scorer": {}},
                        "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})");
  Request q;
  q.label               = 1;
  std::vector<int> load = {0, 0, 0, 0};
  CHECK(r->choose(q, DecodeLoadView{load}) == 2);
  CHECK(r->home_workers(q, {}) == std::vector<int>{2, 3});
  CHECK(r->stats().empty());  // neither filter can empty the set
}

namespace {

// A scorer outside the table answering every hook from its parameters, to see how the router combines them.
struct HookScorer : Scorer {
  explicit HookScorer(const Json& p) : p_(p) {}
  void score(const Decision& d, std::span<double> scores) override
  {
    for (size_t i = 0; i < d.candidates.size(); ++i)
      scores[i] = d.candidates[i] == p_["likes"].get<int>() ? 1.0 : 0.0;
  }
  bool uses_prompt_profile() const override { return true; }
  ProfileFields prompt_fields() const override { return {p_["prob"].get<bool>(), false}; }
  std::span<const int> prompt_layers() const override { return layers_; }
  double handoff_bytes(const Request&) const override { return p_["bytes"].get<double>(); }
  double routing_overhead_s() const override { return 0.5; }
  std::optional<std::vector<int>> home_workers(const Request&, const PromptProfile&) const override
  {
    return std::vector<int>{p_["likes"].get<int>()};
  }
  int home_precedence() const override { return p_["rank"].get<int>(); }
  void add_stats(std::vector<std::pair<std::string, double>>& out) const override
  {
    out.emplace_back("likes", p_["likes"].get<double>());
  }
  std::vector<double> refit_times() const override { return {p_["bytes"].get<double>()}; }
  Json p_;
  std::vector<int> layers_ = p_["layers"].get<std::vector<int>>();
};

const PluginEntry kHookScorer = {
    .type   = "hook-scorer",
    .help   = "test: answers every hook",
    .scorer = [](const Json& p, PluginContext&) -> std::unique_ptr<Scorer> { return std::make_unique<HookScorer>(p); }};

Step hook_step(const char* params)
{
  return Step{&kHookScorer, 1.0, Json::parse(params)};
}

}  // namespace

TEST_CASE("composed: a plugin outside the table runs, and the router combines the hooks of every part")
{
  Composition c = composition(R"({"picker": {"max-score-picker": {"tie_break": "lowest-index"}}})");
  c.scorers.push_back(hook_step(R"({"likes": 2, "prob": false, "layers": [3, 1], "bytes": 10, "rank": 2})"));
  c.scorers.push_back(hook_step(R"({"likes": 1, "prob": true, "layers": [1, 5], "bytes": 20, "rank": 1})"));
  auto r = make_composed_router(c, RouterSetup{4, 1, nullptr});
  std::vector<int> load(4, 0);
  Request q;
  CHECK(r->choose(q, DecodeLoadView{load}) == 1);  // totals 0, 1, 1, 0: the lowest index
  CHECK(r->uses_prompt_profile());
  CHECK(r->prompt_fields().gate_prob);
  CHECK(!r->prompt_fields().gate_score);
  const std::span<const int> layers = r->prompt_layers();
  CHECK(std::vector<int>(layers.begin(), layers.end()) == std::vector<int>{1, 3, 5});  // the union, sorted
  CHECK(r->handoff_bytes(q) == 30);
  CHECK(r->routing_overhead_s() == 1.0);
  CHECK(r->home_workers(q, {}) == std::vector<int>{1});  // the lower precedence answers
  CHECK(r->stats() == std::vector<std::pair<std::string, double>>{{"likes", 2}, {"likes", 1}});
  CHECK(r->refit_times() == std::vector<double>{10, 20});
  // One part alone: its own layers, as they are.
  Composition one = composition("{}");
  one.scorers.push_back(hook_step(R"({"likes": 0, "prob": false, "layers": [4, 2], "bytes": 0, "rank": 1})"));
  auto single                  = make_composed_router(one, RouterSetup{4, 1, nullptr});
  const std::span<const int> l = single->prompt_layers();
  CHECK(std::vector<int>(l.begin(), l.end()) == std::vector<int>{4, 2});
}
