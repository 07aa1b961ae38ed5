// The `composed` section's declarations and reader, generated from the plugins' registrations
// (plugin.hpp). Each plugin type is a section of its kind (composed.scorers.queue-scorer), present when
// the policy uses it, with its parameters as keys: the declarations are the plugin reference (`eldrsim
// config keys`, docs/config-reference.md), and a sweep reaches a weight by its dotted path
// (composed.scorers.queue-scorer.weight).
#include "sim/routing/compose/composition.hpp"
#include "sim/config/config_reader.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

namespace eldr {

namespace {

using K = KeyType;

constexpr std::string_view kKinds[] = {"filters", "scorers", "picker"};

// The composed section's own keys, around the plugins': each kind's section is followed by its plugins'.
constexpr ConfigKey kSectionKey = {
    .path = "composed",
    .type = K::section,
    .help = "router \"composed\": filters, weighted scorers and a picker (docs/routing-policies.md)"};
constexpr ConfigKey kOwnKeys[] = {
    {.path = "composed.name",
     .type = K::text,
     .def  = "\"composed\"",
     .help = "names the policy and its random stream (router.NAME): a built-in router's name draws its numbers"},
    {.path = "composed.scheduler",
     .type = K::text,
     .def  = "\"\"",
     .help = "an llm-d EndpointPickerConfig (YAML): its decode profile gives the plugins; filters, scorers and "
             "picker given here replace its entries"},
};
constexpr ConfigKey kKindKeys[] = {
    {.path = "composed.filters",
     .type = K::section,
     .help = "filters, applied in this reference's order; one that would leave no candidate is skipped (counted)"},
    {.path = "composed.scorers",
     .type = K::section,
     .help = "scorers: a worker's total is the weighted sum of its scores, each in [0, 1]"},
    {.path = "composed.picker", .type = K::section},  // help: default_picker_help
};
// Every scorer's key: its weight.
constexpr ConfigKey kWeightKey = {
    .path = "weight", .type = K::number, .def = "1", .min = 0, .max = 1e6, .help = "the score's weight in the total"};

// A section that names no picker gets the catalog's first.
const PluginEntry* default_picker(PluginCatalog plugins)
{
  const auto first = std::find_if(plugins.begin(), plugins.end(), [](const PluginEntry* e) { return e->picker; });
  if (first == plugins.end())
    throw std::logic_error("the plugin table has no picker");
  return *first;
}

// The smallest weight above 0: weights span at most 1e12 (up to 1e6), so weighted scores stay normal
// numbers and scaling every weight keeps the policy.
constexpr double kMinWeight = 1e-6;

// A plugin's parameters through its declarations, into a step's params (by type, so the reader checks
// each value against its declaration).
Json read_params(ConfigReader& r, const PluginEntry& e)
{
  Json out = Json::object();
  for (const ConfigKey& k : e.keys) {
    const std::string key(k.path);
    switch (k.type) {
    case K::number:
      out[key] = r.number(key);
      break;
    case K::integer:
      out[key] = r.integer(key);
      break;
    case K::boolean:
      out[key] = r.boolean(key);
      break;
    case K::text:
      out[key] = r.text(key);
      break;
    case K::choice:
      out[key] = r.choice(key);
      break;
    default:
      throw std::logic_error("plugin " + std::string(e.type) + ": key " + key + " of a type plugins cannot use");
    }
  }
  return out;
}

std::string read_name(ConfigReader& r)
{
  const std::string name = r.text("name");
  if (name.empty())
    r.fail("name", "must not be empty (it names the policy and its random stream)");
  return name;
}

// A scheduler file's notes wait until the section is known to apply (check_composed_with): a run that
// refuses the section says only why. Each note is said once in a process (a sweep reads the file for
// every point).
std::vector<std::string>& scheduler_notes()
{
  static std::vector<std::string> pending;
  return pending;
}

void say_scheduler_notes()
{
  static std::set<std::string> said;
  for (const std::string& n : scheduler_notes())
    if (said.insert(n).second)
      std::fprintf(stderr, "eldrsim: note: %s\n", n.c_str());
  scheduler_notes().clear();
}

}  // namespace

std::string_view plugin_kind(const PluginEntry& e)
{
  return e.filter ? kKinds[0] : e.scorer ? kKinds[1] : kKinds[2];
}

const PluginEntry* find_plugin(PluginCatalog plugins, std::string_view type)
{
  for (const PluginEntry* e : plugins)
    if (e->type == type)
      return e;
  return nullptr;
}

bool Composition::uses_fit(std::string_view fit) const
{
  const auto reads = [&](const Step& s) { return !fit.empty() && s.plugin && s.plugin->fit == fit; };
  return std::any_of(filters.begin(), filters.end(), reads) || std::any_of(scorers.begin(), scorers.end(), reads) ||
         reads(picker);
}

CompositionSections::CompositionSections(PluginCatalog plugins) : plugins_(plugins)
{
  // The composed section's keys, each plugin's after its kind's; the owner of each, for the prefill table.
  std::vector<const PluginEntry*> owner;
  auto add = [&](ConfigKey k, const PluginEntry* by) {
    composed_.push_back(k);
    owner.push_back(by);
  };
  add(kSectionKey, nullptr);
  for (const ConfigKey& k : kOwnKeys)
    add(k, nullptr);
  for (size_t kind = 0; kind < std::size(kKinds); ++kind) {
    ConfigKey kind_key = kKindKeys[kind];
    if (kKinds[kind] == "picker")
      kind_key.help = texts_.emplace_back(
          "the picker, exactly one (absent: " + std::string(default_picker(plugins_)->type) + " with its defaults)");
    add(kind_key, nullptr);
    for (const PluginEntry* e : plugins_) {
      if (plugin_kind(*e) != kKinds[kind])
        continue;
      const std::string& section = texts_.emplace_back(std::string(kKindKeys[kind].path) + "." + std::string(e->type));
      add({.path = section, .type = K::section, .help = e->help}, e);
      std::vector<ConfigKey> params(e->keys.begin(), e->keys.end());
      if (e->scorer)
        params.insert(params.begin(), kWeightKey);
      for (ConfigKey k : params) {
        k.path = texts_.emplace_back(section + "." + std::string(k.path));
        add(k, e);
      }
    }
  }
  // The prefill router's section: the same keys under prefill_router, but for the plugins it cannot
  // run; its scheduler file gives the prefill profile.
  for (size_t i = 0; i < composed_.size(); ++i) {
    ConfigKey k = composed_[i];
    if (owner[i] && !owner[i]->not_for_prefill.empty())
      continue;
    const std::string_view path = k.path;
    k.path = texts_.emplace_back("prefill_router" + std::string(path.substr(std::string_view("composed").size())));
    if (k.path == "prefill_router")
      k.help = "the prefill router as a composition (docs/routing-policies.md); no plugin given: the front end's "
               "consistent-hash ring (serving.prefill_hash_vnodes, serving.prefill_load_factor)";
    if (k.path == "prefill_router.name") {
      k.def  = "\"prefill\"";
      k.help = "names the prefill policy and its random stream (router.NAME)";
    }
    if (k.path == "prefill_router.scheduler")
      k.help = "an llm-d EndpointPickerConfig (YAML) with a P/D profile handler: its prefill profile gives the "
               "plugins; filters, scorers and picker given here replace its entries (run --scheduler sets it for a "
               "P/D file)";
    prefill_.push_back(k);
  }
}

// Reads filters, scorers and picker from `r` (the composed section, or what a scheduler file maps to),
// in the catalog's order whatever the section's.
Composition CompositionSections::read_steps(ConfigReader& r) const
{
  Composition c;
  for (const bool filters : {true, false}) {
    ConfigReader kind = r.section(filters ? "filters" : "scorers");
    for (const PluginEntry* e : plugins_) {
      if (filters ? !e->filter : !e->scorer)
        continue;
      const std::string type(e->type);
      if (!kind.has(type))
        continue;
      if (!kind.declares(type))
        kind.fail(type, "not for the prefill router: " + std::string(e->not_for_prefill));
      ConfigReader s = kind.section(type);
      Step step{e};
      if (filters) {
        step.params = read_params(s, *e);
        s.finish();
        c.filters.push_back(std::move(step));
        continue;
      }
      step.weight = s.number("weight");
      step.params = read_params(s, *e);
      // Totals are compared across candidates: a weight so small that weight x score loses its digits
      // (or goes subnormal) would make a policy and the same policy scaled differ.
      if (step.weight > 0 && step.weight < kMinWeight)
        s.fail("weight", "must be 0 (the scorer off) or at least 1e-6 (smaller weights lose the score's digits; "
                         "scale every weight up instead), got " +
                             s.json()["weight"].dump());
      s.finish();
      if (step.weight > 0)  // weight 0 is the policy without the scorer (a sweep's first point), its state unbuilt
        c.scorers.push_back(std::move(step));
    }
    kind.finish();
  }

  ConfigReader picker                  = r.section("picker");
  const std::vector<std::string> given = picker.keys();
  if (given.size() > 1)
    picker.fail(given[1], "a second picker (give exactly one; the first is '" + given[0] + "')");
  const PluginEntry* e = given.empty() ? default_picker(plugins_) : find_plugin(plugins_, given[0]);
  if (!e || !e->picker) {
    picker.finish();  // the unknown picker's error, with the closest name
    throw std::logic_error("picker '" + given[0] + "' passed the picker section's check");
  }
  if (!picker.declares(std::string(e->type)))
    picker.fail(std::string(e->type), "not for the prefill router: " + std::string(e->not_for_prefill));
  ConfigReader p  = picker.section(std::string(e->type));
  c.picker.plugin = e;
  c.picker.params = read_params(p, *e);
  p.finish();
  picker.finish();
  return c;
}

// A resolved section: the scheduler file, if any, already expanded into filters, scorers and picker.
Composition CompositionSections::read_section(ConfigReader& r) const
{
  const std::string name = read_name(r);
  if (r.has("scheduler"))
    r.ignore("scheduler");
  Composition c = read_steps(r);
  c.name        = name;
  r.finish();
  return c;
}

void CompositionSections::check_composed_with(const ConfigReader& /*r*/, const Experiment& /*x*/)
{
  say_scheduler_notes();
}

void CompositionSections::check_composed(ConfigReader& r, const std::string& root) const
{
  if (r.text("scheduler").empty()) {
    read_section(r);
    return;
  }
  read_with_scheduler(r, root, composed_, "composed", ProfileRole::decode);
}

// A section with a scheduler file (given in `r`): the file's `role` profile, each of the section's own
// filters, scorers and picker replacing the file's entry of that type (the picker: the file's picker).
void CompositionSections::read_with_scheduler(ConfigReader& r, const std::string& root, KeyTable keys, const char* path,
                                              ProfileRole role) const
{
  namespace fs     = std::filesystem;
  std::string file = r.text("scheduler");
  file             = fs::path(file).is_absolute() || fs::exists(file) ? file : (fs::path(root) / file).string();
  require_file(file, r, "scheduler");
  read_name(r);
  // The section's own entries, checked where they were written first.
  Json own = r.json();
  own.erase("scheduler");
  own.erase("name");
  ConfigReader given(own, r.file(), keys, nullptr, path);  // the file's entries come later
  read_steps(given);
  given.finish();

  scheduler_notes().clear();
  Json merged = read_endpoint_picker_config(file, plugins_, &scheduler_notes(), role);
  for (const char* kind : {"filters", "scorers"})
    if (own.contains(kind)) {
      merged[kind].merge_patch(own[kind]);
      r.ignore(kind);
    }
  if (own.contains("picker")) {
    merged["picker"] = own["picker"];
    r.ignore("picker");
  }
  ConfigReader m = r.over(merged, file);
  read_steps(m);
  m.finish();
  r.finish();
}

// The prefill router's section: a composition when it gives a plugin (else nothing is recorded: the
// ring routes, configured under serving).
void CompositionSections::check_prefill(ConfigReader& r, const std::string& root) const
{
  if (r.has("scheduler") && !r.text("scheduler").empty()) {
    read_with_scheduler(r, root, prefill_, "prefill_router", ProfileRole::prefill);
    return;
  }
  if (r.has("filters") || r.has("scorers") || r.has("picker")) {
    const Json& given = r.json();
    const bool named  = std::any_of(std::begin(kKinds), std::end(kKinds), [&](std::string_view kind) {
      const std::string k(kind);
      return given.contains(k) && !(given[k].is_object() && given[k].empty());
    });
    if (!named)  // {"scorers": {}} would replace the ring by a random choice, {} keeps it
      r.fail(given.contains("scorers")   ? "scorers"
             : given.contains("filters") ? "filters"
                                         : "picker",
             "names no plugin: remove it to keep the front end's consistent-hash ring, or name a filter, scorer or "
             "picker");
    read_section(r);
    return;
  }
  if (r.has("name")) {
    ConfigReader unrecorded(r.json(), r.file(), prefill_, nullptr, "prefill_router");
    read_name(unrecorded);  // checked all the same
    r.ignore("name");
  }
  r.finish();
}

// Scorers of the prefill router that read the prefill workers' KV caches: without a prefix cache
// every worker scores the same, and the router picks at random. A scheduler file's prefill profile is
// run as llm-d runs it: its cache scorers are said to score alike. A P/D file routing decode whose
// prefill profile does not route prefill is said too.
void CompositionSections::check_prefill_with(const ConfigReader& r, const Experiment& x) const
{
  static const Json kNone = Json::object();
  const auto scorers_of   = [](const Json& section) -> const Json& {
    return section.is_object() && section.contains("scorers") && section["scorers"].is_object() ? section["scorers"]
                                                                                                  : kNone;
  };
  const bool own_file = r.has("scheduler") && !r.json()["scheduler"].get<std::string>().empty();
  if (x.router == "composed" && x.resolved.contains("composed") && !own_file) {
    const std::string decode_file = x.resolved["composed"].value("scheduler", "");
    if (!decode_file.empty() && has_prefill_profile(decode_file))
      scheduler_notes().push_back(decode_file + ": its prefill profile does not route prefill here: set "
                                                "prefill_router.scheduler to this file (run --scheduler does)");
  }
  const Json& own = scorers_of(r.json());
  const Json& all = x.resolved.contains("prefill_router") ? scorers_of(x.resolved["prefill_router"]) : kNone;
  for (const PluginEntry* e : plugins_) {
    const std::string type(e->type);
    if (x.serving.prefix_cache || !e->scorer || !e->reads_kv_cache)
      continue;
    const std::string why = "scores every prefill worker the same without serving.prefix_cache (a prefill worker "
                            "keeps no KV between prompts)";
    if (own.contains(type) && !(own[type].contains("weight") && own[type]["weight"] == 0))
      r.fail("scorers." + type,
             why + ", so prefill would be routed at random: set serving.prefix_cache true, or remove it");
    if (!own.contains(type) && all.contains(type) && all[type].value("weight", 1.0) > 0)
      scheduler_notes().push_back(r.file() + ": prefill_router.scheduler: the file's " + type + " " + why +
                                  ": the profile's other scorers decide");
  }
  say_scheduler_notes();
}

Composition CompositionSections::read(const Json& section, const std::string& file) const
{
  ConfigReader r(section, file, composed_, nullptr, "composed");
  return read_section(r);
}

std::optional<Composition> CompositionSections::read_prefill(const Json& section, const std::string& file) const
{
  if (!section.contains("filters") && !section.contains("scorers") && !section.contains("picker"))
    return std::nullopt;
  ConfigReader r(section, file, prefill_, nullptr, "prefill_router");
  return read_section(r);
}

}  // namespace eldr
