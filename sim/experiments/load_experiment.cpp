// load_experiment and config_keys with the router table's catalog: defined here, above the routers,
// because the config layer that declares them (sim/config/experiment.hpp) cannot know the routers.
#include "sim/config/experiment.hpp"
#include "sim/routing/registry/router_registry.hpp"

namespace eldr {

Experiment load_experiment(const std::string& config_path, const std::vector<Override>& overrides)
{
  return read_experiment(config_path, router_catalog(), overrides);
}

std::vector<ConfigKey> config_keys()
{
  return config_keys(router_catalog());
}

}  // namespace eldr
