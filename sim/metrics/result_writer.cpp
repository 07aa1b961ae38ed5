#include "sim/metrics/result_writer.hpp"
#include "sim/cache/cached_profile.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/build_id.hpp"
#include "sim/common/csv.hpp"
#include "sim/common/result_dir.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

namespace eldr {

RunSummary summarize_run(const Experiment& x, const Workload& w, const RunRecorder& rec)
{
  RunSummary s;
  s.router = x.router;
  std::vector<double> tpot, ttft, e2e;
  double first_arrival = INFINITY, last_finish = -INFINITY;
  long tokens   = 0;
  double prompt = 0, prefill_cached = 0, decode_cached = 0;
  for (const Request& r : w.requests) {
    if (!r.measured)
      continue;
    ++s.measured;
    const RequestRecord& q = rec.requests()[r.id];
    prompt += r.prompt_tokens;
    prefill_cached += q.prefill_cached_tokens;
    decode_cached += q.decode_cached_tokens;
    first_arrival = std::min(first_arrival, q.arrival_s);
    if (q.finish_count != 1) {
      ++s.unfinished;
      continue;
    }
    last_finish = std::max(last_finish, q.finish_s);
    tokens += q.tokens_generated;
    double ttft_s = q.first_token_s - q.arrival_s;
    double e2e_s  = q.finish_s - q.arrival_s;
    ttft.push_back(ttft_s * 1e3);
    e2e.push_back(e2e_s * 1e3);
    tpot.push_back((e2e_s - ttft_s) / double(r.output_tokens - 1) * 1e3);
  }
  if (prompt > 0) {
    s.prefill_token_hit_rate = prefill_cached / prompt;
    s.decode_token_hit_rate  = decode_cached / prompt;
  }
  s.tpot_ms = summarize(std::move(tpot));
  s.ttft_ms = summarize(std::move(ttft));
  s.e2e_ms  = summarize(std::move(e2e));
  if (last_finish > first_arrival) {
    s.measured_span_s  = last_finish - first_arrival;
    s.throughput_tok_s = double(tokens) / s.measured_span_s;
  }
  double sum_distinct = 0, sum_batch = 0, sum_imbalance = 0, sum_a2a = 0;
  for (const StepRecord& st : rec.steps())
    if (st.start_s >= first_arrival && st.start_s <= last_finish) {
      ++s.decode_steps;
      sum_distinct += st.distinct_mean;
      sum_batch += st.batch;
      sum_imbalance += st.rank_imbalance;
      sum_a2a += st.all_to_all_s;
    }
  if (s.decode_steps > 0) {
    s.distinct_experts_per_layer_mean = sum_distinct / double(s.decode_steps);
    s.decode_batch_mean               = sum_batch / double(s.decode_steps);
    s.rank_imbalance_mean             = sum_imbalance / double(s.decode_steps);
    s.all_to_all_ms_mean              = sum_a2a / double(s.decode_steps) * 1e3;
  }
  s.sim_time_s = rec.end_s;
  return s;
}

static Json percentiles_json(const Percentiles& p)
{
  Json j = Json::object();
  if (p.count == 0) {
    for (const char* k : {"p50", "p90", "p95", "p99", "mean"})
      j[k] = nullptr;
    return j;
  }
  j["p50"]  = p.p50;
  j["p90"]  = p.p90;
  j["p95"]  = p.p95;
  j["p99"]  = p.p99;
  j["mean"] = p.mean;
  return j;
}

// A statistic of no data is missing (null), never 0.
static Json value_or_null(bool present, double v)
{
  return present ? Json(v) : Json(nullptr);
}

static Json cache_workers_json(const std::vector<CacheCounters>& caches)
{
  Json a = Json::array();
  for (const CacheCounters& c : caches) {
    const long looked = c.hit_blocks + c.missed_blocks;
    a.push_back({{"capacity_blocks", c.capacity_blocks},
                 {"lookups", c.lookups},
                 {"hit_blocks", c.hit_blocks},
                 {"missed_blocks", c.missed_blocks},
                 {"block_hit_rate", value_or_null(looked > 0, double(c.hit_blocks) / double(std::max(1L, looked)))},
                 {"evictions", c.evictions},
                 {"peak_used_blocks", c.peak_used_blocks}});
  }
  return a;
}

// eplb: the section's values, what the rearrangements moved, and the token-load balance over the
// ranks (max over mean of the picks, per step and layer, summed) before and after a new placement.
static Json eplb_json(const EplbSpec& e, const EplbCounters& c)
{
  auto ratio = [&](int i) { return value_or_null(c.mean_picks[i] > 0, c.max_picks[i] / c.mean_picks[i]); };
  return {{"num_redundant_experts", e.redundant},
          {"window_size", e.window_size},
          {"step_interval", e.step_interval},
          {"policy", to_string(e.policy)},
          {"rearrangements", c.rearrangements},
          {"experts_moved", c.experts_moved},
          {"bytes_moved", c.bytes_moved},
          {"transfer_s", c.transfer_s},
          {"steps_initial_placement", c.steps[0]},
          {"steps_rebalanced", c.steps[1]},
          {"rank_load_max_over_mean_initial", ratio(0)},
          {"rank_load_max_over_mean_rebalanced", ratio(1)}};
}

// What prefix caching did, and what the signature cache (per-block expert counts, cache/cached_profile.hpp)
// costs or would cost: an int8 count per (layer, expert) for every cached KV block of a prefill worker.
static Json prefix_cache_json(const Experiment& x, const RunSummary& s, const RunRecorder& rec)
{
  const double block_bytes     = x.model.kv_reserved_bytes(1);  // one whole block
  const double signature_bytes = signature_block_bytes(x.model.layers, x.model.experts);
  long peak_blocks = 0, capacity_blocks = 0;
  for (const CacheCounters& c : rec.prefill_caches) {
    peak_blocks += c.peak_used_blocks;
    capacity_blocks += c.capacity_blocks;
  }
  const double hbm = x.hardware.hbm_bytes * double(std::max<size_t>(1, rec.prefill_caches.size()));
  Json j;
  j["block_tokens"]           = x.model.kv_block_tokens;
  j["kv_block_bytes"]         = block_bytes;
  j["prefill_token_hit_rate"] = s.prefill_token_hit_rate;
  j["decode_token_hit_rate"]  = s.decode_token_hit_rate;
  j["prefill_workers"]        = cache_workers_json(rec.prefill_caches);
  j["decode_workers"]         = cache_workers_json(rec.decode_caches);
  j["signature_cache"]        = {{"enabled", rec.signature_cache},
                                 {"bytes_per_block", signature_bytes},
                                 {"share_of_kv_block", signature_bytes / block_bytes},
                                 {"peak_bytes_all_prefill_workers", double(peak_blocks) * signature_bytes},
                                 {"peak_share_of_hbm", double(peak_blocks) * signature_bytes / hbm},
                                 // when the whole KV memory holds cached blocks
                                 {"full_cache_share_of_hbm", double(capacity_blocks) * signature_bytes / hbm}};
  return j;
}

Json summary_json(const Experiment& x, const RunSummary& s, const RunRecorder& rec,
                  const std::vector<std::string>& labels)
{
  // nlohmann::json keeps keys sorted: stable, byte-identical output for identical runs.
  Json j;
  j["router"]                          = s.router;
  j["model"]                           = x.model.name;
  j["hardware"]                        = x.hardware.name;
  j["rate_rps"]                        = x.workload.rate_rps;
  j["seed"]                            = x.seed;
  j["prefill_instances"]               = x.topology.prefill.instances;
  j["decode_instances"]                = x.topology.decode.instances;
  j["requests"]                        = s.measured;
  j["unfinished"]                      = s.unfinished;
  j["tpot_ms"]                         = percentiles_json(s.tpot_ms);
  j["ttft_ms"]                         = percentiles_json(s.ttft_ms);
  j["e2e_ms"]                          = percentiles_json(s.e2e_ms);
  const bool finished                  = s.tpot_ms.count > 0;
  const bool stepped                   = s.decode_steps > 0;
  j["throughput_tok_s"]                = value_or_null(finished, s.throughput_tok_s);
  j["distinct_experts_per_layer_mean"] = value_or_null(stepped, s.distinct_experts_per_layer_mean);
  j["expert_union"]                    = rec.expert_union;
  j["decode_batch_mean"]               = value_or_null(stepped, s.decode_batch_mean);
  j["decode_steps"]                    = s.decode_steps;
  if (rec.decode_expert_parallel > 1) {  // single-GPU summaries keep their bytes
    Json ep                   = Json::object();
    ep["expert_parallel"]     = rec.decode_expert_parallel;
    ep["placement"]           = std::string(to_string(x.topology.decode.placement));
    ep["rank_imbalance_mean"] = value_or_null(stepped, s.rank_imbalance_mean);
    ep["all_to_all_ms_mean"]  = value_or_null(stepped, s.all_to_all_ms_mean);
    if (!rec.placement_calibration_requests.empty())
      ep["placement_calibration_requests"] = rec.placement_calibration_requests;
    if (x.eplb.enabled)
      ep["eplb"] = eplb_json(x.eplb, rec.eplb);
    j["expert_parallel"] = ep;
  }
  j["measured_span_s"]  = value_or_null(finished, s.measured_span_s);
  j["measured_start_s"] = rec.measured_start_s;
  j["sim_time_s"]       = s.sim_time_s;
  Json workers          = Json::array();
  for (const WorkerCounters& c : rec.decode_workers()) {
    Json mix = Json::object();
    for (size_t l = 0; l < c.label_requests.size() && l < labels.size(); ++l)
      if (c.label_requests[l] > 0)
        mix[labels[l]] = c.label_requests[l];
    workers.push_back({{"kv_capacity_bytes", c.kv_capacity_bytes},
                       {"label_mix", mix},
                       {"kv_peak_bytes", c.kv_peak_bytes},
                       {"kv_received_bytes", c.kv_received_bytes},
                       {"tokens", c.tokens},
                       {"steps", c.steps},
                       {"peak_batch", c.peak_batch}});
  }
  j["decode_workers"] = workers;
  Json stats          = Json::object();
  for (const auto& [k, v] : rec.router_stats)
    stats[k] = v;
  j["router_stats"] = stats;
  if (x.serving.prefix_cache)
    j["prefix_cache"] = prefix_cache_json(x, s, rec);
  if (rec.stopped_at_horizon)
    j["stopped_at_horizon"] = {{"unarrived", rec.left_unarrived},
                               {"in_prefill", rec.left_in_prefill},
                               {"in_transfer", rec.left_in_transfer},
                               {"waiting_for_admission", rec.left_waiting},
                               {"decoding", rec.left_decoding}};
  j["config"] = x.resolved;
  j["build"]  = {{"version", eldrsim_version()}, {"build_id", executable_build_id()}};
  return j;
}

static void append_value(std::string& out, double v)
{
  // printf's %.9g, byte for byte (the standard defines to_chars with a precision so), without its
  // locale and varargs machinery: result writing was ~3% of a run.
  char buf[32];
  if (!std::isnan(v))
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9).ptr);
}

std::string requests_csv(const Workload& w, const RunRecorder& rec)
{
  std::string out = "id,label,measured,prompt_tokens,output_tokens,prefill_worker,decode_worker,arrival_s,"
                    "prefill_start_s,first_token_s,kv_start_s,kv_end_s,decode_admit_s,finish_s,ttft_ms,tpot_ms,"
                    "prefill_cached_tokens,decode_cached_tokens\n";
  out.reserve(w.requests.size() * 160);
  for (const Request& r : w.requests) {
    const RequestRecord& q = rec.requests()[r.id];
    out += std::to_string(r.id) + ",";
    csv_append_field(out, w.labels[r.label]);  // labels come from traces: any text
    out += std::string(",") + (r.measured ? "1" : "0") + "," + std::to_string(r.prompt_tokens) + "," +
           std::to_string(r.output_tokens) + "," + std::to_string(q.prefill_worker) + "," +
           std::to_string(q.decode_worker);
    for (double v :
         {q.arrival_s, q.prefill_start_s, q.first_token_s, q.kv_start_s, q.kv_end_s, q.decode_admit_s, q.finish_s}) {
      out += ",";
      append_value(out, v);
    }
    double ttft = (q.first_token_s - q.arrival_s) * 1e3;
    double tpot = (q.finish_s - q.first_token_s) / double(r.output_tokens - 1) * 1e3;
    out += ",";
    append_value(out, ttft);
    out += ",";
    append_value(out, q.finish_count == 1 ? tpot : kNotYet);
    out += "," + std::to_string(q.prefill_cached_tokens) + "," + std::to_string(q.decode_cached_tokens) + "\n";
  }
  return out;
}

std::string steps_csv(const RunRecorder& rec)
{
  // Expert-parallel runs append the per-rank imbalance and the all-to-all time (single-GPU files keep
  // their columns). expert_union says whether distinct_experts_mean counts a sampled union or is its
  // expectation (fractional).
  const bool ep   = rec.decode_expert_parallel > 1;
  std::string out = std::string("worker,start_s,duration_ms,batch,context_tokens,distinct_experts_mean,expert_union") +
                    (ep ? ",rank_imbalance,all_to_all_ms\n" : "\n");
  const std::string mode = "," + rec.expert_union;
  out.reserve(rec.steps().size() * 64);
  for (const StepRecord& s : rec.steps()) {
    out += std::to_string(s.worker) + ",";
    append_value(out, s.start_s);
    out += ",";
    append_value(out, s.duration_s * 1e3);
    out += "," + std::to_string(s.batch) + ",";
    append_value(out, s.context_tokens);
    out += ",";
    append_value(out, s.distinct_mean);
    out += mode;
    if (ep) {
      out += ",";
      append_value(out, s.rank_imbalance);
      out += ",";
      append_value(out, double(s.all_to_all_s) * 1e3);
    }
    out += "\n";
  }
  return out;
}

std::vector<TpotWindow> tpot_windows(const Workload& w, const RunRecorder& rec, double window_s)
{
  // Sparse: at a tiny rate the measured span holds millions of windows, nearly all empty.
  std::map<size_t, std::pair<std::vector<double>, long>> by_index;  // TPOTs, refits
  for (const Request& r : w.requests) {
    const RequestRecord& q = rec.requests()[r.id];
    if (!r.measured || q.finish_count != 1)
      continue;
    const double t = q.finish_s - rec.measured_start_s;
    const size_t i = size_t(std::max(0.0, std::floor(t / window_s)));
    by_index[i].first.push_back((q.finish_s - q.first_token_s) / double(r.output_tokens - 1) * 1e3);
  }
  // Refits up to the last window with a finished request (as when every window was listed).
  const size_t end = by_index.empty() ? 0 : by_index.rbegin()->first + 1;
  for (double t : rec.refit_times_s) {
    const double rel = t - rec.measured_start_s;
    if (rel >= 0 && rel / window_s < double(end))
      ++by_index[size_t(rel / window_s)].second;
  }
  std::vector<TpotWindow> out;
  out.reserve(by_index.size());
  for (auto& [i, v] : by_index) {
    TpotWindow& win = out.emplace_back();
    win.start_s     = double(i) * window_s;
    win.end_s       = double(i + 1) * window_s;
    win.requests    = long(v.first.size());
    win.refits      = v.second;
    if (!v.first.empty()) {
      Percentiles p = summarize(std::move(v.first));
      win.p50_ms    = p.p50;
      win.p99_ms    = p.p99;
    }
  }
  return out;
}

double measured_arrivals_end_s(const Workload& w, const RunRecorder& rec)
{
  double last = -INFINITY;
  for (const Request& r : w.requests)
    if (r.measured)
      last = std::max(last, rec.requests()[r.id].arrival_s - rec.measured_start_s);
  return last;
}

std::vector<ShiftRecovery> shift_recoveries(const Experiment& x, const std::vector<TpotWindow>& windows,
                                            double arrivals_end_s)
{
  std::vector<ShiftRecovery> shifts;
  for (const MixPhase& p : x.workload.mix_schedule)
    if (p.at_s > 0)  // the piece at 0 is the start, not a shift (calibration and warm-up use the base mix)
      shifts.push_back({p.at_s, "mix"});
  if (std::isfinite(x.workload.new_subtopics_after_s) && x.workload.new_subtopics_after_s > 0)
    shifts.push_back({x.workload.new_subtopics_after_s, "new_subtopics"});
  std::stable_sort(shifts.begin(), shifts.end(), [](const auto& a, const auto& b) { return a.at_s < b.at_s; });
  for (size_t k = 0; k < shifts.size(); ++k) {
    ShiftRecovery& sh = shifts[k];
    const double next = k + 1 < shifts.size() ? shifts[k + 1].at_s : INFINITY;
    auto usable = [&](const TpotWindow& v) { return v.requests >= kMinWindowRequests && v.end_s <= arrivals_end_s; };
    for (const TpotWindow& v : windows)
      if (v.end_s <= sh.at_s && usable(v))
        sh.pre_p50_ms = v.p50_ms;
    if (std::isnan(sh.pre_p50_ms))
      continue;
    // Windows from the shift to the next one: the first after which all stay within 5%.
    double recovered_at = NAN;
    for (const TpotWindow& v : windows) {
      if (v.start_s < sh.at_s || v.start_s >= next || !usable(v))
        continue;
      sh.peak_p50_ms = std::isnan(sh.peak_p50_ms) ? v.p50_ms : std::max(sh.peak_p50_ms, v.p50_ms);
      if (v.p50_ms > 1.05 * sh.pre_p50_ms)
        recovered_at = NAN;
      else if (std::isnan(recovered_at))
        recovered_at = v.start_s;
    }
    sh.recovery_s = recovered_at - sh.at_s;
  }
  return shifts;
}

std::string windows_csv(const std::vector<TpotWindow>& windows)
{
  std::string out = "start_s,end_s,requests,tpot_p50_ms,tpot_p99_ms,refits\n";
  for (const TpotWindow& v : windows) {
    append_value(out, v.start_s);
    out += ",";
    append_value(out, v.end_s);
    out += "," + std::to_string(v.requests) + ",";
    append_value(out, v.requests ? v.p50_ms : kNotYet);
    out += ",";
    append_value(out, v.requests ? v.p99_ms : kNotYet);
    out += "," + std::to_string(v.refits) + "\n";
  }
  return out;
}

std::string decisions_csv(const Workload& w, const RunRecorder& rec)
{
  // One row per routed request, in decision order; lists are ';'-separated, candidates as worker:in_flight.
  std::string out = "id,label,time_s,chosen,in_flight,best_similarity,band_floor,similarities,candidates\n";
  out.reserve(rec.decisions.size() * 256);
  char buf[64];
  for (const DecisionRecord& d : rec.decisions) {
    out += std::to_string(d.id) + ",";
    csv_append_field(out, w.labels[w.requests[d.id].label]);
    out += ",";
    append_value(out, d.time_s);
    out += "," + std::to_string(d.chosen) + ",";
    for (size_t i = 0; i < d.in_flight.size(); ++i)
      out += (i ? ";" : "") + std::to_string(d.in_flight[i]);
    out += ",";
    if (!d.sims.empty()) {
      std::snprintf(buf, sizeof buf, "%.9g,%.9g,", double(d.best), double(d.floor));
      out += buf;
      for (size_t i = 0; i < d.sims.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.9g", i ? ";" : "", double(d.sims[i]));
        out += buf;
      }
      out += ",";
      for (size_t i = 0; i < d.candidates.size(); ++i)
        out += (i ? ";" : "") + std::to_string(d.candidates[i]) + ":" +
               std::to_string(d.in_flight[size_t(d.candidates[i])]);
    } else
      out += ",,,";
    out += "\n";
  }
  return out;
}

// Present only for drifting workloads or a router that follows drift by policy, so the summaries of
// existing configs stay byte-identical.
static bool wants_drift_section(const Experiment& x, const RunRecorder& rec)
{
  return !x.workload.mix_schedule.empty() || std::isfinite(x.workload.new_subtopics_after_s) ||
         rec.router_follows_drift;
}

static Json drift_json(const Experiment& x, const Workload& w, const RunRecorder& rec,
                       const std::vector<TpotWindow>& windows)
{
  auto num = [](double v) { return std::isnan(v) ? Json(nullptr) : Json(v); };
  Json j;
  j["window_s"] = kTpotWindowS;
  Json shifts   = Json::array();
  for (const ShiftRecovery& s : shift_recoveries(x, windows, measured_arrivals_end_s(w, rec)))
    shifts.push_back({{"at_s", s.at_s},
                      {"kind", s.kind},
                      {"pre_p50_ms", num(s.pre_p50_ms)},
                      {"peak_p50_ms", num(s.peak_p50_ms)},
                      {"recovery_s", num(s.recovery_s)}});
  j["shifts"] = shifts;
  Json refits = Json::array();
  for (double t : rec.refit_times_s)
    refits.push_back(t - rec.measured_start_s);  // negative: during warm-up
  j["refit_times_s"]   = refits;
  j["refits_measured"] = long(std::count_if(rec.refit_times_s.begin(), rec.refit_times_s.end(),
                                            [&](double t) { return t >= rec.measured_start_s; }));
  return j;
}

void write_results(const std::string& out_dir, const Experiment& x, const Workload& w, const RunRecorder& rec)
{
  namespace fs     = std::filesystem;
  RunSummary s     = summarize_run(x, w, rec);
  const fs::path d = out_dir;
  // Each file's size and checksum go into summary.json: readers (table, compare) verify them.
  Json files = Json::object();
  auto write = [&](const char* name, const std::string& text) {
    write_file_atomically((d / name).string(), text);
    files[name] = {{"bytes", text.size()}, {"fnv1a64", fnv1a64_hex(text)}};
  };
  write("requests.csv", requests_csv(w, rec));
  if (x.write_steps)
    write("steps.csv", steps_csv(rec));
  const std::vector<TpotWindow> windows = tpot_windows(w, rec);
  write("windows.csv", windows_csv(windows));
  if (x.decision_log)
    write("decisions.csv", decisions_csv(w, rec));
  Json j = summary_json(x, s, rec, w.labels);
  if (wants_drift_section(x, rec))
    j["drift"] = drift_json(x, w, rec, windows);
  j["files"] = files;
  // summary.json last: its presence marks a complete result.
  // Never throws (invalid UTF-8 in a free-text config key is replaced by U+FFFD): the simulation's
  // work is not thrown away over a description.
  write_file_atomically((d / "summary.json").string(), j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

}  // namespace eldr
