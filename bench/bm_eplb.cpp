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

// One iteration = one token's picks (top-8 of 128 experts on each of 94 layers, drawn once for 256
// tokens) counted onto the replicas of vLLM's initial placement with `redundant` extra slots over 4
// ranks: what a TP4 + EP4 decode instance with an eplb section does per token and planned step.
void BM_EplbAddToken(benchmark::State& state)
{
  const int layers = 94, experts = 128, ranks = 4, words = 2, tokens = 256;
  EplbSpec spec;
  spec.enabled       = true;
  spec.redundant     = int(state.range(0));
  spec.window_size   = 1000;
  spec.step_interval = 3000;
  EplbCounters totals;
  EplbInstance eplb(spec, layers, experts, ranks, 1, totals);
  std::vector<uint64_t> masks(size_t(tokens) * layers * words, 0);
  Rng rng(7, "bench.eplb.picks");
  for (int t = 0; t < tokens; ++t)
    for (int l = 0; l < layers; ++l)
      for (int picked = 0; picked < 8;) {
        const int e        = int(rng.below(experts));
        uint64_t& word     = masks[(size_t(t) * layers + size_t(l)) * words + size_t(e / 64)];
        const uint64_t bit = uint64_t(1) << (e % 64);
        picked += (word & bit) ? 0 : 1;
        word |= bit;
      }
  std::vector<uint32_t> acc(size_t(layers) * (ranks + ranks * ranks), 0);
  uint64_t key = 0;
  for (auto _ : state) {
    const size_t t = size_t(key % tokens);
    if (t == 0)
      eplb.clear(0);
    eplb.add_token(0, {&masks[t * layers * words], size_t(layers) * words}, words, key++, 0, acc.data());
  }
  benchmark::DoNotOptimize(acc.data());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EplbAddToken)->ArgName("redundant")->Arg(0)->Arg(32);

}  // namespace
}  // namespace eldr::bench
