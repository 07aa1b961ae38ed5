#pragma once
// A decode routing policy: after prefill, which decode worker continues a request? Routers are plain
// C++; they see the request and a read-only view of the decode workers' load, nothing else.
#include "sim/cache/block_cache.hpp"
#include "sim/gating/prompt_profile.hpp"
#include "sim/metrics/decision_detail.hpp"
#include "sim/workload/request.hpp"

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace eldr {

// What a router sees of the decode workers at a decision.
struct DecodeLoadView {
  // In-flight requests per decode worker, counted from the routing decision to the end of the decode.
  std::span<const int> in_flight;
  double now_s = 0;  // simulated time of the decision
  // Each worker's KV memory in blocks (empty in unit tests that do not need it), and the request's
  // full prompt blocks' keys (with prefix caching; else empty).
  std::span<const BlockCache> kv_caches       = {};
  std::span<const uint64_t> prompt_block_keys = {};
  int workers() const { return int(in_flight.size()); }
};

class DecodeRouter {
 public:
  virtual ~DecodeRouter()               = default;
  virtual std::string_view name() const = 0;
  // Returns a worker index in [0, load.workers()).
  virtual int choose(const Request& r, const DecodeLoadView& load) = 0;

  // Routers that route on the prompt's experts (ELDR) get the request's prompt profile, counted by the
  // prefill worker, right before choose(); prompt_fields() says which gate sums to gather.
  virtual bool uses_prompt_profile() const { return false; }
  virtual ProfileFields prompt_fields() const { return {}; }
  virtual std::span<const int> prompt_layers() const { return {}; }  // layers to count; empty: all
  virtual void observe_prompt(const Request& /*r*/, const PromptProfile& /*profile*/) {}
  // Bytes the router's per-request state adds to the KV transfer (ELDR's signature travels with it).
  virtual double handoff_bytes(const Request& /*r*/) const { return 0; }
  // Seconds of the router's own work per request, after its prefill and before its first token (so in
  // TTFT); > 0 routes in the front-end proxy, one request at a time (sim/cluster/routing_proxy.hpp).
  virtual double routing_overhead_s() const { return 0; }
  // Where this router would send a calibration request (whose prompt profile, counted as
  // prompt_fields()/prompt_layers() ask, is given): the decode workers whose expected expert load it
  // belongs to, for per-cluster expert placement (sim/cost/cluster_placement.hpp). Empty: any worker.
  virtual std::vector<int> home_workers(const Request& /*calibration_request*/, const PromptProfile& /*prompt*/) const
  {
    return {};
  }

  // What a router adds to a run's results (defaults: nothing); the engine and the result writer know
  // routers only through these.
  // Counters reported in summary.json under router_stats (e.g. refits performed).
  virtual std::vector<std::pair<std::string, double>> stats() const { return {}; }
  // The decision log: while `detail` is set (not null), each decision fills it with what the router
  // compared (decisions.csv's score columns, empty for routers that leave it).
  virtual void log_decisions_to(DecisionDetail* /*detail*/) {}
  // Simulated times at which the router refitted itself to the traffic, in order (windows.csv's refits
  // column, summary.json's drift section).
  virtual std::vector<double> refit_times() const { return {}; }
  // The router follows drift by policy (ELDR's eldr.refit periodic or triggered, named so): summary.json
  // gets its drift section even for a stationary workload.
  virtual bool follows_drift() const { return false; }
  // With prefix caching: cached KV blocks keep their per-block expert counts for this router (ELDR's
  // eldr.signature_cache), so a prompt profile covers the cached prefix too.
  virtual bool profiles_cached_blocks() const { return false; }
};

}  // namespace eldr
