// Expected unions (sim/gating/expected_union.hpp, workload.union = expected) on S1's paths: a
// decode worker's batch changing by one sequence (a leave and a join: what DecodeWorker pays per
// finish and admission, instead of per token-step), and a prefill batch's expected distinct experts
// (PrefillWorker::run_batch), for prompts of the S1 workload.
#include "bench/bench_common.hpp"
#include "sim/gating/expected_union.hpp"
#include "sim/gating/speculative_tokens.hpp"

#include <benchmark/benchmark.h>

#include <vector>

namespace eldr::bench {
namespace {

// Selects the kernels of argument `kernel` (0 baseline/AVX2, 1 AVX-512); false: the CPU lacks them.
bool use_kernel(benchmark::State& state, int64_t kernel)
{
  if (detail::use_expected_union_kernel(int(kernel)))
    return true;
  state.SkipWithError("this CPU lacks the kernel");
  return false;
}

// One iteration = the oldest of `batch` sequences leaves and a new one joins, then D is read. Each
// sequence is a window of `window` + 1 verified tokens (speculative decoding; 0: one token).
void batch_change(benchmark::State& state, int batch, int64_t kernel, int window)
{
  if (!use_kernel(state, kernel))
    return;
  const Scenario& s        = default_scenario();
  const GatingShape& shape = s.routing->shape();
  ExpectedUnion u(shape.layers, shape.experts);
  std::vector<double> distinct(size_t(shape.layers));
  size_t next = 0;
  auto law    = [&](size_t i) {
    return window_law(s.routing->token_law(s.w.requests[i % s.w.requests.size()], 1), window, 0.278);
  };
  for (; next < size_t(batch); ++next)
    u.join(law(next));
  double sum = 0;
  for (auto _ : state) {
    u.leave(law(next - size_t(batch)));
    u.join(law(next++));
    sum += u.distinct(distinct);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["distinct_per_layer"] = sum / double(state.iterations()) / shape.layers;
  detail::use_expected_union_kernel(-1);
}

void BM_ExpectedBatchChange(benchmark::State& state)
{
  batch_change(state, int(state.range(0)), state.range(1), 0);
}
BENCHMARK(BM_ExpectedBatchChange)->ArgNames({"batch", "kernel"})->ArgsProduct({{32, 80}, {0, 1}});

void BM_SpeculativeBatchChange(benchmark::State& state)
{
  batch_change(state, 80, state.range(1), int(state.range(0)));
}
BENCHMARK(BM_SpeculativeBatchChange)->ArgNames({"window", "kernel"})->ArgsProduct({{1, 3}, {0, 1}});

// One iteration = the sampled masks of one sequence's verified window of `window` + 1 tokens
// (window_masks: a keep or add draw per expert of each draft); items = windows.
void BM_WindowMasks(benchmark::State& state)
{
  const Scenario& s        = default_scenario();
  const int window         = int(state.range(0));
  const GatingShape& shape = s.routing->shape();
  std::vector<std::vector<uint32_t>> hot;  // per request, as a decode worker keeps them
  for (const Request& r : s.w.requests)
    hot.push_back(hot_cells(s.routing->token_law(r, 1), size_t(shape.layers * shape.experts), 0.278));
  std::vector<uint64_t> out;
  size_t i = 0;
  for (auto _ : state) {
    const size_t k   = i++ % s.w.requests.size();
    const Request& r = s.w.requests[k];
    out.clear();
    window_masks(*s.routing, r, r.prompt_tokens + 10, window, 0.278, 7, hot[k], out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WindowMasks)->ArgName("window")->Arg(1)->Arg(3);

// One iteration = one prefill batch of one S1 prompt (its whole prompt computed); items = prompt tokens.
// cache 1: as a prefill worker runs it, the chat template owner's logs kept across batches.
void BM_ExpectedPromptDistinct(benchmark::State& state)
{
  if (!use_kernel(state, state.range(0)))
    return;
  const Scenario& s = default_scenario();
  std::vector<double> distinct(size_t(s.routing->shape().layers));
  PromptLogCache cache;
  PromptLogCache* use = state.range(1) ? &cache : nullptr;
  size_t i            = 0;
  long tokens         = 0;
  for (auto _ : state) {
    const Request& r = s.w.requests[i++ % s.w.requests.size()];
    const PromptTokens p{&r, 0, r.prompt_tokens};
    benchmark::DoNotOptimize(expected_prompt_distinct(*s.routing, std::span(&p, 1), distinct, use));
    tokens += r.prompt_tokens;
  }
  state.SetItemsProcessed(tokens);
  detail::use_expected_union_kernel(-1);
}
BENCHMARK(BM_ExpectedPromptDistinct)->ArgNames({"kernel", "cache"})->ArgsProduct({{0, 1}, {0, 1}});

}  // namespace
}  // namespace eldr::bench
