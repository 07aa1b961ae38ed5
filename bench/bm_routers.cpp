// Routing decisions: the decode routers (docs/design.md section 8: under 2 us for K = 16) and the prefill
// router's consistent hash.
#include "sim/common/rng.hpp"
#include "sim/routing/compose/composed_router.hpp"
#include "sim/routing/prefill_router.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "tests/support/router_workload.hpp"

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace eldr::bench {
namespace {

// A load snapshot of K decode workers around 30 in-flight requests each, with a three-way tie at the
// minimum (ties are jsq's slow path: a random draw per tie).
std::vector<int> decode_loads(int k)
{
  Rng rng(3, "bench.loads");
  std::vector<int> loads(static_cast<size_t>(k));
  for (auto& l : loads)
    l = 28 + int(rng.below(8));
  for (int i = 0; i < std::min(k, 3); ++i)
    loads[size_t(i * 5 % k)] = 20;
  return loads;
}

// Through the DecodeRouter interface, as the simulation calls it.
void BM_DecodeRouter(benchmark::State& state, const std::string& name)
{
  const int k            = int(state.range(0));
  auto router            = make_decode_router(name, RouterSetup{16, 1, &test::two_label_workload()});
  std::vector<int> loads = decode_loads(k);
  const DecodeLoadView view{loads};
  Request r;
  for (auto _ : state) {
    ++r.id;
    int w = router->choose(r, view);
    benchmark::DoNotOptimize(w);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_DecodeRouter, random, std::string("random"))->ArgName("K")->Arg(16);
BENCHMARK_CAPTURE(BM_DecodeRouter, round_robin, std::string("round_robin"))->ArgName("K")->Arg(16);
BENCHMARK_CAPTURE(BM_DecodeRouter, jsq, std::string("jsq"))->ArgName("K")->Arg(16);
BENCHMARK_CAPTURE(BM_DecodeRouter, p2c, std::string("p2c"))->ArgName("K")->Arg(16);
BENCHMARK_CAPTURE(BM_DecodeRouter, domain, std::string("domain"))->ArgName("K")->Arg(16);

// A composition of three scorers (queue, KV utilisation, label match) and a max-score picker: the
// pipeline's cost per plugin, over the same snapshot with every worker's KV cache a quarter full.
void BM_ComposedRouter(benchmark::State& state)
{
  const int k         = int(state.range(0));
  const Composition c = read_composition(
      Json::parse(R"({"scorers": {"queue-scorer": {}, "kv-cache-utilization-scorer": {}, "label-match-scorer": {}}})"),
      "bench");
  auto router            = make_composed_router(c, RouterSetup{k, 1, &test::two_label_workload()});
  std::vector<int> loads = decode_loads(k);
  std::vector<BlockCache> caches(size_t(k), BlockCache(1000));
  for (BlockCache& cache : caches)
    cache.acquire({}, 250);
  const DecodeLoadView view{loads, 0, caches};
  Request r;
  for (auto _ : state) {
    ++r.id;
    r.label = uint16_t(r.id & 1);
    int w   = router->choose(r, view);
    benchmark::DoNotOptimize(w);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ComposedRouter)->ArgName("K")->Arg(16);

// Consistent-hash lookup over workers x vnodes ring points plus the load check, on distinct prompt keys.
void BM_PrefillRouter(benchmark::State& state)
{
  const int workers = int(state.range(0));
  const int vnodes  = int(state.range(1));
  const PrefillRouter router(workers, vnodes, 1.25);
  Rng rng(5, "bench.prefill");
  std::vector<uint64_t> keys(4096);
  for (auto& k : keys)
    k = rng();
  std::vector<int> in_flight(static_cast<size_t>(workers));
  for (auto& l : in_flight)
    l = 1 + int(rng.below(4));
  size_t i = 0;
  for (auto _ : state) {
    int w = router.choose(keys[i], in_flight);
    benchmark::DoNotOptimize(w);
    i = (i + 1) & (keys.size() - 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PrefillRouter)->ArgNames({"workers", "vnodes"})->Args({8, 160});

}  // namespace
}  // namespace eldr::bench
