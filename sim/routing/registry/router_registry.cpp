#include "sim/routing/registry/router_registry.hpp"
#include "sim/common/input_error.hpp"
#include "sim/routing/compose/composed_router.hpp"
#include "sim/routing/eldr/eldr_fit.hpp"
#include "sim/routing/eldr/eldr_spec.hpp"
#include "sim/routing/registry/plugin_table.hpp"
#include "sim/routing/router_fit.hpp"

#include "examples/routers/jsq_of_d.hpp"
#include "examples/routers/prefix_affinity.hpp"

#include <algorithm>
#include <stdexcept>

namespace eldr {

namespace {

// The experiment's own composition (router "composed"); without an experiment (unit tests), or
// without the section: the declared defaults.
Composition composed_section(const Experiment* x)
{
  static const Json kNone = Json::object();
  const Json& section     = x && x->router_sections.contains("composed") ? x->router_sections["composed"] : kNone;
  return read_composition(section, x ? x->config_file : "(defaults)");
}

std::unique_ptr<DecodeRouter> from_composed_section(const RouterSetup& setup)
{
  return make_composed_router(composed_section(setup.experiment), setup);
}

constexpr ResultColumn kEldrColumns[] = {{"tau", "eldr.tau"}, {"kmeans", "eldr.kmeans"}, {"variant", "eldr.variant"}};

// One entry per decode router, in the order `eldrsim routers` lists them. The built-in policies are
// compositions (sim/routing/compose/composition.hpp), written as the config's composed section would
// write them; each draws from the random stream of its name.
const RouterEntry kRouters[] = {
    {"random", "a uniformly random worker, ignoring load", nullptr, nullptr, false,
     R"({"picker": {"random-picker": {}}})"},
    {"round_robin", "workers in turn", nullptr, nullptr, false, R"({"picker": {"round-robin-picker": {}}})"},
    {"jsq", "join the shortest queue: fewest in-flight requests, ties at random", nullptr, nullptr, false,
     R"({"scorers": {"queue-scorer": {}}, "picker": {"max-score-picker": {"tie_break": "random"}}})"},
    {"p2c", "power of two choices: the less loaded of two random workers", nullptr, nullptr, false,
     R"({"scorers": {"queue-scorer": {}}, "picker": {"p2c-picker": {}}})"},
    {"domain", "oracle: the shortest queue of the request label's pool of workers", nullptr, nullptr, false,
     R"({"filters": {"label-pool-filter": {}}, "scorers": {"queue-scorer": {}},
         "picker": {"max-score-picker": {"tie_break": "random"}}})"},
    {"eldr", "expert-locality-aware: similar prompts to the same worker, within a load band", nullptr, &kEldrSection,
     false,
     R"({"filters": {"locality-band-filter": {}}, "scorers": {"queue-scorer": {}},
         "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})",
     kEldrColumns},
    {"composed", "the config's own composition of filters, scorers and a picker (the composed section)",
     from_composed_section, &kComposedSection, true},
    // Worked examples (examples/routers/, docs/adding-a-router.md).
    {"jsq_of_d", "example: the least loaded of d sampled workers", make_jsq_of_d, &kJsqOfDSection, true},
    {"prefix_affinity", "example: the prompt prefix's worker, unless far busier than the least loaded",
     make_prefix_affinity, nullptr, true},
};

}  // namespace

std::span<const RouterEntry> decode_routers()
{
  return kRouters;
}

const RouterEntry* find_decode_router(std::string_view name)
{
  for (const RouterEntry& e : kRouters)
    if (name == e.name)
      return &e;
  return nullptr;
}

std::vector<std::string> decode_router_names()
{
  std::vector<std::string> names;
  for (const RouterEntry& e : kRouters)
    names.emplace_back(e.name);
  return names;
}

std::unique_ptr<DecodeRouter> make_decode_router(const std::string& name, const RouterSetup& setup)
{
  const RouterEntry* e = find_decode_router(name);
  if (!e)
    throw std::invalid_argument("unknown decode router '" + name + "'");
  if (e->composition)
    return make_composed_router(builtin_composition(*e), setup);
  return e->make(setup);
}

Composition builtin_composition(const RouterEntry& e)
{
  if (!e.composition)
    throw std::logic_error(std::string("router ") + e.name + " is not a composition");
  Json section    = Json::parse(e.composition);
  section["name"] = e.name;
  return read_composition(section, std::string("the router table's ") + e.name);
}

std::optional<Composition> decode_composition(const Experiment& x)
{
  const RouterEntry* e = find_decode_router(x.router);
  if (e && e->composition)
    return builtin_composition(*e);
  if (x.router == "composed")
    return composed_section(&x);
  return std::nullopt;
}

std::vector<ResultColumn> result_columns()
{
  std::vector<ResultColumn> out;
  for (const RouterEntry& e : kRouters)
    for (const ResultColumn& c : e.columns)
      if (std::none_of(out.begin(), out.end(), [&](const ResultColumn& o) { return std::string_view(o.key) == c.key; }))
        out.push_back(c);
  return out;
}

namespace {

// The plugins that read ELDR's model (the expert-locality ones: PluginEntry::fit).
bool uses_eldr_model(const Experiment& x)
{
  const std::optional<Composition> c = decode_composition(x);
  return c && c->uses_fit("eldr");
}

const RouterFit kFits[] = {
    {"eldr", "ELDR", "ELDR's model: IDF, layer mask, balanced K-means", "eldr.model_file", eldr_run_only_keys(),
     uses_eldr_model, eldr_file_given, fit_eldr_file, check_eldr_file},
};

}  // namespace

std::span<const RouterFit> router_fits()
{
  return kFits;
}

const RouterFit* find_router_fit(std::string_view name)
{
  for (const RouterFit& f : kFits)
    if (name == f.name)
      return &f;
  return nullptr;
}

const RouterFit* router_fit_of(const Experiment& x)
{
  for (const RouterFit& f : kFits)
    if (f.used_by(x))
      return &f;
  return nullptr;
}

const RouterFit* fit_at_start(const Experiment& x)
{
  const RouterFit* f = router_fit_of(x);
  return f && !f->file_given(x) ? f : nullptr;
}

std::unique_ptr<DecodeRouter> make_prefill_router(const RouterSetup& setup)
{
  static const Json kNone = Json::object();
  const Experiment* x     = setup.experiment;
  const Json& section =
      x && x->router_sections.contains("prefill_router") ? x->router_sections["prefill_router"] : kNone;
  const auto c = read_prefill_composition(section, x ? x->config_file : "(defaults)");
  return c ? make_composed_router(*c, setup) : nullptr;
}

const RouterCatalog& router_catalog()
{
  static const RouterCatalog catalog = [] {
    RouterCatalog c;
    for (const RouterEntry& e : kRouters) {
      c.routers.push_back({e.name, e.description});
      if (e.section)
        c.sections.push_back(*e.section);
    }
    c.sections.push_back(kPrefillSection);
    return c;
  }();
  return catalog;
}

}  // namespace eldr
