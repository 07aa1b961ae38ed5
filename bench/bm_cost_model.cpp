// CostModel::decode_step_s: the per-step cost evaluation every decode worker does once per step.
#include "bench/bench_common.hpp"
#include "sim/common/rng.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/gating/uniform_gating.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

namespace eldr::bench {
namespace {

// A decode step of `batch` sequences, each part-way through its output, with the distinct-expert
// counts of the union of their tokens under uniform routing (what DecodeWorker::plan feeds in).
void BM_DecodeStepCost(benchmark::State& state)
{
  const int batch        = int(state.range(0));
  const ModelSpec& model = qwen3_30b();
  const Hardware& hw     = mi300x();
  const CostModel cost(model, hw, model.calibration_for(hw.name, "models/qwen3-30b-a3b.json"));

  UniformGating routing(model, 1);
  const GatingShape& shape = routing.shape();
  std::vector<uint64_t> union_masks(size_t(shape.words()), 0);
  std::vector<uint16_t> distinct(size_t(shape.layers), 0);
  AttentionLoad attention;
  Rng rng(7, "bench.cost");
  for (int i = 0; i < batch; ++i) {
    Request r;
    r.id                = uint32_t(i);
    r.prompt_tokens     = 4 + int(rng.below(1021));
    r.routing_seed      = rng();
    const int generated = 1 + int(rng.below(511));
    accumulate(union_masks, routing.token_experts(r, r.prompt_tokens + generated - 1));
    const double context = r.prompt_tokens + generated;
    attention.context_tokens += context;
    attention.windowed_tokens += model.sliding_window > 0 ? std::min(context, double(model.sliding_window)) : context;
  }
  const long distinct_sum = count_distinct(union_masks, shape, distinct);

  for (auto _ : state) {
    benchmark::DoNotOptimize(attention);
    double t = cost.decode_step_s(batch, attention, distinct);
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["distinct_per_layer"] = double(distinct_sum) / shape.layers;
  state.counters["step_ms"]            = 1e3 * cost.decode_step_s(batch, attention, distinct);
}
BENCHMARK(BM_DecodeStepCost)->ArgName("batch")->Arg(1)->Arg(8)->Arg(32)->Arg(128)->Arg(512);

}  // namespace
}  // namespace eldr::bench
