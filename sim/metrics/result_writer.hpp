#pragma once
// Turns a run's records into summary.json, requests.csv and steps.csv (all written atomically).
#include "sim/common/json_reader.hpp"
#include "sim/common/percentiles.hpp"
#include "sim/config/experiment.hpp"
#include "sim/metrics/run_recorder.hpp"
#include "sim/workload/request.hpp"

#include <string>

namespace eldr {

struct RunSummary {
  std::string router;
  long measured         = 0;
  long unfinished       = 0;  // measured requests that did not finish
  Percentiles tpot_ms, ttft_ms, e2e_ms;
  double throughput_tok_s                = 0;
  double distinct_experts_per_layer_mean = 0;
  double decode_batch_mean               = 0;
  long decode_steps                      = 0;
  // Expert-parallel decode instances only: means over the measured steps.
  double rank_imbalance_mean             = 1;
  double all_to_all_ms_mean              = 0;
  double sim_time_s                      = 0;
  double measured_span_s                 = 0;
  // Prefix caching: shares of the measured requests' prompt tokens reused on prefill (not computed)
  // and held already on decode (not transferred).
  double prefill_token_hit_rate = 0;
  double decode_token_hit_rate  = 0;
};

// Metrics over measured requests; decode-step means over steps that start while a measured request is in flight.
RunSummary summarize_run(const Experiment& x, const Workload& w, const RunRecorder& rec);
// decode_workers[].label_mix counts the requests each worker served per label (all phases).
Json summary_json(const Experiment& x, const RunSummary& s, const RunRecorder& rec, const std::vector<std::string>& labels);
std::string requests_csv(const Workload& w, const RunRecorder& rec);
std::string steps_csv(const RunRecorder& rec);
void write_results(const std::string& out_dir, const Experiment& x, const Workload& w, const RunRecorder& rec);

}  // namespace eldr
