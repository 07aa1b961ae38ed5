#include "sim/workload/routing_source_factory.hpp"
#include "sim/common/input_error.hpp"
#include "sim/workload/uniform_routing.hpp"

namespace eldr {

std::unique_ptr<ExpertRoutingSource> make_routing_source(const Experiment& x)
{
  if (x.workload.routing == "uniform")
    return std::make_unique<UniformRouting>(x.model, x.seed);
  throw InputError(x.config_file, "workload.routing", "unknown routing source '" + x.workload.routing + "'");
}

}  // namespace eldr
