// Small end-to-end simulations (sim/cluster/simulation.hpp). One engine per TEST_CASE: ctest runs each
// test case in its own process.
#include "sim/metrics/invariants.hpp"
#include "sim/metrics/result_writer.hpp"
#include "sim_fixture.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace eldr;
using namespace eldr::test;

namespace {

std::string slurp(const std::filesystem::path& p)
{
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A file's bytes; for summary.json, all but its "build" field, which names the executable that wrote it
// (the test binary's build id is not eldrsim's).
std::string slurp_result(const std::filesystem::path& p)
{
  std::string text = slurp(p);
  if (p.filename() != "summary.json" || text.empty())
    return text;
  Json j = Json::parse(text);
  CHECK(j.contains("build"));
  j.erase("build");
  return j.dump(2);
}

std::string shell_quote(const std::string& s)
{
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

TEST_CASE("sim: default config with round robin - invariants hold and routing cycles through decode workers")
{
  SmallRun s = run_small();
  check_invariants(s);
  RunSummary sum = summarize_run(s.x, s.w, s.r());
  CHECK(sum.measured == 300);
  CHECK(sum.unfinished == 0);
  CHECK(sum.tpot_ms.count == 300);
  CHECK(sum.tpot_ms.p50 > 0);
  CHECK(sum.ttft_ms.p50 >= s.x.calibration.prefill_overhead_s * 1e3);

  // Routing decisions in time order go to workers 0, 1, ..., 15, 0, ...
  auto order = in_routing_order(s);
  long wrong = 0;
  for (size_t i = 0; i < order.size(); ++i)
    wrong += s.r().requests()[order[i]->id].decode_worker != int(i % 16);
  CHECK(wrong == 0);
}

TEST_CASE("sim: jsq routes every request to a least-loaded decode worker and keeps loads even")
{
  SmallRun s = run_small({{"router", "jsq"}, {"workload.rate_rps", "100"}});
  check_invariants(s);
  long not_min   = 0;
  int max_spread = 0;
  for (const Request* r : in_routing_order(s)) {
    auto load       = loads_before(s, *r);
    const int mine  = load[size_t(s.r().requests()[r->id].decode_worker)];
    const int least = *std::min_element(load.begin(), load.end());
    not_min += mine != least;
    ++load[size_t(s.r().requests()[r->id].decode_worker)];
    max_spread =
        std::max(max_spread, *std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()));
  }
  CHECK(not_min == 0);
  // Right after each decision the in-flight counts differ by little (1 in this run; finishes between
  // decisions can open a gap of one more).
  CAPTURE(max_spread);
  CHECK(max_spread <= 2);
}

TEST_CASE("sim: random router runs and spreads requests over all decode workers")
{
  SmallRun s = run_small({{"router", "random"}, {"workload.measured_requests", "600"}});
  check_invariants(s);
  std::vector<int> per_worker(16, 0);
  for (const auto& q : s.r().requests())
    ++per_worker[size_t(q.decode_worker)];
  for (int c : per_worker)
    CHECK(c > 10);  // 650 requests over 16 workers: ~40 each
}

TEST_CASE("sim: p2c never routes to the more loaded worker when loads are far apart")
{
  SmallRun s = run_small({{"router", "p2c"}, {"workload.rate_rps", "100"}});
  check_invariants(s);
  // p2c picks the less loaded of two distinct workers, so the chosen worker is never the unique
  // strict maximum of the loads.
  long chose_unique_max = 0, unique_max_cases = 0;
  for (const Request* r : in_routing_order(s)) {
    auto load         = loads_before(s, *r);
    const int hi      = *std::max_element(load.begin(), load.end());
    const int c       = s.r().requests()[r->id].decode_worker;
    const bool unique = std::count(load.begin(), load.end(), hi) == 1;
    unique_max_cases += unique;
    chose_unique_max += unique && load[size_t(c)] == hi;
  }
  CHECK(unique_max_cases > 30);  // the check below is not vacuous
  CHECK(chose_unique_max == 0);
}

TEST_CASE("sim: tight KV memory forces requests to wait and never exceeds capacity")
{
  // Weights take 61.08 GB; 0.32 x 192 GB leaves 362 MB per decode GPU: 2-6 requests of 0.05-0.15 GB.
  SmallRun s = run_small({{"serving.kv_memory_fraction", "0.32"}, {"workload.measured_requests", "200"}});
  check_invariants(s);
  const auto& recs = s.r().requests();
  long waited      = 0;
  for (const auto& q : recs)
    waited += q.decode_admit_s > q.kv_end_s;
  CHECK(waited > 50);

  // Replay each worker's reservations (admission +, finish -) independently of the engine: the sum
  // never exceeds the capacity, and its maximum is the recorded peak.
  const double capacity = s.r().decode_workers()[0].kv_capacity_bytes;
  CHECK(capacity == doctest::Approx(0.32 * 192e9 - 61.07776e9).epsilon(1e-9));
  double smallest = 1e300;
  for (const Request& r : s.w.requests)
    smallest = std::min(smallest, reserved_bytes(s.x, r));
  const int most = int(capacity / smallest);  // no batch can hold more than this many requests
  for (int d = 0; d < s.x.topology.decode.instances; ++d) {
    std::vector<std::pair<double, double>> events;  // (time, +/- bytes); releases sort first at equal times
    for (const Request& r : s.w.requests) {
      const auto& q = recs[r.id];
      if (q.decode_worker != d)
        continue;
      events.emplace_back(q.decode_admit_s, reserved_bytes(s.x, r));
      events.emplace_back(q.finish_s, -reserved_bytes(s.x, r));
    }
    std::sort(events.begin(), events.end());
    double used = 0, peak = 0;
    for (auto [t, b] : events) {
      used += b;
      peak = std::max(peak, used);
    }
    CAPTURE(d);
    CHECK(peak <= capacity);
    CHECK(peak == doctest::Approx(s.r().decode_workers()[size_t(d)].kv_peak_bytes).epsilon(1e-12));
    CHECK(s.r().decode_workers()[size_t(d)].peak_batch <= most);
  }
}

TEST_CASE("sim: max_decode_seqs caps the decode batch")
{
  SmallRun s = run_small({{"serving.max_decode_seqs", "3"}, {"workload.measured_requests", "150"}});
  check_invariants(s);
  int peak = 0;
  for (const auto& c : s.r().decode_workers())
    peak = std::max(peak, c.peak_batch);
  CHECK(peak == 3);
  for (const auto& st : s.r().steps())
    CHECK(st.batch <= 3);
}

TEST_CASE("sim: without warm-up drain the measured phase starts at the last warm-up arrival")
{
  SmallRun s = run_small({{"workload.drain_after_warmup", "false"}, {"workload.warmup_requests", "200"}});
  check_invariants(s);
  CHECK(s.r().measured_start_s > 0);
}

TEST_CASE("sim: gpt-oss-120b (sliding window and 64-token KV blocks) on an 8P8D layout")
{
  SmallRun s = run_small({{"model", "gpt-oss-120b"},
                          {"topology.decode.instances", "8"},
                          {"topology.decode.nodes", "[3]"},
                          {"router", "jsq"}});
  check_invariants(s);
  for (const auto& q : s.r().requests())
    CHECK((q.decode_worker >= 0 && q.decode_worker < 8));
  CHECK(s.x.topology.decode.gpus.front() == std::vector<int>{24});
}

TEST_CASE("sim: prefill and decode on one node hand KV over xGMI")
{
  SmallRun s = run_small({{"topology.prefill.instances", "4"},
                          {"topology.decode.instances", "4"},
                          {"topology.decode.nodes", "[0]"},
                          {"workload.rate_rps", "10"},
                          {"workload.measured_requests", "100"}});
  check_invariants(s);  // checks KV times against xGMI latency + bytes / 64 GB/s
  // An uncontended transfer takes exactly latency + bytes / bandwidth: at 10 req/s most do.
  long exact = 0;
  for (const Request& r : s.w.requests) {
    const auto& q = s.r().requests()[r.id];
    double b      = double(r.prompt_tokens) * 98304;
    double alone  = 1e-6 + b / 64e9;
    exact += std::abs((q.kv_end_s - q.kv_start_s) - alone) < 1e-9 * alone + 1e-12;
  }
  CHECK(exact > 50);
}

TEST_CASE("sim: an uncontended inter-node KV transfer takes 5 us + bytes / 50 GB/s")
{
  SmallRun s = run_small({{"workload.rate_rps", "5"}, {"workload.measured_requests", "100"}});
  check_invariants(s);
  long exact = 0;
  for (const Request& r : s.w.requests) {
    const auto& q = s.r().requests()[r.id];
    double alone  = 5e-6 + double(r.prompt_tokens) * 98304 / 50e9;
    exact += std::abs((q.kv_end_s - q.kv_start_s) - alone) < 1e-9 * alone;
  }
  CHECK(exact > 100);
}

TEST_CASE("sim: step time is linear in distinct experts and context as the cost model says")
{
  SmallRun s = run_small({{"router", "random"}, {"workload.rate_rps", "80"}});
  check_invariants(s);
  // Least squares fit of duration = c0 + c1 * distinct_mean + c2 * context_tokens over all steps.
  // All batches are far below the ~296 sequences where dense layers turn compute bound, so the
  // step is memory bound: no batch-size term.
  double A[3][3] = {}, y[3] = {};
  for (const StepRecord& st : s.r().steps()) {
    REQUIRE(st.batch < 296);
    const double f[3] = {1.0, double(st.distinct_mean), st.context_tokens};
    for (int i = 0; i < 3; ++i) {
      y[i] += f[i] * st.duration_s;
      for (int j = 0; j < 3; ++j)
        A[i][j] += f[i] * f[j];
    }
  }
  // Gaussian elimination (3x3, well conditioned after scaling by the data).
  double c[3];
  for (int i = 0; i < 3; ++i)
    for (int k = i + 1; k < 3; ++k) {
      double m = A[k][i] / A[i][i];
      for (int j = i; j < 3; ++j)
        A[k][j] -= m * A[i][j];
      y[k] -= m * y[i];
    }
  for (int i = 2; i >= 0; --i) {
    double v = y[i];
    for (int j = i + 1; j < 3; ++j)
      v -= A[i][j] * c[j];
    c[i] = v / A[i][i];
  }
  // By hand from models/qwen3-30b-a3b.json and models/hardware/mi300x.json (sizes from the public
  // config and data sheet; efficiency and overhead are the fitted calibration, read from the file):
  //   achieved bandwidth bw = 5.3e12 B/s x decode_bw_efficiency; one expert read e = 9.44e6 / bw
  //   c1: one more distinct expert on each of 48 layers = 48 e
  //   c2: one more context token = 98304 B / bw
  //   c0: step overhead + LM head 0.622e9 / bw + 48 layers x (38.3e6 / bw + a),
  //       with the MoE overhead a = e (128 - 4.7 x 16) / (4.7 - 1) = 14.270 e
  const Calibration& cal = s.x.calibration;
  const double bw = 5.3e12 * cal.decode_bw_efficiency, e = 9.44e6 / bw;
  const double a = e * (128 - 4.7 * 16) / 3.7;
  CHECK(c[1] == doctest::Approx(48 * e).epsilon(1e-4));
  CHECK(c[2] == doctest::Approx(98304 / bw).epsilon(1e-3));
  CHECK(c[0] == doctest::Approx(cal.step_overhead_s + 0.622e9 / bw + 48 * (38.3e6 / bw + a)).epsilon(1e-4));
  CHECK(c[1] > 0);

  // Directly: among steps of the same batch size, the one with more distinct experts per layer is
  // slower unless it has much less context.
  long inversions = 0, pairs = 0;
  const auto& steps = s.r().steps();
  for (size_t i = 0; i + 1 < steps.size() && pairs < 20000; ++i)
    for (size_t j = i + 1; j < std::min(steps.size(), i + 40); ++j) {
      const auto &p = steps[i], &q = steps[j];
      if (p.batch != q.batch || std::abs(p.context_tokens - q.context_tokens) > 0.01 * p.context_tokens ||
          std::abs(p.distinct_mean - q.distinct_mean) < 1.0f)
        continue;
      ++pairs;
      inversions += (p.distinct_mean > q.distinct_mean) != (p.duration_s > q.duration_s);
    }
  CHECK(pairs > 10);
  CHECK(inversions == 0);
}

TEST_CASE("sim: gpt-oss-120b decode steps read only the window on sliding layers")
{
  SmallRun s = run_small({{"model", "gpt-oss-120b"}, {"router", "jsq"}, {"workload.rate_rps", "80"}});
  check_invariants(s);
  // By hand from models/gpt-oss-120b.json and models/hardware/mi300x.json, memory-bound steps
  // (decode_bw_efficiency and step_overhead are the fitted calibration, read from the file):
  //   bw = 5.3e12 B/s x decode_bw_efficiency; one expert read e = 13.2e6 / bw; MoE overhead a = e (128 - 4.7 x 16)
  //   / 3.7 t = step overhead + 1.158e9 / bw + 36 (53.8e6 / bw + a) + 36 e x distinct_mean
  //       + 73728 B x (0.5 x context + 0.5 x sum of min(context, 128)) / bw
  const Calibration& cal = s.x.calibration;
  const double bw = 5.3e12 * cal.decode_bw_efficiency, e = 13.2e6 / bw, a = e * (128 - 4.7 * 16) / 3.7;
  const double c0 = cal.step_overhead_s + 1.158e9 / bw + 36 * (53.8e6 / bw + a);
  auto rebuilt    = rebuild_steps(s);
  long bad = 0, long_contexts = 0;
  for (const StepRecord& st : s.r().steps()) {
    REQUIRE(st.batch < 150);  // far from compute bound
    const RebuiltStep& b = rebuilt[&st];
    long_contexts += b.context > b.windowed;
    const double want = c0 + 36 * e * double(st.distinct_mean) + 73728 * (0.5 * b.context + 0.5 * b.windowed) / bw;
    bad += std::abs(st.duration_s - want) > 1e-6 * want;
  }
  CHECK(long_contexts > 100);  // the window matters in most steps
  CHECK(bad == 0);
}

TEST_CASE("sim: the same seed gives byte-identical results in-process and through the CLI")
{
  const std::vector<Override> extra = {{"router", "jsq"}, {"seed", "17"}};
  SmallRun s                        = run_small(extra);
  check_invariants(s);
  ScratchDir dir("determinism");
  const auto lib = dir.dir / "lib";
  const auto cli = dir.dir / "cli";
  write_results(lib.string(), s.x, s.w, s.r());

  std::string cmd = shell_quote(ELDRSIM_PATH) + " run configs/default.json -q --out " + shell_quote(cli.string());
  for (const auto& [k, v] : small_overrides(extra))
    cmd += " --set " + shell_quote(k + "=" + v);
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);

  const std::string a = slurp_result(lib / "summary.json"), b = slurp_result(cli / "summary.json");
  REQUIRE(!a.empty());
  CHECK(a == b);
  CHECK(slurp(lib / "requests.csv") == slurp(cli / "requests.csv"));

  // A different seed gives different results.
  std::string other = shell_quote(ELDRSIM_PATH) + " run configs/default.json -q --seed 18 --out " +
                      shell_quote((dir.dir / "other").string());
  for (const auto& [k, v] : small_overrides({{"router", "jsq"}}))
    other += " --set " + shell_quote(k + "=" + v);
  REQUIRE(std::system(other.c_str()) == 0);
  CHECK(slurp_result(dir.dir / "other" / "summary.json") != a);

  // The summary is valid JSON carrying the resolved config and the per-worker counters.
  Json j = Json::parse(a);
  CHECK(j["requests"] == 300);
  CHECK(j["unfinished"] == 0);
  CHECK(j["router"] == "jsq");
  CHECK(j["seed"] == 17);
  CHECK(j["config"]["workload"]["warmup_requests"] == 50);
  CHECK(j["decode_workers"].size() == 16);
}

TEST_CASE("simulation: far beyond capacity, a run stops at its horizon and reports where requests were")
{
  // 20,000 req/s for 2 simulated seconds: queues explode, the run must still end on time.
  SmallRun s           = run_small({{"workload.rate_rps", "20000"},
                                    {"workload.measured_requests", "40000"},
                                    {"workload.warmup_requests", "0"},
                                    {"workload.horizon_s", "2"}});
  const RunRecorder& r = s.r();
  CHECK(r.stopped_at_horizon);
  CHECK(r.end_s == doctest::Approx(r.measured_start_s + 2).epsilon(1e-9));
  long unfinished = 0;
  for (const RequestRecord& q : r.requests())
    unfinished += q.finish_count == 0;
  CHECK(unfinished > 30000);
  CHECK(r.left_unarrived + r.left_in_prefill + r.left_in_transfer + r.left_waiting + r.left_decoding == unfinished);
  CHECK(r.left_unarrived == 0);  // all 40,000 arrive within the 2 s
  CHECK(r.left_in_prefill > 0);
  CHECK(check_run_invariants(s.x, s.w, r, true) == std::nullopt);
  for (const WorkerCounters& c : r.decode_workers())
    CHECK(c.kv_peak_bytes <= c.kv_capacity_bytes);
}

namespace {

// Runs `config` with `extra` one sleep per step (decode_block_steps = 1, in-process) and with the
// default blocks (through the CLI): every step record, request timestamp and summary value must be
// the same bytes.
void check_blocks_match_single_steps(const std::string& config, const std::vector<Override>& extra)
{
  REQUIRE(SimulationOptions{}.decode_block_steps > 1);
  Experiment x    = load_experiment(config, small_overrides(extra));
  Workload w      = make_workload(x);
  auto src        = make_gating_source(x, w);
  RunRecorder rec = run_simulation(x, w, *src, {.decode_block_steps = 1});
  ScratchDir dir("blocks");
  write_results((dir.dir / "one").string(), x, w, rec);

  std::string cmd = shell_quote(ELDRSIM_PATH) + " run " + shell_quote(config) + " -q --out " +
                    shell_quote((dir.dir / "blocks").string());
  for (const auto& [k, v] : small_overrides(extra))
    cmd += " --set " + shell_quote(k + "=" + v);
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
  for (const char* f : {"steps.csv", "requests.csv", "summary.json"}) {
    INFO(f);
    const std::string one = slurp_result(dir.dir / "one" / f);
    REQUIRE(!one.empty());
    CHECK(one == slurp_result(dir.dir / "blocks" / f));
  }
  long steps = 0;
  for (const auto& c : rec.decode_workers())
    steps += c.steps;
  CHECK(steps == long(rec.steps().size()));
}

}  // namespace

TEST_CASE("sim: decode workers sleeping through several steps record what one sleep per step records")
{
  // DecodeWorker plans the steps up to the next finish and sleeps through them at once, woken by KV
  // arrivals. jsq reads the in-flight counts that finishes change; 100 req/s makes arrivals
  // interrupt blocks. (The one allowed difference, a step end within SimGrid's 1 ns timing precision
  // after another event, which SimGrid moves to that event when it sleeps step by step, does not
  // occur in this run: see DecodeWorker.)
  check_blocks_match_single_steps("configs/default.json",
                                  {{"router", "jsq"}, {"workload.rate_rps", "100"}, {"output.steps_csv", "true"}});
}

TEST_CASE("sim: expert-parallel decode workers sleeping through several steps record what one sleep per step records")
{
  // The same on TP4 + EP4 instances (configs/tpep.json): the per-rank counts and all-to-all messages
  // accumulated in the plan's ring must equal those of one step at a time.
  check_blocks_match_single_steps("configs/tpep.json", {{"router", "domain"},
                                                        {"topology.decode.placement", "cluster_balanced"},
                                                        {"workload.rate_rps", "40"},
                                                        {"output.steps_csv", "true"}});
}

TEST_CASE("sim: EPLB decode workers sleeping through several steps record what one sleep per step records")
{
  // A rearrangement ends a block; while weights move the worker plans one step at a time, and a new
  // placement plans the steps ahead again: the records must be those of one step at a time.
  check_blocks_match_single_steps("configs/tpep.json", {{"workload.rate_rps", "40"},
                                                        {"output.steps_csv", "true"},
                                                        {"eplb.num_redundant_experts", "8"},
                                                        {"eplb.step_interval", "40"},
                                                        {"eplb.window_size", "20"}});
}
