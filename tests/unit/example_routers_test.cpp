// The worked example routers (examples/routers/, docs/adding-a-router.md): jsq_of_d and prefix_affinity,
// built through the router table like every router, and what the table says about them; the worked
// example plugin (examples/plugins/): kv-headroom-scorer, through the plugin table.
#include "examples/routers/jsq_of_d.hpp"
#include "examples/routers/prefix_affinity.hpp"
#include "sim/common/input_error.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/compose/composed_router.hpp"
#include "sim/routing/registry/router_registry.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace eldr;

TEST_CASE("jsq_of_d: returns a valid worker and avoids the loaded ones")
{
  JsqOfDRouter router(1, 3);
  Request r;
  std::vector<int> load = {9, 9, 9, 0, 9, 9, 9, 9};
  int hits              = 0;
  for (int i = 0; i < 1000; ++i) {
    int w = router.choose(r, DecodeLoadView{load});
    REQUIRE(w >= 0);
    REQUIRE(w < 8);
    hits += w == 3;
  }
  // Worker 3 is among 3 distinct samples of 8 with probability 3/8, and then always wins.
  CHECK(hits == doctest::Approx(375).epsilon(0.15));
}

TEST_CASE("jsq_of_d: d >= K always takes a least-loaded worker, ties among them all reached")
{
  JsqOfDRouter router(7, 40);
  Request r;
  std::vector<int> load = {3, 1, 2, 5, 1};
  int picks[5]          = {};
  for (int i = 0; i < 400; ++i)
    ++picks[router.choose(r, DecodeLoadView{load})];
  CHECK(picks[0] + picks[2] + picks[3] == 0);
  CHECK(picks[1] > 150);  // the first sampled of the two tied: either, evenly
  CHECK(picks[4] > 150);
}

TEST_CASE("jsq_of_d: same seed, same decisions, and d from the config section")
{
  auto a = make_decode_router("jsq_of_d", RouterSetup{16, 42, nullptr});
  auto b = make_decode_router("jsq_of_d", RouterSetup{16, 42, nullptr});
  Request r;
  std::vector<int> load(16, 0);
  for (int i = 0; i < 500; ++i) {
    int w = a->choose(r, DecodeLoadView{load});
    REQUIRE(w == b->choose(r, DecodeLoadView{load}));
    ++load[size_t(w)];
  }
  // d = 1 from the config: the load is ignored, so a loaded worker gets picked sometimes.
  Experiment x            = load_experiment("configs/default.json", {{"router", "jsq_of_d"}, {"jsq_of_d.d", "1"}});
  auto one                = make_decode_router("jsq_of_d", RouterSetup{4, 1, nullptr, nullptr, &x});
  std::vector<int> skewed = {0, 9, 9, 9};
  int loaded              = 0;
  for (int i = 0; i < 100; ++i)
    loaded += one->choose(r, DecodeLoadView{skewed}) != 0;
  CHECK(loaded > 50);
}

TEST_CASE("prefix_affinity: the prefix's home worker until it is more than kSlack above the least loaded")
{
  PrefixAffinityRouter router;
  Request r;
  r.prefix_hash         = 4 * 1000 + 2;  // home worker 2 of 4
  std::vector<int> load = {1, 1, 1 + PrefixAffinityRouter::kSlack, 1};
  CHECK(router.choose(r, DecodeLoadView{load}) == 2);
  load[2] = 2 + PrefixAffinityRouter::kSlack;
  CHECK(router.choose(r, DecodeLoadView{load}) == 0);  // the least loaded, lowest index
}

TEST_CASE("router table: unique names, a description each, a section named after its router and declaring its keys")
{
  std::vector<std::string> names = decode_router_names();
  for (const RouterEntry& e : decode_routers()) {
    CHECK(std::count(names.begin(), names.end(), e.name) == 1);
    CHECK(std::string(e.description).size() > 10);
    if (e.section) {
      CHECK(e.section->name == e.name);
      CHECK(bool(e.section->read));
      REQUIRE(!e.section->keys.empty());
      CHECK(e.section->keys[0].path == e.name);  // the section itself first, then its members
      for (const ConfigKey& k : e.section->keys)
        CHECK(k.path.starts_with(e.name));
    }
    CHECK(find_decode_router(e.name) == &e);
  }
  CHECK(find_decode_router("JSQ") == nullptr);
}

TEST_CASE("kv-headroom-scorer: free KV blocks up to headroom_blocks, so workers with headroom tie")
{
  // Capacities of 100 blocks, headroom 50: worker 0 holds 80 (20 free: .4), worker 1 holds 40 (60 free:
  // 1), worker 2 holds 95 (5 free: .1), worker 3 had 10 released to the cache (all 100 free: 1).
  std::vector<BlockCache> caches(4, BlockCache(100));
  caches[0].acquire({}, 80);
  caches[1].acquire({}, 40);
  caches[2].acquire({}, 95);
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  caches[3].acquire(keys, 0);
  caches[3].release(keys, 0);
  const RouterSetup setup{4, 1, nullptr};
  auto alone            = make_composed_router(read_composition(Json::parse(R"({"scorers": {"kv-headroom-scorer":
      {"headroom_blocks": 50}}, "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})"),
                                                                "test.json"),
                                               setup);
  std::vector<int> load = {3, 5, 0, 4};
  Request q;
  // Workers 1 and 3 both score 1: the lowest index (by free fraction, .6 against 1, it would be 3).
  CHECK(alone->choose(q, DecodeLoadView{load, 0, caches}) == 1);
  // With the queue scorer ((5 - n) / 5: .4, 0, 1, .2): totals .8, 1, 1.1, 1.2 -> worker 3; the queue
  // scorer alone takes worker 2, the least loaded but nearly full.
  auto both = make_composed_router(read_composition(Json::parse(R"({"scorers": {"queue-scorer": {},
      "kv-headroom-scorer": {"headroom_blocks": 50}}, "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})"),
                                                    "test.json"),
                                   setup);
  CHECK(both->choose(q, DecodeLoadView{load, 0, caches}) == 3);
  // The default headroom, 64 blocks, is a declared key: worker 1's 60 free blocks score 60/64 < 1.
  const Composition c = read_composition(Json::parse(R"({"scorers": {"kv-headroom-scorer": {}}})"), "test.json");
  REQUIRE(c.scorers.size() == 1);
  CHECK(c.scorers[0].params["headroom_blocks"] == 64);
  auto defaults = make_composed_router(c, setup);
  CHECK(defaults->choose(q, DecodeLoadView{load, 0, caches}) == 3);
  CHECK_THROWS_AS(
      read_composition(Json::parse(R"({"scorers": {"kv-headroom-scorer": {"headroom_blocks": 0}}})"), "test.json"),
      InputError);
}
