#pragma once
#include "sim/config/experiment.hpp"
#include "sim/workload/expert_routing.hpp"

#include <memory>

namespace eldr {

// The expert routing source an experiment asks for (workload.routing).
std::unique_ptr<ExpertRoutingSource> make_routing_source(const Experiment& x);

}  // namespace eldr
