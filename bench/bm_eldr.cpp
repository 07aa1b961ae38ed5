// ELDR end to end on the default scenario's generated routing: the offline fit of 1000 calibration
// requests (prompt and decode profiles, IDF, layer mask, balanced K-means) and one routing decision
// with a fitted model (16 centroids over the fitted mask) — docs/design.md section 8's two ELDR budgets.
#include "bench/bench_common.hpp"
#include "sim/routing/eldr/eldr_router.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>

namespace eldr::bench {
namespace {

const Scenario& scenario()
{
  return default_scenario();
}

void BM_EldrOfflineFit(benchmark::State& state)
{
  const Scenario& s = scenario();
  for (auto _ : state) {
    EldrModel m = fit_eldr_for(s.x, s.w, *s.routing);
    benchmark::DoNotOptimize(m.centroids.values.data());
    state.counters["mask_layers"] = double(m.mask.size());
  }
}
BENCHMARK(BM_EldrOfflineFit)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_EldrDecision(benchmark::State& state)
{
  const Scenario& s = scenario();
  EldrSpec spec     = eldr_spec(s.x);
  spec.refit        = "static";
  EldrRouter router(fit_eldr_for(s.x, s.w, *s.routing), spec);
  auto gates = make_gate_source(*s.routing);
  std::vector<Signature> sigs;
  for (int i = 0; i < 256; ++i) {
    const Request& r = s.w.requests[size_t(i)];
    sigs.push_back(router.model().signature(
        count_prompt(*s.routing, r, fields_for(router.model().variant), gates.get(), router.model().mask)));
  }
  std::vector<int> load(16, 30);
  size_t i = 0;
  for (auto _ : state) {
    int w = router.choose_signature(sigs[i++ & 255], load);
    benchmark::DoNotOptimize(w);
  }
  state.counters["dimension"] = double(router.model().dimension());
  double nz                   = 0;
  for (const Signature& g : sigs)
    nz += double(std::count_if(g.begin(), g.end(), [](float v) { return v != 0; }));
  state.counters["nonzero"] = nz / double(sigs.size());
}
BENCHMARK(BM_EldrDecision);

}  // namespace
}  // namespace eldr::bench
