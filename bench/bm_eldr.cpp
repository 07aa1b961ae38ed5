// ELDR end to end on the default scenario's generated routing: the offline fit of 1000 calibration
// requests (prompt and decode profiles, IDF, layer mask, balanced K-means) and one routing decision
// with a fitted model (16 centroids over the fitted mask) — docs/design.md section 8's two ELDR budgets.
#include "bench/bench_common.hpp"
#include "sim/routing/eldr/centroid_table.hpp"
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

// The similarities of one signature to K centroids: the exact kernels (0 portable, 1 AVX-512F, 2 AVX2)
// and the float16 estimates (3: the best kernel the CPU has), on the fitted model's 16 centroids
// repeated to K (64: a 4x cluster) and the signatures of BM_EldrDecision.
void BM_CentroidDots(benchmark::State& state)
{
  const Scenario& s = scenario();
  const int kernel = int(state.range(0)), k = int(state.range(1));
  const EldrModel m = fit_eldr_for(s.x, s.w, *s.routing);
  auto gates        = make_gate_source(*s.routing);
  std::vector<Signature> sigs;
  for (int i = 0; i < 256; ++i)
    sigs.push_back(
        m.signature(count_prompt(*s.routing, s.w.requests[size_t(i)], fields_for(m.variant), gates.get(), m.mask)));
  std::vector<float> rows;
  for (int r = 0; r < k; ++r) {
    const auto c = m.centroids.row(r % m.centroids.rows);
    rows.insert(rows.end(), c.begin(), c.end());
  }
  const CentroidTable table(rows, k, m.centroids.cols);
  std::vector<float> out(static_cast<size_t>(k)), bound(static_cast<size_t>(k));
  size_t i = 0;
  for (auto _ : state) {
    const auto& x = sigs[i++ & 255];
    const bool ok = kernel < 3 ? detail::centroid_dots_with(kernel, table, x, out)
                               : detail::approx_centroid_dots_with(-1, table, x, out, bound);
    if (!ok) {
      state.SkipWithError("the CPU lacks this kernel");
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_CentroidDots)->ArgNames({"kernel", "K"})->ArgsProduct({{0, 1, 2, 3}, {16, 64}});

}  // namespace
}  // namespace eldr::bench
