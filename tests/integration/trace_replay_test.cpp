// Imported traces through the simulator: replayed ESFT routing drives the decode steps, and an Azure
// slice keeps its arrival times. One engine per TEST_CASE.
#include "sim/gating/replay_gating.hpp"
#include "sim/metrics/result_writer.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_importers.hpp"
#include "sim_fixture.hpp"

#include <doctest/doctest.h>

#include <bit>

using namespace eldr;
using namespace eldr::test;

TEST_CASE("trace: a replayed ESFT slice runs end to end, and each step's distinct experts are the replayed ones")
{
  const std::string data = "traces/routing/esft_deepseek_v2_lite";
  REQUIRE_MESSAGE(std::filesystem::is_directory(data), "the ESFT data must be at " << data);
  ScratchDir dir("esft");
  EsftImportOptions o;
  o.data_dir             = data;
  o.out_dir              = dir.path();
  o.sequences_per_domain = 10;
  o.calibration          = 4;
  o.repeat               = 3;
  o.rate_rps             = 20;
  import_esft(o);

  SmallRun s;
  s.x = load_experiment(
      "configs/esft.json",
      {{"workload.trace", dir.path()}, {"workload.warmup_requests", "20"}, {"workload.arrivals", "trace"}});
  s.w = make_workload(s.x);
  REQUIRE(s.w.calibration.size() == 4);
  REQUIRE(s.w.requests.size() == 36 * 3);
  auto src     = make_gating_source(s.x, s.w);
  auto* replay = dynamic_cast<const ReplayGating*>(src.get());
  REQUIRE(replay != nullptr);
  s.rec.emplace(run_simulation(s.x, s.w, *src));
  check_invariants(s);
  const RunSummary sum = summarize_run(s.x, s.w, s.r());
  CHECK(sum.unfinished == 0);
  CHECK(sum.measured == 36 * 3 - 20);

  // Rebuild every step's batch (as rebuild_steps does) and the union of the tokens it fed: a
  // request's k-th step on its worker feeds token prompt + k.
  std::map<int, std::vector<const StepRecord*>> by_worker;
  for (const StepRecord& st : s.r().steps())
    by_worker[st.worker].push_back(&st);
  for (auto& [w, list] : by_worker)
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
  const GatingShape& shape = replay->shape();
  std::map<const StepRecord*, std::vector<uint64_t>> unions;
  for (const Request& r : s.w.requests) {
    const RequestRecord& q = s.r().requests()[r.id];
    const auto& list       = by_worker[q.decode_worker];
    auto first             = std::lower_bound(list.begin(), list.end(), q.decode_admit_s,
                                              [](const StepRecord* st, double t) { return st->start_s < t; });
    int k                  = 0;
    for (auto st = first; st != list.end() && (*st)->start_s < q.finish_s; ++st, ++k) {
      auto& u = unions[*st];
      u.resize(size_t(shape.words()), 0);
      accumulate(u, replay->token_experts(r, r.prompt_tokens + k));
    }
  }
  long bad = 0, single = 0;
  for (const StepRecord& st : s.r().steps()) {
    const auto& u = unions[&st];
    REQUIRE(u.size() == size_t(shape.words()));
    std::vector<uint16_t> per_layer(size_t(shape.layers));
    const double mean = double(count_distinct(u, shape, per_layer)) / shape.layers;
    bad += std::abs(mean - st.distinct_mean) > 1e-4;
    if (st.batch == 1) {
      ++single;
      bad += std::abs(st.distinct_mean - 6.0f) > 1e-6;  // one token: exactly top-6 per layer
    }
  }
  CHECK(bad == 0);
  CHECK(single > 0);
}

TEST_CASE("trace: an imported Azure slice keeps its arrival times exactly (no drain)")
{
  ScratchDir dir("azure");
  RequestTraceImportOptions o;
  o.input   = "traces/azure2023_code.csv";
  o.out_dir = dir.path();
  o.limit   = 300;
  import_azure(o);
  const Trace t = read_trace(dir.path());

  SmallRun s;
  s.x = load_experiment("configs/default.json", {{"workload.kind", "trace"},
                                                 {"workload.trace", dir.path()},
                                                 {"workload.arrivals", "trace"},
                                                 {"workload.calibration_requests", "0"},
                                                 {"workload.warmup_requests", "50"},
                                                 {"workload.drain_after_warmup", "false"}});
  s.w = make_workload(s.x);
  REQUIRE(s.w.requests.size() == 300);
  auto src = make_gating_source(s.x, s.w);
  s.rec.emplace(run_simulation(s.x, s.w, *src));
  check_invariants(s);
  long off = 0;
  for (const Request& r : s.w.requests) {
    const TraceRequest& q = t.requests[r.id];
    off += std::abs(s.r().requests()[r.id].arrival_s - q.arrival_s) > 1e-9 * std::max(1.0, q.arrival_s);
    off += r.prompt_tokens != q.prompt_tokens || r.output_tokens != q.output_tokens;
  }
  CHECK(off == 0);
  CHECK(summarize_run(s.x, s.w, s.r()).unfinished == 0);
}
