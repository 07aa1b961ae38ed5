#pragma once
// A plugin of the composed router (composition.hpp): a filter, a scorer or a picker, registered as a
// PluginEntry in the router table's plugin list (sim/routing/registry/plugin_table.cpp). The entry says
// everything the composition needs to know about the plugin: its type name (llm-d's where llm-d has the
// plugin), its help, its parameters as key declarations, what it reads, and how to build it. The
// composition runs whatever the list holds; it knows no plugin by name.
//
// Besides its step, a plugin (or the state it shares with other plugins of the same router) may answer
// the router hooks of decode_router.hpp: RouterPart's defaults are "nothing".
#include "sim/common/json_reader.hpp"
#include "sim/common/rng.hpp"
#include "sim/config/config_key.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeindex>
#include <utility>
#include <vector>

namespace eldr {

// What a plugin, or a state plugins share, adds to its router besides its step. The composed router
// answers each hook of decode_router.hpp from every part it holds (sums, unions, concatenations in the
// parts' order; home_workers: the answer of the lowest home_precedence).
class RouterPart {
 public:
  virtual ~RouterPart() = default;

  // Around each decision: begin() before the first filter, end() after the pick.
  virtual void begin(const Request& /*r*/) {}
  virtual void end(double /*now*/) {}

  virtual bool uses_prompt_profile() const { return false; }
  virtual ProfileFields prompt_fields() const { return {}; }
  virtual std::span<const int> prompt_layers() const { return {}; }  // empty: every layer
  virtual void observe_prompt(const Request& /*r*/, const PromptProfile& /*profile*/) {}
  virtual double handoff_bytes(const Request& /*r*/) const { return 0; }
  virtual double routing_overhead_s() const { return 0; }
  // nullopt: no opinion; an empty list: any worker.
  virtual std::optional<std::vector<int>> home_workers(const Request& /*r*/, const PromptProfile& /*prompt*/) const
  {
    return std::nullopt;
  }
  // Among parts with an opinion on home_workers, the lowest answers (a request's known label before
  // an estimate from its experts).
  virtual int home_precedence() const { return 1; }
  virtual void add_stats(std::vector<std::pair<std::string, double>>& /*out*/) const {}
  virtual void log_decisions_to(DecisionDetail* /*detail*/) {}
  virtual std::vector<double> refit_times() const { return {}; }
  virtual bool follows_drift() const { return false; }
  virtual bool profiles_cached_blocks() const { return false; }
};

// What a step sees of one decision: the request, the workers' load and the candidates left by the
// filters before it (ascending worker indices).
struct Decision {
  const Request& request;
  const DecodeLoadView& load;
  std::span<const int> candidates;
};

class Filter : public RouterPart {
 public:
  // Appends to `kept` the candidates the filter keeps, in their order.
  virtual void keep(const Decision& d, std::vector<int>& kept) = 0;
};

class Scorer : public RouterPart {
 public:
  // One score in [0, 1] per candidate, in `scores` (as long as the candidates).
  virtual void score(const Decision& d, std::span<double> scores) = 0;
};

class Picker : public RouterPart {
 public:
  // The chosen worker, from the candidates and their total scores; `rng` is the router's stream.
  virtual int pick(const Decision& d, std::span<const double> totals, Rng& rng) = 0;
  // What the picker does when no scorer runs (every total equal), for a note; "" says nothing.
  virtual std::string without_scores() const { return ""; }
};

// Scores relative to the candidates, from each one's value(worker): the best 1, the worst 0, all 1 when
// they are equal.
template <class Value> void min_max_scores(const Decision& d, Value value, bool higher_is_better, std::span<double> out)
{
  double lo = 0, hi = 0;
  for (size_t i = 0; i < d.candidates.size(); ++i) {
    const double v = value(d.candidates[i]);
    lo             = i == 0 ? v : std::min(lo, v);
    hi             = i == 0 ? v : std::max(hi, v);
  }
  for (size_t i = 0; i < d.candidates.size(); ++i) {
    const double v = value(d.candidates[i]);
    out[i]         = hi == lo ? 1.0 : (higher_is_better ? v - lo : hi - v) / (hi - lo);
  }
}

// Where a router's plugins are built: the router's setup, and the states its plugins share, one of each
// type per router, built for the first plugin that asks (two plugins of one router reading one model).
class PluginContext {
 public:
  explicit PluginContext(const RouterSetup& setup) : setup_(setup) {}
  const RouterSetup& setup() const { return setup_; }

  // The router's state of type T (a RouterPart, whose hooks the router answers too), built by
  // make(setup) for the first plugin that asks.
  template <class T> T& shared(std::unique_ptr<T> (*make)(const RouterSetup&))
  {
    const std::type_index type(typeid(T));
    for (auto& [t, part] : shared_)
      if (t == type)
        return static_cast<T&>(*part);
    std::unique_ptr<T> made = make(setup_);
    T& out                  = *made;
    shared_.emplace_back(type, std::move(made));
    return out;
  }

  // The shared states, in the order they were built.
  std::vector<std::unique_ptr<RouterPart>> take_shared()
  {
    std::vector<std::unique_ptr<RouterPart>> out;
    for (auto& [t, part] : shared_)
      out.push_back(std::move(part));
    shared_.clear();
    return out;
  }

 private:
  const RouterSetup& setup_;
  std::vector<std::pair<std::type_index, std::unique_ptr<RouterPart>>> shared_;
};

// A plugin's registration. `params` holds its declared keys' values (defaults filled in), by key name.
struct PluginEntry {
  std::string_view type;  // kebab-case, llm-d's name where llm-d has the plugin
  std::string_view help;  // one line, for `eldrsim config keys`
  // The parameters, paths relative to the plugin's section ("max_in_flight"); a scorer's weight is the
  // composition's.
  std::span<const ConfigKey> keys = {};
  // Exactly one factory is set, and says the plugin's kind.
  std::unique_ptr<Filter> (*filter)(const Json& params, PluginContext& ctx) = nullptr;
  std::unique_ptr<Scorer> (*scorer)(const Json& params, PluginContext& ctx) = nullptr;
  std::unique_ptr<Picker> (*picker)(const Json& params, PluginContext& ctx) = nullptr;
  // A filter that may leave no candidate (then skipped for the decision, and counted: filter_fallbacks).
  bool can_empty = false;
  // Reads the workers' KV caches (the prefill router's needs serving.prefix_cache for it).
  bool reads_kv_cache = false;
  // Why the prefill router cannot run it; empty: it can.
  std::string_view not_for_prefill = {};
  // The router fit it reads (router_fit.hpp's name), if any: the run fits it when the router uses it.
  std::string_view fit = {};
};

// The registered plugins, in the pipeline's order: filters run in this order, scores add up in this
// order; the first picker is a composition's when it names none.
using PluginCatalog = std::span<const PluginEntry* const>;

// The kind's section of the composed section: "filters", "scorers" or "picker".
std::string_view plugin_kind(const PluginEntry& e);
// The plugin of `type` in the catalog, nullptr when none.
const PluginEntry* find_plugin(PluginCatalog plugins, std::string_view type);

}  // namespace eldr
