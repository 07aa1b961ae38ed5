#pragma once
#include "sim/config/experiment.hpp"
#include "sim/workload/request.hpp"

namespace eldr {

// The requests an experiment serves (and its calibration split), by workload.kind: generated for
// "task" and "language", read from a trace directory for "trace".
Workload make_workload(const Experiment& x);

}  // namespace eldr
