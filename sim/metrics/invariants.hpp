#pragma once
// What must hold at the end of every run, release builds included (checked by `eldrsim run` before it
// writes results): every request finished exactly once, or is counted unfinished when the run stopped
// at its horizon; a finished request got exactly its output tokens, and the decode steps generated
// them all; every decode worker received exactly the KV bytes its requests' prompts need (less what
// prefix caching kept there); no worker's KV memory ever exceeded its capacity. A violation is a
// simulator bug, reported with the invariant, the request or worker, and the simulated time.
//
// Plain C++ (no SimGrid).
#include "sim/config/experiment.hpp"
#include "sim/metrics/run_recorder.hpp"
#include "sim/workload/request.hpp"

#include <optional>
#include <string>

namespace eldr {

// The first violated invariant, as one line; nullopt when all hold. `stopped_at_horizon`: the run
// ended before every request finished (unfinished requests are then allowed, duplicates never).
std::optional<std::string> check_run_invariants(const Experiment& x, const Workload& w, const RunRecorder& rec,
                                                bool stopped_at_horizon = false);

}  // namespace eldr
