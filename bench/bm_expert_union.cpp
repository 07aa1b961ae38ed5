// The decode batch union: one token's expert masks per sequence ORed together, then popcounted per
// layer. This is the simulator's hot loop (DecodeWorker::plan -> accumulate_tokens), once per decode step.
#include "bench/bench_common.hpp"
#include "sim/common/rng.hpp"
#include "sim/gating/uniform_gating.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

namespace eldr::bench {
namespace {

// One iteration = one decode step of `batch` sequences; items = token-steps (batch per iteration).
void BM_DecodeBatchUnion(benchmark::State& state)
{
  const int batch        = int(state.range(0));
  const ModelSpec& model = qwen3_30b();
  UniformGating routing(model, 1);
  const GatingShape& shape = routing.shape();

  std::vector<Request> requests(static_cast<size_t>(batch));
  Rng rng(11, "bench.union");
  for (int i = 0; i < batch; ++i) {
    requests[size_t(i)].id            = uint32_t(i);
    requests[size_t(i)].prompt_tokens = 4 + int(rng.below(1021));
    requests[size_t(i)].routing_seed  = rng();
  }
  std::vector<uint64_t> union_masks(size_t(shape.words()), 0);
  std::vector<uint16_t> distinct(size_t(shape.layers), 0);

  int step        = 0;
  long distinct_n = 0;
  std::vector<TokenRef> tokens;
  for (auto _ : state) {
    tokens.clear();
    for (const Request& r : requests)
      tokens.push_back({&r, r.prompt_tokens + step});
    std::fill(union_masks.begin(), union_masks.end(), 0);
    routing.accumulate_tokens(tokens, union_masks);
    distinct_n += count_distinct(union_masks, shape, distinct);
    benchmark::DoNotOptimize(distinct.data());
    step = (step + 1) & 511;  // successive steps read successive output tokens
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["distinct_per_layer"] = double(distinct_n) / double(state.iterations()) / shape.layers;
}
BENCHMARK(BM_DecodeBatchUnion)->ArgName("batch")->Arg(8)->Arg(32)->Arg(80)->Arg(256);

}  // namespace
}  // namespace eldr::bench
