#pragma once
// A decode routing policy as a pipeline, the way llm-d's inference scheduler (the Gateway API
// Inference Extension's endpoint picker) works: filters narrow the candidate workers, weighted scorers
// rank them (each score in [0, 1]), a picker chooses. The config's `composed` section declares one
// (composition.cpp: every plugin and parameter as a key declaration); the router table's built-in
// routers are compositions too (router_registry.cpp), and an llm-d EndpointPickerConfig maps onto one
// (endpoint_picker_config.hpp). docs/routing-policies.md is the reference.
#include "sim/common/json_reader.hpp"
#include "sim/config/config_key.hpp"
#include "sim/config/experiment.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eldr {

class ConfigReader;

// Plugin types, in the order of their declarations (and of the pipeline: filters run in this order,
// scores add up in this order).
enum class FilterType { label_pool, load_threshold, locality_band };
enum class ScorerType {
  queue,
  kv_cache_utilization,
  prefix_cache,
  expert_locality,
  label_match,
  precise_prefix_cache,
  active_request
};
enum class PickerType { max_score, random, p2c, round_robin };
enum class TieBreak { random, lowest_index };

struct FilterStep {
  FilterType type    = FilterType::label_pool;
  long max_in_flight = 0;  // load-threshold-filter
};
struct ScorerStep {
  ScorerType type       = ScorerType::queue;
  double weight         = 0;
  long idle_threshold   = 0;    // active-request-scorer: at most this many in flight scores 1
  double max_busy_score = 1.0;  // active-request-scorer: the score of the least busy worker above it
};
struct PickerStep {
  PickerType type = PickerType::max_score;
  TieBreak ties   = TieBreak::random;  // max-score-picker
  long top_k      = 0;                 // random-picker: 0, every candidate
};

struct Composition {
  std::string name;  // names the policy; its random stream is "router.<name>"
  std::vector<FilterStep> filters;
  std::vector<ScorerStep> scorers;
  PickerStep picker;
  bool uses_expert_locality() const;
  bool uses_label_pools() const;
};

// The plugin types by kind, each with its line of help, in enum order.
std::span<const KeyChoice> filter_types();
std::span<const KeyChoice> scorer_types();
std::span<const KeyChoice> picker_types();

// The `composed` section: its key declarations (every plugin a section, every parameter a key) and
// its check, for the router table.
extern const RouterSection kComposedSection;

// The prefill router's section (prefill_router): the same plugins but the locality ones, no scheduler file.
extern const RouterSection kPrefillSection;

// The composition a resolved section describes (the experiment's router_sections["composed"], or a
// built-in router's text in the same form); `scheduler` in it is ignored (already expanded).
// Throws InputError naming `file` on a bad value.
Composition read_composition(const Json& section, const std::string& file);
// The prefill router's composition, none when the resolved section gives no plugin (then the front
// end's consistent-hash ring routes prefill).
std::optional<Composition> read_prefill_composition(const Json& section, const std::string& file);

}  // namespace eldr
