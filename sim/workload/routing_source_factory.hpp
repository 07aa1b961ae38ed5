#pragma once
#include "sim/config/experiment.hpp"
#include "sim/workload/expert_routing.hpp"
#include "sim/workload/request.hpp"

#include <memory>

namespace eldr {

// The expert routing source an experiment asks for (workload.routing), for workload `w` (its labels).
std::unique_ptr<ExpertRoutingSource> make_routing_source(const Experiment& x, const Workload& w);

}  // namespace eldr
