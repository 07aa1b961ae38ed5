// The domain oracle (sim/routing/domain_pools.hpp; router "domain", a composition): pools sized by
// calibration label shares, JSQ inside.
#include "sim/routing/domain_pools.hpp"
#include "sim/routing/registry/router_registry.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using namespace eldr;

namespace {

Workload mix(const std::vector<long>& counts, const std::vector<std::string>& labels)
{
  Workload w;
  w.labels = labels;
  for (size_t c = 0; c < counts.size(); ++c)
    for (long i = 0; i < counts[c]; ++i) {
      Request r;
      r.label = uint16_t(c);
      w.calibration.push_back(r);
    }
  return w;
}

}  // namespace

TEST_CASE("domain pools: the task mix on 16 workers, by hand")
{
  // Shares 2779 : 2744 : 2545 : 3600 of 11668: 16 x share = 3.81, 3.76, 3.49, 4.94 -> floors 3, 3, 3, 4
  // (13 workers); the 3 leftovers go to the largest remainders .94 (legal), .81 (code), .76 (math).
  DomainPools p = make_domain_pools({2779, 2744, 2545, 3600}, {"code", "math", "medical", "legal"}, 16);
  CHECK(p.size == std::vector<int>{4, 4, 3, 5});
  CHECK(p.first == std::vector<int>{0, 4, 8, 11});
  CHECK(p.pool_of_label == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("domain pools: labels under 1/K share a misc pool")
{
  // K = 8: shares .5, .3, .1, .1 -> en 4, zh 2.4, misc (ru + fr) 1.6: floors 4, 2, 1 = 7; the leftover
  // to the largest remainder: misc (.6) over zh (.4).
  DomainPools p = make_domain_pools({50, 30, 10, 10}, {"en", "zh", "ru", "fr"}, 8);
  CHECK(p.names == std::vector<std::string>{"en", "zh", "misc"});
  CHECK(p.size == std::vector<int>{4, 2, 2});
  CHECK(p.pool_of_label == std::vector<int>{0, 1, 2, 2});
}

TEST_CASE("domain pools: WildChat's languages on 16 workers, 'rest' minor, by hand")
{
  // Shares .468, .300, .095, .022, .115 (traces/workload_labels.json). 'rest' gathers languages each
  // under 1/16, so it joins fr in misc (.137) although its own share is over 1/16: 16 x share = en
  // 7.488, zh 4.8, ru 1.52, misc 2.192 -> floors 7, 4, 1, 2 (14 workers); the 2 leftovers to the
  // largest remainders .8 (zh) and .52 (ru): en 7, zh 5, ru 2, misc 2.
  const std::vector<std::string> names{"en", "zh", "ru", "fr", "rest"};
  DomainPools p = make_domain_pools({468, 300, 95, 22, 115}, names, 16, {false, false, false, false, true});
  CHECK(p.names == std::vector<std::string>{"en", "zh", "ru", "misc"});
  CHECK(p.size == std::vector<int>{7, 5, 2, 2});
  CHECK(p.first == std::vector<int>{0, 7, 12, 14});
  CHECK(p.pool_of_label == std::vector<int>{0, 1, 2, 3, 3});
  // Without the flag 'rest' has a pool of its own (16 x .115 = 1.84) and fr's misc share (.352) gets
  // no worker: fr goes anywhere.
  DomainPools q = make_domain_pools({468, 300, 95, 22, 115}, names, 16);
  CHECK(q.names == std::vector<std::string>{"en", "zh", "ru", "rest", "misc"});
  CHECK(q.size == std::vector<int>{7, 5, 2, 2, 0});
  CHECK(q.pool_of_label == std::vector<int>{0, 1, 2, -1, 3});
}

TEST_CASE("domain pools: a misc pool too small for a worker sends its labels anywhere")
{
  // K = 4: shares .49, .49, .02 -> floors 1, 1, 0; leftovers 2 to remainders .96, .96: misc gets none.
  DomainPools p = make_domain_pools({49, 49, 2}, {"a", "b", "c"}, 4);
  CHECK(p.size == std::vector<int>{2, 2, 0});
  CHECK(p.pool_of_label[2] == -1);
}

TEST_CASE("domain router: JSQ inside the request's pool only")
{
  Workload w           = mix({2779, 2744, 2545, 3600}, {"code", "math", "medical", "legal"});
  auto made            = make_decode_router("domain", RouterSetup{16, 1, &w});
  DecodeRouter& router = *made;
  std::vector<int> load(16, 0);
  load[11] = 5;  // legal's pool is 11..15: worker 11 is busy, worker 0 (code) is idle
  Request legal;
  legal.label = 3;
  for (int i = 0; i < 200; ++i) {
    int wkr = router.choose(legal, DecodeLoadView{load});
    CHECK(wkr >= 12);
    CHECK(wkr <= 15);
  }
  load.assign(16, 3);
  load[9] = 1;
  Request medical;
  medical.label = 2;
  CHECK(router.choose(medical, DecodeLoadView{load}) == 9);
}

TEST_CASE("domain router: needs a calibration split")
{
  CHECK_THROWS_AS(make_decode_router("domain", RouterSetup{16, 1, nullptr}), std::invalid_argument);
  Workload empty;
  CHECK_THROWS_AS(make_decode_router("domain", RouterSetup{16, 1, &empty}), std::invalid_argument);
}

TEST_CASE("domain router: a calibration request's home workers are its label's pool (per-cluster placement)")
{
  // Shares .75 / .25 of 4 workers: pools of 3 (en: workers 0-2) and 1 (zh: worker 3).
  Workload w = mix({3, 1}, {"en", "zh"});
  RouterSetup setup;
  setup.decode_workers = 4;
  setup.workload       = &w;
  auto made            = make_decode_router("domain", setup);
  DecodeRouter& router = *made;
  Request r;
  r.label = 0;
  CHECK(router.home_workers(r, {}) == std::vector<int>{0, 1, 2});
  r.label = 1;
  CHECK(router.home_workers(r, {}) == std::vector<int>{3});
  r.label = 7;  // no pool: any worker
  CHECK(router.home_workers(r, {}).empty());
}
