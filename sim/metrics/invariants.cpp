#include "sim/metrics/invariants.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

namespace eldr {

namespace {

std::string at(double t)
{
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6f s", t);
  return std::isnan(t) ? std::string("(never)") : std::string(buf);
}

}  // namespace

std::optional<std::string> check_run_invariants(const Experiment& x, const Workload& w, const RunRecorder& rec,
                                                bool stopped_at_horizon)
{
  const auto& recs = rec.requests();
  if (recs.size() != w.requests.size())
    return "recorded " + std::to_string(recs.size()) + " requests of " + std::to_string(w.requests.size());
  const int D = x.topology.decode.instances;
  std::vector<double> kv_want(size_t(D), 0);
  long decode_tokens_want = 0;
  for (const Request& r : w.requests) {
    const RequestRecord& q = recs[r.id];
    const std::string who  = "request " + std::to_string(r.id);
    if (q.finish_count > 1)
      return "finishes exactly once: " + who + " finished " + std::to_string(q.finish_count) + " times, last at " +
             at(q.finish_s);
    if (q.finish_count == 0 && !stopped_at_horizon)
      return "every request finishes: " + who + " (arrived at " + at(q.arrival_s) +
             ") never finished, though the run did not stop at a horizon";
    if (q.finish_count == 1 && q.tokens_generated != r.output_tokens)
      return "tokens conserved: " + who + " finished at " + at(q.finish_s) + " with " +
             std::to_string(q.tokens_generated) + " of its " + std::to_string(r.output_tokens) + " output tokens";
    if (q.finish_count == 1)
      decode_tokens_want += r.output_tokens - 1;  // the first comes from prefill
    if (!std::isnan(q.kv_end_s)) {
      if (q.decode_worker < 0 || q.decode_worker >= D)
        return "KV reaches a decode worker: " + who + " received its KV at " + at(q.kv_end_s) + " on worker " +
               std::to_string(q.decode_worker) + " of " + std::to_string(D);
      kv_want[size_t(q.decode_worker)] += double(r.prompt_tokens - q.decode_cached_tokens) * x.model.kv_bytes_per_token;
    }
  }
  long decode_tokens = 0;
  for (const StepRecord& s : rec.steps())
    decode_tokens += long(s.batch) + s.extra_tokens;
  // Steps of requests still running at a horizon generated tokens no finished request accounts for.
  if (!stopped_at_horizon && decode_tokens != decode_tokens_want)
    return "tokens conserved: decode steps generated " + std::to_string(decode_tokens) + " tokens, finished requests " +
           "needed " + std::to_string(decode_tokens_want);
  for (int d = 0; d < D; ++d) {
    const WorkerCounters& c = rec.decode_workers()[size_t(d)];
    const std::string who   = "decode worker " + std::to_string(d);
    if (std::abs(c.kv_received_bytes - kv_want[size_t(d)]) > 1e-9 * (1 + kv_want[size_t(d)]))
      return "KV bytes conserved: " + who + " received " + std::to_string(c.kv_received_bytes) +
             " bytes, its requests' prompts need " + std::to_string(kv_want[size_t(d)]);
    if (c.kv_peak_bytes > c.kv_capacity_bytes)
      return "KV within capacity: " + who + " held " + std::to_string(c.kv_peak_bytes) + " bytes at " +
             at(c.kv_peak_s) + ", more than its " + std::to_string(c.kv_capacity_bytes);
  }
  const std::pair<const char*, const std::vector<CacheCounters>*> caches[] = {{"prefill", &rec.prefill_caches},
                                                                              {"decode", &rec.decode_caches}};
  for (const auto& [kind, list] : caches)
    for (size_t i = 0; i < list->size(); ++i)
      if ((*list)[i].peak_used_blocks > (*list)[i].capacity_blocks)
        return std::string("KV within capacity: ") + kind + " worker " + std::to_string(i) + "'s block cache held " +
               std::to_string((*list)[i].peak_used_blocks) + " blocks, more than its " +
               std::to_string((*list)[i].capacity_blocks);
  return std::nullopt;
}

}  // namespace eldr
