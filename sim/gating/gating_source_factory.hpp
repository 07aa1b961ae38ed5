#pragma once
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/workload/request.hpp"

#include <memory>

namespace eldr {

// The expert routing source an experiment asks for (workload.routing), for workload `w` (its labels).
// cache_dir: a directory where generated sources are shared with other processes that build the same
// one (GeneratedGating), or empty.
std::unique_ptr<GatingSource> make_gating_source(const Experiment& x, const Workload& w,
                                                 const std::string& cache_dir = "");

}  // namespace eldr
