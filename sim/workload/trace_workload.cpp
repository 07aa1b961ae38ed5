#include "sim/workload/trace_workload.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <cstdio>

namespace eldr {

namespace {

std::string dims(int layers, int experts, int top_k)
{
  return std::to_string(layers) + " layers, " + std::to_string(experts) + " experts, top-" + std::to_string(top_k);
}

std::string gb(double bytes)
{
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GB", bytes / 1e9);
  return b;
}

}  // namespace

void check_trace_model_name(const TraceManifest& manifest, const std::string& manifest_path, const Experiment& x)
{
  if (manifest.model && manifest.model->name != x.model.name)
    throw InputError(manifest_path, "model.name",
                     "'" + manifest.model->name + "', but " + x.config_file + " runs model '" + x.model.name +
                         "': the trace was recorded for another model (set \"model\": \"" + manifest.model->name +
                         "\" in the config, or use a trace of '" + x.model.name + "')");
}

void check_trace_model(const TraceManifest& manifest, const std::string& manifest_path, const Experiment& x)
{
  const ModelSpec& m = x.model;
  if (!manifest.model)
    throw InputError(manifest_path, "model",
                     "is null, but " + x.config_file + " replays the trace's routing (workload.routing \"trace\")");
  const TraceModel& t = *manifest.model;
  if (t.layers != m.layers || t.experts != m.experts || t.top_k != m.top_k)
    throw InputError(manifest_path, "model",
                     "'" + t.name + "' (" + dims(t.layers, t.experts, t.top_k) +
                         ") does not match the experiment's model '" + m.name + "' (" +
                         dims(m.layers, m.experts, m.top_k) + ") in " + x.config_file +
                         ": replaying routing needs the same layers, experts and top_k");
  check_trace_model_name(manifest, manifest_path, x);
}

Workload load_trace_workload(const Experiment& x)
{
  const WorkloadSpec& spec   = x.workload;
  Trace t                    = read_trace(spec.trace_dir);
  const std::string req_file = t.requests_path();
  if (spec.routing == ExpertRouting::trace) {
    if (t.manifest.routing_file.empty())
      throw InputError(x.config_file, "workload.routing",
                       "'trace' replays the trace's routing file, but " + t.manifest_path() +
                           " has none (routing_file is null): use \"uniform\" or \"generated\"");
    check_trace_model(t.manifest, t.manifest_path(), x);
  }

  // Split in file order (indices into t.requests).
  std::vector<size_t> calibration, served;
  const bool flagged =
      std::any_of(t.requests.begin(), t.requests.end(), [](const TraceRequest& q) { return q.calibration; });
  const size_t n       = t.requests.size();
  const size_t first_n = flagged ? 0 : size_t(std::min<long>(spec.calibration_requests, long(n)));
  for (size_t i = 0; i < n; ++i)
    ((flagged ? t.requests[i].calibration : i < first_n) ? calibration : served).push_back(i);

  const long warmup = spec.warmup_requests;
  const long left   = long(served.size());
  if (left < warmup + 1)
    throw InputError(x.config_file, "workload.warmup_requests",
                     std::to_string(warmup) + " warm-up requests and at least one measured request need " +
                         std::to_string(warmup + 1) + " requests, but " + req_file + " has " + std::to_string(left) +
                         " after its " + std::to_string(calibration.size()) + " calibration requests" +
                         (flagged ? " (flagged)" : " (workload.calibration_requests)") +
                         ": lower workload.warmup_requests or workload.calibration_requests");
  const long asked    = (x.workload.measured_requests_given ? x.workload.measured_requests : 0L);
  const long measured = asked > 0 ? std::min(asked, left - warmup) : left - warmup;
  served.resize(size_t(warmup + measured));

  Workload w;
  w.labels              = t.manifest.labels;
  w.prefix_block_tokens = t.manifest.prefix_block_tokens;

  // Per-request streams, drawn in file order, so a request keeps its routing seed whatever the split.
  Rng content(x.seed, "workload.requests");
  std::vector<uint64_t> routing_seed(n);
  for (auto& s : routing_seed)
    s = content();
  const uint64_t prefix_seed = stream_seed(x.seed, "workload.prefix_hash");
  auto make                  = [&](size_t i) {
    const TraceRequest& q = t.requests[i];
    Request r;
    r.label          = q.label;
    r.arrival_s      = q.arrival_s;
    r.prompt_tokens  = q.prompt_tokens;
    r.output_tokens  = q.output_tokens;
    r.prefix_hash    = q.prefix_hashes.empty() ? splitmix64(prefix_seed + uint64_t(i)) : q.prefix_hashes.front();
    r.routing_seed   = routing_seed[i];
    r.routing_record = q.routing_record;
    r.hash_begin     = uint32_t(w.prefix_hashes.size());
    r.hash_count     = uint32_t(q.prefix_hashes.size());
    w.prefix_hashes.insert(w.prefix_hashes.end(), q.prefix_hashes.begin(), q.prefix_hashes.end());
    return r;
  };

  for (size_t k = 0; k < calibration.size(); ++k) {
    Request r   = make(calibration[k]);
    r.id        = uint32_t(k);
    r.measured  = false;
    r.arrival_s = 0;  // never served
    w.calibration.push_back(r);
  }

  Rng warm_arrivals(x.seed, "workload.arrivals.warmup");
  Rng measured_arrivals(x.seed, "workload.arrivals.measured");
  const double t_warm0 = warmup > 0 ? t.requests[served[0]].arrival_s : 0;
  const double t_meas0 =
      warmup > 0 ? t.requests[served[size_t(warmup - 1)]].arrival_s : t.requests[served[0]].arrival_s;
  double t_warm = 0, t_meas = 0;
  w.requests.reserve(served.size());
  for (size_t k = 0; k < served.size(); ++k) {
    Request r  = make(served[k]);
    r.id       = uint32_t(k);
    r.measured = long(k) >= warmup;
    if (spec.arrivals == ArrivalProcess::trace) {
      r.arrival_s = r.arrival_s - (r.measured ? t_meas0 : t_warm0);
    } else {
      if (r.measured)
        t_meas += measured_arrivals.exponential(spec.rate_rps);
      else
        t_warm += warm_arrivals.exponential(spec.warmup_rate_rps);
      r.arrival_s = r.measured ? t_meas : t_warm;
    }
    w.requests.push_back(r);
  }

  // Every served request must be servable: a prompt within one prefill batch, prompt + output within
  // a decode worker's KV memory (admission reserves whole blocks for both).
  const double kv_capacity = decode_kv_capacity_bytes(x);  // less redundant experts and a proposer's memory
  for (size_t k = 0; k < served.size(); ++k) {
    const Request& r       = w.requests[k];
    const std::string line = "line " + std::to_string(served[k] + 1);
    if (r.prompt_tokens > x.serving.prefill_token_budget)
      throw InputError(req_file, line + ": prompt_tokens",
                       std::to_string(r.prompt_tokens) + " tokens exceed serving.prefill_token_budget (" +
                           std::to_string(x.serving.prefill_token_budget) + " in " + x.config_file +
                           "): raise the budget, or re-import the trace with --max-prompt");
    const double need = x.model.kv_reserved_bytes(r.prompt_tokens + r.output_tokens);
    if (need > kv_capacity)
      throw InputError(req_file, line,
                       std::to_string(r.prompt_tokens) + " prompt + " + std::to_string(r.output_tokens) +
                           " output tokens need " + gb(need) + " of KV cache, more than a decode worker holds (" +
                           gb(kv_capacity) + " for '" + x.model.name + "' on '" + x.hardware.name +
                           "' at serving.kv_memory_fraction " + std::to_string(x.serving.kv_memory_fraction) +
                           "): re-import the trace with --max-prompt");
  }
  return w;
}

}  // namespace eldr
