// EPLB's rearrangement (sim/cost/eplb.hpp): DeepSeek's rebalance_experts at Qwen3-235B-A22B's size.
#include "sim/common/rng.hpp"
#include "sim/cost/eplb.hpp"

#include <benchmark/benchmark.h>

#include <vector>

namespace eldr::bench {
namespace {

// One iteration = one placement of 94 layers x 128 experts over 4 GPUs with `redundant` extra slots
// per layer, from loads drawn once (skewed: a few heavy experts per layer), as a TP4 + EP4 decode
// instance computes at each rearrangement.
void BM_RebalanceExperts(benchmark::State& state)
{
  const int layers = 94, experts = 128, gpus = 4, redundant = int(state.range(0));
  std::vector<float> load(size_t(layers) * experts);
  Rng rng(7, "bench.eplb");
  for (float& w : load)
    w = float(rng.below(1000) * rng.below(1000) / 1000);
  for (auto _ : state)
    benchmark::DoNotOptimize(rebalance_experts(load, layers, experts, experts + redundant, 1, 1, gpus).phy2log.data());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RebalanceExperts)->ArgName("redundant")->Arg(0)->Arg(8)->Arg(32)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace eldr::bench
