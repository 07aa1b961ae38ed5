#pragma once
// Runs one experiment in SimGrid. One call per process: SimGrid allows one Engine per process.
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/metrics/run_recorder.hpp"
#include "sim/workload/request.hpp"

#include <functional>
#include <string>
#include <vector>

namespace eldr {

struct SimulationOptions {
  bool progress = false;  // a progress line on stderr
  // Decode steps a worker may sleep through at once (DecodeWorker); 1 sleeps step by step. Results
  // are the same; it only changes how often SimGrid wakes the worker.
  int decode_block_steps = 32;
  // SimGrid settings, checked (sim_log.hpp): --log (e.g. eldr.thres:verbose) and --cfg (KEY:VALUE).
  std::vector<std::string> log = {};
  std::vector<std::string> cfg = {};
  // Called once the warm-up has drained (workload.drain_after_warmup), before the first measured
  // arrival. It may replace the measured part of the workload in place, shorter or retimed (a sweep's
  // points that differ only there share one warm-up: measured_phase.hpp); the recorder follows.
  std::function<void()> at_measured_start = {};
};

RunRecorder run_simulation(const Experiment& x, const Workload& w, const GatingSource& routing,
                           const SimulationOptions& opt = {});

}  // namespace eldr
