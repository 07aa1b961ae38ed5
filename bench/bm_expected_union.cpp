// Expected unions (sim/workload/expected_union.hpp, workload.union = expected) on S1's paths: a
// decode worker's batch changing by one sequence (a leave and a join: what DecodeWorker pays per
// finish and admission, instead of per token-step), and a prefill batch's expected distinct experts
// (PrefillWorker::run_batch), for prompts of the S1 workload.
#include "bench/bench_common.hpp"
#include "sim/config/experiment.hpp"
#include "sim/workload/expected_union.hpp"
#include "sim/workload/routing_source_factory.hpp"
#include "sim/workload/workload_factory.hpp"

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

namespace eldr::bench {
namespace {

struct Setup {
  Experiment x;
  Workload w;
  std::unique_ptr<ExpertRoutingSource> src;
};

const Setup& setup()
{
  static const Setup s = [] {
    Setup s;
    s.x   = load_experiment(source_path("configs/default.json"),
                            {{"workload.measured_requests", "2000"}, {"workload.warmup_requests", "0"}});
    s.w   = make_workload(s.x);
    s.src = make_routing_source(s.x, s.w);
    return s;
  }();
  return s;
}

// One iteration = the oldest of `batch` sequences leaves and a new one joins, then D is read.
void BM_ExpectedBatchChange(benchmark::State& state)
{
  const Setup& s            = setup();
  const int batch           = int(state.range(0));
  const RoutingShape& shape = s.src->shape();
  ExpectedUnion u(shape.layers, shape.experts);
  std::vector<double> distinct(size_t(shape.layers));
  size_t next = 0;
  auto law    = [&](size_t i) { return s.src->token_law(s.w.requests[i % s.w.requests.size()], 1); };
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
}
BENCHMARK(BM_ExpectedBatchChange)->ArgName("batch")->Arg(32)->Arg(80);

// One iteration = one prefill batch of one S1 prompt (its whole prompt computed); items = prompt tokens.
void BM_ExpectedPromptDistinct(benchmark::State& state)
{
  const Setup& s = setup();
  std::vector<double> distinct(size_t(s.src->shape().layers));
  size_t i    = 0;
  long tokens = 0;
  for (auto _ : state) {
    const Request& r = s.w.requests[i++ % s.w.requests.size()];
    const PromptTokens p{&r, 0, r.prompt_tokens};
    benchmark::DoNotOptimize(expected_prompt_distinct(*s.src, std::span(&p, 1), distinct));
    tokens += r.prompt_tokens;
  }
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_ExpectedPromptDistinct);

}  // namespace
}  // namespace eldr::bench
