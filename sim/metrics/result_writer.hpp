#pragma once
// Turns a run's records into summary.json, requests.csv and steps.csv (all written atomically).
#include "sim/common/json_reader.hpp"
#include "sim/common/percentiles.hpp"
#include "sim/config/experiment.hpp"
#include "sim/metrics/run_recorder.hpp"
#include "sim/workload/request.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace eldr {

struct RunSummary {
  std::string router;
  long measured   = 0;
  long unfinished = 0;  // measured requests that did not finish
  Percentiles tpot_ms, ttft_ms, e2e_ms;
  double throughput_tok_s                = 0;
  double distinct_experts_per_layer_mean = 0;
  double decode_batch_mean               = 0;
  long decode_steps                      = 0;
  // Expert-parallel decode instances only: means over the measured steps.
  double rank_imbalance_mean = 1;
  double all_to_all_ms_mean  = 0;
  double sim_time_s          = 0;
  double measured_span_s     = 0;
  // Prefix caching: shares of the measured requests' prompt tokens reused on prefill (not computed)
  // and held already on decode (not transferred).
  double prefill_token_hit_rate = 0;
  double decode_token_hit_rate  = 0;
};

// TPOT of the measured requests per window of their finish time (docs/whatif.md "Drift study").
// Only windows with a finished measured request or a refit are listed (in time order): a gap between
// two windows' start_s is windows in which nothing finished.
struct TpotWindow {
  double start_s = 0, end_s = 0;  // from the measured phase's start
  long requests = 0;              // measured requests finished in [start_s, end_s)
  double p50_ms = 0, p99_ms = 0;  // 0 when empty
  long refits = 0;                // the decode router's refits in the window
};
inline constexpr double kTpotWindowS = 10;
std::vector<TpotWindow> tpot_windows(const Workload& w, const RunRecorder& rec, double window_s = kTpotWindowS);

// A traffic shift (a mix_schedule piece after 0, or workload.new_subtopics_after_s) and how long TPOT
// took to come back: pre_p50_ms is the P50 of the last window ending at or before the shift;
// recovery_s is the start of the first window from the shift on after which every window until the
// next shift (windows of at least kMinWindowRequests requests) has P50 <= 1.05 x pre_p50_ms, minus
// the shift time: 0 when TPOT never rose more than 5%, NaN when it did not come back before the next
// shift or the end. peak_p50_ms: the highest window P50 in that span. Windows ending after
// `arrivals_end_s` (the last measured arrival) are left out: once arrivals stop, batches drain and
// TPOT falls whatever the router does.
struct ShiftRecovery {
  double at_s = 0;
  std::string kind;  // "mix" | "new_subtopics"
  double pre_p50_ms = NAN, peak_p50_ms = NAN, recovery_s = NAN;
};
inline constexpr long kMinWindowRequests = 20;
std::vector<ShiftRecovery> shift_recoveries(const Experiment& x, const std::vector<TpotWindow>& windows,
                                            double arrivals_end_s = INFINITY);
// The last measured arrival, from the measured phase's start.
double measured_arrivals_end_s(const Workload& w, const RunRecorder& rec);

// Metrics over measured requests; decode-step means over steps that start while a measured request is in flight.
RunSummary summarize_run(const Experiment& x, const Workload& w, const RunRecorder& rec);
// decode_workers[].label_mix counts the requests each worker served per label (all phases).
Json summary_json(const Experiment& x, const RunSummary& s, const RunRecorder& rec,
                  const std::vector<std::string>& labels);
std::string requests_csv(const Workload& w, const RunRecorder& rec);
std::string steps_csv(const RunRecorder& rec);
std::string windows_csv(const std::vector<TpotWindow>& windows);
std::string decisions_csv(const Workload& w, const RunRecorder& rec);
void write_results(const std::string& out_dir, const Experiment& x, const Workload& w, const RunRecorder& rec);

}  // namespace eldr
