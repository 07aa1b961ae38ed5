// The generated routing source (sim/gating/generated_gating.hpp) on S1's hot paths: the decode
// batch union (DecodeWorker::plan: one union per step, the batch's tokens ORed from palette records
// spread over ~6 MB, so L3-bound), the prefill union (PrefillWorker::run_batch: a prompt in chunks of
// 32 into one union, records already ORed skipped), building the palettes (once per run) and drawing a
// palette's gate values (on its first use by a gate variant).
#include "bench/bench_common.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/workload/workload_factory.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

namespace eldr::bench {
namespace {

struct Setup {
  Experiment x;
  Workload w;
};

const Setup& setup()
{
  static const Setup s = [] {
    Setup s;
    s.x = load_experiment(source_path("configs/default.json"),
                          {{"workload.measured_requests", "2000"}, {"workload.warmup_requests", "0"}});
    s.w = make_workload(s.x);
    return s;
  }();
  return s;
}

std::unique_ptr<GeneratedGating> make_source(const Setup& s)
{
  return std::make_unique<GeneratedGating>(s.x.model, s.x.routing_profile, "task", s.w.labels, s.x.seed,
                                           s.x.workload.routing_profile_file);
}

// One iteration = one decode step of `batch` sequences of the S1 workload; successive iterations
// read successive output tokens. items = token-steps.
void BM_GeneratedDecodeUnion(benchmark::State& state)
{
  const Setup& s           = setup();
  auto src                 = make_source(s);
  const int batch          = int(state.range(0));
  const GatingShape& shape = src->shape();
  std::vector<uint64_t> u(size_t(shape.words()));
  std::vector<uint16_t> distinct(size_t(shape.layers));
  std::vector<TokenRef> tokens(static_cast<size_t>(batch));
  int step        = 0;
  long distinct_n = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      const Request& r  = s.w.requests[size_t(i)];
      tokens[size_t(i)] = {&r, r.prompt_tokens + step};
    }
    std::ranges::fill(u, 0);
    src->accumulate_tokens(tokens, u);
    distinct_n += count_distinct(u, shape, distinct);
    step = (step + 1) % 511;
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["distinct_per_layer"] = double(distinct_n) / double(state.iterations()) / shape.layers;
}
BENCHMARK(BM_GeneratedDecodeUnion)->ArgName("batch")->Arg(32)->Arg(80);

// One iteration = the prompts of 200 requests, each into a fresh union in chunks of 32 tokens as the
// prefill worker does. items = prompt tokens.
void BM_GeneratedPromptUnion(benchmark::State& state)
{
  const Setup& s = setup();
  auto src       = make_source(s);
  std::vector<uint64_t> u(size_t(src->shape().words()));
  std::vector<TokenRef> chunk;
  long tokens = 0;
  for (auto _ : state) {
    for (int i = 0; i < 200; ++i) {
      const Request& r = s.w.requests[size_t(i)];
      std::ranges::fill(u, 0);
      for (int t0 = 0; t0 < r.prompt_tokens; t0 += 32) {
        chunk.clear();
        for (int t = t0; t < std::min(t0 + 32, r.prompt_tokens); ++t)
          chunk.push_back({&r, t});
        src->accumulate_tokens(chunk, u);
      }
      tokens += r.prompt_tokens;
      benchmark::DoNotOptimize(u.data());
    }
  }
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_GeneratedPromptUnion)->Unit(benchmark::kMillisecond);

// Building the source: logits, then 64 palettes x 256 records x 48 layers of top-8 sampling.
void BM_GeneratedRoutingBuild(benchmark::State& state)
{
  const Setup& s = setup();
  for (auto _ : state) {
    auto src = make_source(s);
    benchmark::DoNotOptimize(src.get());
  }
}
BENCHMARK(BM_GeneratedRoutingBuild)->Unit(benchmark::kMillisecond);

// The tokens' own gate values (sim/gating/pick_gates.hpp) of one palette, drawn on the first read of
// one of its tokens: 256 records x 48 layers, renormalized over the top 8 (Qwen3). items = draws.
void BM_GeneratedGatesTable(benchmark::State& state)
{
  const Setup& s   = setup();
  auto src         = make_source(s);
  const Request& r = s.w.requests[0];
  for (auto _ : state) {
    forget_gate_tables();  // drawn each time, as in a process without them (a palette is drawn once per process)
    auto gates = make_gate_source(*src);
    benchmark::DoNotOptimize(gates->token_gates(r, 0).prob.data());
  }
  state.SetItemsProcessed(state.iterations() * src->records_per_palette() * src->shape().layers);
}
BENCHMARK(BM_GeneratedGatesTable)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eldr::bench
