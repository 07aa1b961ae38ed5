// Workload generation: the S1 request stream (default config at 100 req/s for 120 s: 12,000 measured
// + 3840 warm-up = 15,840 requests), including reading the prompt-length CSV.
#include "bench/bench_common.hpp"
#include "sim/config/experiment.hpp"
#include "sim/workload/workload_generator.hpp"

#include <benchmark/benchmark.h>

namespace eldr::bench {
namespace {

void BM_GenerateWorkload(benchmark::State& state)
{
  const Experiment x = load_experiment(source_path("configs/default.json"), {{"workload.rate_rps", "100"}});
  const long n       = x.workload.warmup_requests + x.workload.measured_requests;
  if (n != 15840) {
    state.SkipWithError(("expected 15840 requests, config gives " + std::to_string(n)).c_str());
    return;
  }
  for (auto _ : state) {
    Workload w = generate_workload(x.workload, x.seed);
    benchmark::DoNotOptimize(w.requests.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["requests"] = double(n);
}
BENCHMARK(BM_GenerateWorkload)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eldr::bench
