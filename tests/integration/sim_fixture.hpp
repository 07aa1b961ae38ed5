#pragma once
// Helpers of the integration tests: a small simulation of configs/default.json, and the invariants
// every finished run must satisfy. SimGrid allows one Engine per process: call run_small() at most
// once per TEST_CASE (ctest runs every test case in its own process).
#include "sim/cluster/simulation.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/metrics/run_recorder.hpp"
#include "sim/workload/workload_factory.hpp"
#include "tests/support/scratch_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace eldr::test {

struct SmallRun {
  Experiment x;
  Workload w;
  std::optional<RunRecorder> rec;
  const RunRecorder& r() const { return *rec; }
};

// 300 measured requests after 50 warm-up ones, plus `extra` overrides (applied after, so they win).
inline std::vector<Override> small_overrides(const std::vector<Override>& extra = {})
{
  std::vector<Override> o = {{"workload.measured_requests", "300"}, {"workload.warmup_requests", "50"}};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

inline SmallRun run_small(const std::vector<Override>& extra = {}, const std::string& config = "configs/default.json")
{
  SmallRun s;
  s.x      = load_experiment(config, small_overrides(extra));
  s.w      = make_workload(s.x);
  auto src = make_gating_source(s.x, s.w);
  s.rec.emplace(run_simulation(s.x, s.w, *src));
  return s;
}

// KV bytes a decode worker reserves for a request: whole blocks of prompt + output tokens.
inline double reserved_bytes(const Experiment& x, const Request& r)
{
  const int block  = x.model.kv_block_tokens;
  const int tokens = r.prompt_tokens + r.output_tokens;
  const int blocks = (tokens + block - 1) / block;
  return double(blocks) * block * x.model.kv_bytes_per_token;
}

inline int node_of(const Experiment& x, int gpu)
{
  return gpu / x.cluster.gpus_per_node;
}

// Load of each decode worker just before request `r` was routed: requests routed earlier (by routing
// time, then by id: a prefill batch hands off in queue order) that had not finished yet.
inline std::vector<int> loads_before(const SmallRun& s, const Request& r)
{
  const auto& recs = s.r().requests();
  const double t   = recs[r.id].kv_start_s;
  std::vector<int> load(size_t(s.x.topology.decode.instances), 0);
  for (const Request& q : s.w.requests) {
    const RequestRecord& o = recs[q.id];
    const bool earlier     = o.kv_start_s < t || (o.kv_start_s == t && q.id < r.id);
    if (earlier && o.finish_s > t)
      ++load[size_t(o.decode_worker)];
  }
  return load;
}

// Decision order: routing time, then id.
inline std::vector<const Request*> in_routing_order(const SmallRun& s)
{
  std::vector<const Request*> order;
  for (const Request& r : s.w.requests)
    order.push_back(&r);
  const auto& recs = s.r().requests();
  std::sort(order.begin(), order.end(), [&](const Request* a, const Request* b) {
    const double ta = recs[a->id].kv_start_s, tb = recs[b->id].kv_start_s;
    return ta != tb ? ta < tb : a->id < b->id;
  });
  return order;
}

struct RebuiltStep {
  long batch      = 0;
  double context  = 0;  // sum of the batch's context lengths
  double windowed = 0;  // sum of min(context, sliding window) (= context without a window)
};

// Each decode step's batch and context, rebuilt from the request records alone: a request admitted
// at or before a step's start and finishing after it is in that step's batch; at its k-th step
// (k = 0, 1, ...) it holds its prompt, the first token from prefill and k decoded tokens, so its
// context is prompt + 1 + k.
inline std::map<const StepRecord*, RebuiltStep> rebuild_steps(const SmallRun& s)
{
  std::map<int, std::vector<const StepRecord*>> by_worker;
  for (const StepRecord& st : s.r().steps())
    by_worker[st.worker].push_back(&st);
  for (auto& [worker, list] : by_worker)
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
  const int window = s.x.model.sliding_window;
  std::map<const StepRecord*, RebuiltStep> out;
  for (const Request& r : s.w.requests) {
    const RequestRecord& q = s.r().requests()[r.id];
    auto it                = by_worker.find(q.decode_worker);
    if (it == by_worker.end())
      continue;
    const auto& list = it->second;
    auto first       = std::lower_bound(list.begin(), list.end(), q.decode_admit_s,
                                        [](const StepRecord* st, double t) { return st->start_s < t; });
    long k           = 0;
    for (auto st = first; st != list.end() && (*st)->start_s < q.finish_s; ++st, ++k) {
      RebuiltStep& b       = out[*st];
      const double context = double(r.prompt_tokens + 1 + k);
      ++b.batch;
      b.context += context;
      b.windowed += window > 0 ? std::min(context, double(window)) : context;
    }
  }
  return out;
}

// Everything that must hold for any finished run.
inline void check_invariants(const SmallRun& s)
{
  const Experiment& x   = s.x;
  const Workload& w     = s.w;
  const RunRecorder& rc = s.r();
  const auto& recs      = rc.requests();
  const int P           = x.topology.prefill.instances;
  const int D           = x.topology.decode.instances;
  REQUIRE(recs.size() == w.requests.size());
  REQUIRE(rc.decode_workers().size() == size_t(D));
  // Every request is counted once in its decode worker's label mix, under its own label.
  {
    std::vector<long> by_label(w.labels.size(), 0), mixed(w.labels.size(), 0);
    for (const Request& r : w.requests)
      ++by_label[r.label];
    for (const auto& c : rc.decode_workers())
      for (size_t l = 0; l < c.label_requests.size(); ++l)
        mixed[l] += c.label_requests[l];
    CHECK(mixed == by_label);
  }

  long bad_finish = 0, bad_tokens = 0, bad_order = 0, bad_workers = 0, bad_arrival = 0, bad_kv_time = 0;
  long bad_prefill_time     = 0;
  long total_output         = 0;
  double warmup_last_finish = 0, last_finish = 0, last_warmup_arrival = 0;
  std::vector<double> kv_expected(size_t(D), 0);
  for (const Request& r : w.requests) {
    const RequestRecord& q = recs[r.id];
    bad_finish += q.finish_count != 1;
    bad_tokens += q.tokens_generated != r.output_tokens;
    total_output += r.output_tokens;
    // Lifecycle order (NaN compares false, so an unset timestamp fails too).
    const bool ordered = q.arrival_s <= q.prefill_start_s && q.prefill_start_s <= q.first_token_s &&
                         q.first_token_s <= q.kv_start_s && q.kv_start_s <= q.kv_end_s &&
                         q.kv_end_s <= q.decode_admit_s && q.decode_admit_s <= q.finish_s;
    bad_order += !ordered;
    bad_workers += !(q.prefill_worker >= 0 && q.prefill_worker < P && q.decode_worker >= 0 && q.decode_worker < D);
    if (q.decode_worker >= 0 && q.decode_worker < D)
      kv_expected[size_t(q.decode_worker)] +=
          double(r.prompt_tokens - q.decode_cached_tokens) * x.model.kv_bytes_per_token;
    // Arrivals happen exactly when the workload says: warm-up from 0, measured from the measured start.
    const double want = r.measured ? rc.measured_start_s + r.arrival_s : r.arrival_s;
    bad_arrival += std::abs(q.arrival_s - want) > 1e-9 * std::max(1.0, want);
    if (!r.measured) {
      warmup_last_finish  = std::max(warmup_last_finish, q.finish_s);
      last_warmup_arrival = std::max(last_warmup_arrival, q.arrival_s);
    }
    last_finish = std::max(last_finish, q.finish_s);
    // The KV transfer can be slowed by contention, never sped up: at least latency + bytes / bandwidth
    // of the path between the two GPUs.
    if (q.prefill_worker >= 0 && q.decode_worker >= 0 && q.prefill_worker < P && q.decode_worker < D) {
      const int src = x.topology.prefill.gpus[size_t(q.prefill_worker)].front();
      const int dst = x.topology.decode.gpus[size_t(q.decode_worker)].front();
      // A decode instance of g GPUs receives g flows of b / g in parallel.
      const double b = double(r.prompt_tokens - q.decode_cached_tokens) * x.model.kv_bytes_per_token /
                       x.topology.decode.gpus_per_instance;
      const bool local = node_of(x, src) == node_of(x, dst);
      const double fast =
          local ? x.cluster.xgmi_latency_s + b / x.cluster.xgmi_bandwidth_Bps
                : 2 * x.cluster.nic_latency_s + x.cluster.switch_latency_s + b / x.cluster.nic_bandwidth_Bps;
      bad_kv_time += (q.kv_end_s - q.kv_start_s) < fast * (1 - 1e-9);
    }
    // A prefill batch costs at least the fixed per-batch overhead.
    bad_prefill_time += (q.first_token_s - q.prefill_start_s) < x.calibration.prefill_overhead_s * (1 - 1e-12);
  }
  CHECK(bad_finish == 0);
  CHECK(bad_tokens == 0);
  CHECK(bad_order == 0);
  CHECK(bad_workers == 0);
  CHECK(bad_arrival == 0);
  CHECK(bad_kv_time == 0);
  CHECK(bad_prefill_time == 0);

  // Tokens: the prefill worker samples each request's first token, decode steps the rest.
  long decode_tokens = 0, steps = 0;
  double kv_capacity = x.topology.decode.gpus_per_instance * x.hardware.hbm_bytes * x.serving.kv_memory_fraction -
                       x.model.weight_bytes();
  for (int d = 0; d < D; ++d) {
    const WorkerCounters& c = rc.decode_workers()[size_t(d)];
    decode_tokens += c.tokens;
    steps += c.steps;
    CAPTURE(d);
    CHECK(c.kv_received_bytes == doctest::Approx(kv_expected[size_t(d)]).epsilon(1e-12));
    CHECK(c.kv_capacity_bytes == doctest::Approx(kv_capacity).epsilon(1e-12));
    CHECK(c.kv_peak_bytes <= c.kv_capacity_bytes);
    CHECK(c.peak_batch <= x.serving.max_decode_seqs);
  }
  CHECK(decode_tokens + long(w.requests.size()) == total_output);
  double kv_total = 0, kv_want = 0;
  for (int d = 0; d < D; ++d) {
    kv_total += rc.decode_workers()[size_t(d)].kv_received_bytes;
    kv_want += kv_expected[size_t(d)];
  }
  // KV conservation: every prompt token's KV reaches its decode worker, by transfer or because the
  // worker held the block already (prefix caching), and only whole cached blocks are skipped.
  long prompt_tokens = 0, bad_cached = 0;
  const int block = x.model.kv_block_tokens;
  for (const Request& r : w.requests) {
    const RequestRecord& q = recs[r.id];
    prompt_tokens += r.prompt_tokens - q.decode_cached_tokens;
    bad_cached += q.decode_cached_tokens % block != 0 || q.decode_cached_tokens > r.prompt_tokens / block * block ||
                  q.prefill_cached_tokens % block != 0 || q.prefill_cached_tokens >= r.prompt_tokens ||
                  (!x.serving.prefix_cache && (q.decode_cached_tokens != 0 || q.prefill_cached_tokens != 0));
  }
  CHECK(bad_cached == 0);
  for (const auto& caches : {rc.prefill_caches, rc.decode_caches})
    for (const CacheCounters& c : caches)
      CHECK(c.peak_used_blocks <= c.capacity_blocks);
  CHECK(kv_total == doctest::Approx(double(prompt_tokens) * x.model.kv_bytes_per_token).epsilon(1e-12));

  // Steps: one record per step, per worker back to back without overlap, batch within limits, and
  // distinct experts between top_k and min(experts, batch x top_k).
  REQUIRE(long(rc.steps().size()) == steps);
  std::map<int, std::vector<const StepRecord*>> by_worker;
  long bad_step = 0, step_tokens = 0;
  for (const StepRecord& st : rc.steps()) {
    by_worker[st.worker].push_back(&st);
    step_tokens += st.batch;
    const double hi = std::min<double>(x.model.experts, double(st.batch) * x.model.top_k);
    bad_step += !(st.batch >= 1 && int(st.batch) <= x.serving.max_decode_seqs && st.duration_s > 0 &&
                  st.distinct_mean >= float(x.model.top_k) - 1e-4f && st.distinct_mean <= float(hi) + 1e-4f);
  }
  CHECK(bad_step == 0);
  CHECK(step_tokens == decode_tokens);
  long overlaps = 0;
  std::string first_overlap;
  for (auto& [worker, list] : by_worker) {
    std::sort(list.begin(), list.end(), [](auto* a, auto* b) { return a->start_s < b->start_s; });
    for (size_t i = 1; i < list.size(); ++i) {
      const StepRecord &p = *list[i - 1], &n = *list[i];
      // SimGrid ends a sleep within its timing precision (precision/timing, 1e-9 s by default), so a
      // step may end a fraction of a nanosecond before start + duration.
      if (n.start_s < p.start_s + p.duration_s - 1e-8) {
        if (overlaps++ == 0) {
          char buf[256];
          std::snprintf(buf, sizeof buf, "worker %d: step at %.17g (batch %u) starts before %.17g + %.17g (batch %u)",
                        worker, n.start_s, n.batch, p.start_s, p.duration_s, p.batch);
          first_overlap = buf;
        }
      }
    }
  }
  INFO(first_overlap);
  CHECK(overlaps == 0);

  // Continuous batching: a request is in exactly output_tokens - 1 steps of its worker, from its
  // admission to its finish, and its finish is the end of the last one.
  long bad_steps_per_request = 0;
  for (const Request& r : w.requests) {
    const RequestRecord& q = recs[r.id];
    auto it                = by_worker.find(q.decode_worker);
    if (it == by_worker.end()) {
      ++bad_steps_per_request;
      continue;
    }
    const auto& list = it->second;
    auto first       = std::lower_bound(list.begin(), list.end(), q.decode_admit_s,
                                        [](const StepRecord* st, double t) { return st->start_s < t; });
    auto last        = std::lower_bound(list.begin(), list.end(), q.finish_s,
                                        [](const StepRecord* st, double t) { return st->start_s < t; });
    const long n     = long(last - first);
    bool ok          = n == r.output_tokens - 1;
    if (ok && n > 0) {
      const StepRecord* end = *(last - 1);
      ok = std::abs(end->start_s + end->duration_s - q.finish_s) <= 1e-8;  // SimGrid timing precision
    }
    bad_steps_per_request += !ok;
  }
  CHECK(bad_steps_per_request == 0);

  // Rebuild every step's batch and context from the request records (see rebuild_steps).
  auto rebuilt   = rebuild_steps(s);
  long bad_batch = 0, bad_context = 0;
  for (const StepRecord& st : rc.steps()) {
    auto it                = rebuilt.find(&st);
    const RebuiltStep want = it == rebuilt.end() ? RebuiltStep{} : it->second;
    bad_batch += want.batch != long(st.batch);
    bad_context += std::abs(want.context - st.context_tokens) > 0.5;
  }
  CHECK(bad_batch == 0);
  CHECK(bad_context == 0);

  // Phases: with drain_after_warmup the measured phase starts after the last warm-up request finished;
  // without, right after the last warm-up arrival. The run ends with the last finish.
  if (x.workload.warmup_requests > 0) {
    if (x.workload.drain_after_warmup)
      CHECK(rc.measured_start_s >= warmup_last_finish);
    else
      CHECK(rc.measured_start_s == doctest::Approx(last_warmup_arrival).epsilon(1e-12));
  }
  CHECK(rc.end_s == doctest::Approx(last_finish).epsilon(1e-12));
}

}  // namespace eldr::test
