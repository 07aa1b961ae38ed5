#pragma once
// Everything a run observes: per-request timestamps, per-decode-step samples, per-worker counters.
// Filled by the engine, read by the result writer and the tests. Plain data; no SimGrid.
#include "sim/metrics/decision_detail.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace eldr {

inline constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();

struct RequestRecord {
  int prefill_worker        = -1;
  int decode_worker         = -1;
  double arrival_s          = kNotYet;
  double prefill_start_s    = kNotYet;
  double first_token_s      = kNotYet;  // prefill end: the first output token exists
  double kv_start_s         = kNotYet;
  double kv_end_s           = kNotYet;
  double decode_admit_s     = kNotYet;
  double finish_s           = kNotYet;
  int tokens_generated      = 0;  // including the first token
  int finish_count          = 0;  // must end at exactly 1
  int prefill_cached_tokens = 0;  // prompt tokens whose KV the prefill worker reused (not computed)
  int decode_cached_tokens  = 0;  // prompt tokens whose KV the decode worker held already (not sent)
};

struct StepRecord {
  double start_s        = 0;
  double duration_s     = 0;
  double context_tokens = 0;
  float distinct_mean   = 0;  // mean over layers of distinct experts in the batch
  uint32_t batch        = 0;
  uint16_t worker       = 0;
  // Expert-parallel instances (docs/model.md section 3b): max over mean of the ranks' MoE time,
  // averaged over layers (1 when ep = 1), and the dispatch + combine all-to-all time of the step.
  float rank_imbalance = 1;
  float all_to_all_s   = 0;
  // Speculative decoding: tokens the step emitted beyond one per sequence (its accepted drafts).
  uint32_t extra_tokens = 0;
};

struct WorkerCounters {
  double kv_capacity_bytes = 0;
  double kv_peak_bytes     = 0;
  double kv_peak_s         = 0;  // when the peak was first reached
  double kv_received_bytes = 0;
  long tokens              = 0;
  long steps               = 0;
  int peak_batch           = 0;
  std::vector<long> label_requests;  // requests served, by label index
};

// Expert-parallel load balancing (docs/eplb.md), summed over the decode instances. Balance: per step
// and MoE layer, the largest and the mean (token, expert) picks of a rank, summed over the steps run
// [0] before an instance's first new placement took effect and [1] since (vLLM's balancedness is
// mean / max of such sums).
struct EplbCounters {
  long rearrangements  = 0;
  long experts_moved   = 0;  // replica slots filled from another rank
  double bytes_moved   = 0;
  double transfer_s    = 0;  // summed over rearrangements: from the start to the last flow's end
  double max_picks[2]  = {0, 0};
  double mean_picks[2] = {0, 0};
  long steps[2]        = {0, 0};
};

// A worker's KV block cache at the end of a run (BlockCacheStats, with its size).
struct CacheCounters {
  long capacity_blocks  = 0;
  long lookups          = 0;
  long hit_blocks       = 0;
  long missed_blocks    = 0;
  long evictions        = 0;
  long peak_used_blocks = 0;
};

// One decode routing decision (output.decision_log): the loads the router saw, its choice, and what it
// compared (DecisionDetail; empty sims for routers that do not score the workers).
struct DecisionRecord {
  uint32_t id   = 0;
  double time_s = 0;
  int chosen    = -1;
  std::vector<int> in_flight;
  float best  = 0;
  float floor = 0;
  std::vector<float> sims;
  std::vector<int> candidates;
};

class RunRecorder {
 public:
  RunRecorder(size_t requests, int decode_workers) : requests_(requests), decode_(size_t(decode_workers)) {}

  RequestRecord& request(uint32_t id) { return requests_[id]; }
  // The workload was cut to its first n requests (SimulationOptions::at_measured_start).
  void keep_requests(size_t n) { requests_.resize(std::min(n, requests_.size())); }
  const std::vector<RequestRecord>& requests() const { return requests_; }
  WorkerCounters& decode_worker(int w) { return decode_[size_t(w)]; }
  const std::vector<WorkerCounters>& decode_workers() const { return decode_; }
  // Steps in start order, those of one start in the order recorded. A decode worker records the steps
  // it slept through when it wakes, after other workers' later steps: they are appended, and put in
  // order (a stable sort) when first read, instead of an insertion into the middle per step.
  void add_step(const StepRecord& s)
  {
    if (!steps_.empty() && steps_.back().start_s > s.start_s)
      steps_sorted_ = false;
    steps_.push_back(s);
  }
  const std::vector<StepRecord>& steps() const
  {
    if (!steps_sorted_) {
      std::stable_sort(steps_.begin(), steps_.end(),
                       [](const StepRecord& a, const StepRecord& b) { return a.start_s < b.start_s; });
      steps_sorted_ = true;
    }
    return steps_;
  }

  std::vector<std::pair<std::string, double>> router_stats;  // the decode router's counters at the end
  // Expert-parallel decode instances: the layout, and with cluster_balanced placement the calibration
  // requests each instance's placement was balanced for (empty otherwise).
  int decode_expert_parallel = 1;
  EplbCounters eplb;                     // experiment.eplb enabled only
  std::string expert_union = "sampled";  // how steps counted distinct experts (workload.union)
  bool signature_cache     = false;      // the router profiled cached blocks too (cache/cached_profile.hpp)
  std::vector<long> placement_calibration_requests;
  std::vector<double> refit_times_s;  // the decode router's refits, simulated times
  bool router_follows_drift = false;  // DecodeRouter::follows_drift(): summary.json gets its drift section
  // The decision log (output.decision_log): off unless log_decisions; a router that scores the workers
  // fills decision_detail per decision.
  bool log_decisions = false;
  DecisionDetail decision_detail;
  std::vector<DecisionRecord> decisions;
  void record_decision(uint32_t id, double now, std::span<const int> in_flight, int chosen)
  {
    DecisionRecord d;
    d.id     = id;
    d.time_s = now;
    d.chosen = chosen;
    d.in_flight.assign(in_flight.begin(), in_flight.end());
    if (decision_detail.valid) {
      d.best                = decision_detail.best;
      d.floor               = decision_detail.floor;
      d.sims                = decision_detail.sims;
      d.candidates          = decision_detail.candidates;
      decision_detail.valid = false;
    }
    decisions.push_back(std::move(d));
  }
  // Prefix caching (empty without it): per prefill and per decode worker.
  std::vector<CacheCounters> prefill_caches, decode_caches;
  double measured_start_s = 0;  // when the measured phase began
  double end_s            = 0;  // simulated time when the run ended
  // workload.horizon_s: the run stopped there with requests still in the system; where they were.
  bool stopped_at_horizon = false;
  long left_unarrived     = 0;  // never dispatched
  long left_in_prefill    = 0;  // queued or prefilling
  long left_in_transfer   = 0;  // KV on its way to a decode worker
  long left_waiting       = 0;  // received, not admitted (no KV memory or batch room)
  long left_decoding      = 0;  // in a decode batch

 private:
  std::vector<RequestRecord> requests_;
  std::vector<WorkerCounters> decode_;
  mutable std::vector<StepRecord> steps_;  // sorted lazily by steps()
  mutable bool steps_sorted_ = true;
};

}  // namespace eldr
