#include "sim/workload/workload_factory.hpp"
#include "sim/workload/trace_workload.hpp"
#include "sim/workload/workload_generator.hpp"

namespace eldr {

Workload make_workload(const Experiment& x)
{
  if (x.workload.kind == WorkloadKind::trace)
    return load_trace_workload(x);
  return generate_workload(x.workload, x.seed);
}

}  // namespace eldr
