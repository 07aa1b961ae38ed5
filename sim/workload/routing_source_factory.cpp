#include "sim/workload/routing_source_factory.hpp"
#include "sim/common/input_error.hpp"
#include "sim/workload/generated_routing.hpp"
#include "sim/workload/replay_routing.hpp"
#include "sim/workload/uniform_routing.hpp"

namespace eldr {

std::unique_ptr<ExpertRoutingSource> make_routing_source(const Experiment& x, const Workload& w)
{
  if (x.workload.routing == "uniform")
    return std::make_unique<UniformRouting>(x.model, x.seed);
  if (x.workload.routing == "generated") {
    const std::string kind = x.workload.kind == "trace" ? "task" : x.workload.kind;
    return std::make_unique<GeneratedRouting>(x.model, x.routing_profile, kind, w.labels, x.seed,
                                              x.workload.routing_profile_file);
  }
  if (x.workload.routing == "trace")
    return std::make_unique<ReplayRouting>(load_replay_routing(x, w));
  throw InputError(x.config_file, "workload.routing", "unknown routing source '" + x.workload.routing + "'");
}

}  // namespace eldr
