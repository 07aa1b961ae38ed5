#include "sim/workload/workload_factory.hpp"
#include "sim/common/input_error.hpp"
#include "sim/workload/workload_generator.hpp"

namespace eldr {

Workload make_workload(const Experiment& x)
{
  if (x.workload.kind == "trace")
    throw InputError(x.config_file, "workload.kind", "trace workloads are not wired in yet");
  return generate_workload(x.workload, x.seed);
}

}  // namespace eldr
