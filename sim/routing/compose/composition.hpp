#pragma once
// A decode routing policy as a pipeline, the way llm-d's inference scheduler (the Gateway API
// Inference Extension's endpoint picker) works: filters narrow the candidate workers, weighted scorers
// rank them (each score in [0, 1]), a picker chooses. The plugins are registered objects (plugin.hpp)
// listed by the router table (sim/routing/registry/plugin_table.cpp); the config's `composed` section
// declares a pipeline of them, each plugin a section with its parameters as keys (CompositionSections).
// The router table's built-in routers are compositions too (router_registry.cpp), and an llm-d
// EndpointPickerConfig maps onto one (endpoint_picker_config.hpp). docs/routing-policies.md is the
// reference.
#include "sim/common/json_reader.hpp"
#include "sim/config/config_key.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/routing/compose/plugin.hpp"

#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace eldr {

class ConfigReader;

// One plugin of a pipeline with its parameters' values (defaults filled in), by key name.
struct Step {
  const PluginEntry* plugin = nullptr;
  double weight             = 0;  // scorers: the score's weight in the total
  Json params               = Json::object();
  std::string_view type() const { return plugin->type; }
};

struct Composition {
  std::string name;  // names the policy; its random stream is "router.<name>"
  std::vector<Step> filters;
  std::vector<Step> scorers;  // each with a weight above 0
  Step picker;
  // Whether a step is of a plugin that reads the named router fit (PluginEntry::fit).
  bool uses_fit(std::string_view fit) const;
};

// The `composed` and prefill_router sections for a catalog of plugins: their key declarations (every
// plugin a section under its kind, every parameter a key), readers and checks, for the router table.
class CompositionSections {
 public:
  explicit CompositionSections(PluginCatalog plugins);
  CompositionSections(const CompositionSections&)            = delete;
  CompositionSections& operator=(const CompositionSections&) = delete;

  PluginCatalog plugins() const { return plugins_; }
  KeyTable composed_keys() const { return composed_; }
  KeyTable prefill_keys() const { return prefill_; }

  // RouterSection's read and check_with for each section (a scheduler file's profile merged into each:
  // the decode profile into composed, a P/D file's prefill profile into prefill_router; the prefill
  // router's plugins but those it cannot run).
  void check_composed(ConfigReader& r, const std::string& root) const;
  static void check_composed_with(const ConfigReader& r, const Experiment& x);
  void check_prefill(ConfigReader& r, const std::string& root) const;
  void check_prefill_with(const ConfigReader& r, const Experiment& x) const;

  // The composition a resolved section describes (the experiment's router_sections["composed"], or a
  // built-in router's text in the same form); `scheduler` in it is ignored (already expanded).
  // Throws InputError naming `file` on a bad value.
  Composition read(const Json& section, const std::string& file) const;
  // The prefill router's composition, none when the resolved section gives no plugin (then the front
  // end's consistent-hash ring routes prefill).
  std::optional<Composition> read_prefill(const Json& section, const std::string& file) const;

 private:
  Composition read_steps(ConfigReader& r) const;
  Composition read_section(ConfigReader& r) const;
  void read_with_scheduler(ConfigReader& r, const std::string& root, KeyTable keys, const char* path,
                           ProfileRole role) const;

  PluginCatalog plugins_;
  std::deque<std::string> texts_;  // the generated paths the declarations point into
  std::vector<ConfigKey> composed_, prefill_;
};

}  // namespace eldr
