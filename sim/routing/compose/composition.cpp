// The `composed` section's declarations and reader. Each plugin type is a section of its kind
// (composed.scorers.queue-scorer), present when the policy uses it, with its parameters as keys: the
// declarations are the plugin reference (`eldrsim config keys`, docs/config-reference.md), and a sweep
// reaches a weight by its dotted path (composed.scorers.expert-locality-scorer.weight).
#include "sim/routing/compose/composition.hpp"
#include "sim/config/config_reader.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <set>

namespace eldr {

namespace {

using K = KeyType;

// Plugin type names follow llm-d's where llm-d has the plugin (queue-scorer, kv-cache-utilization-scorer,
// prefix-cache-scorer, max-score-picker, random-picker); the others are eldr-sim's, named the same way.
constexpr KeyChoice kFilters[] = {
    {"label-pool-filter", "the domain oracle's pool for the request's label (every worker for a label without one)"},
    {"load-threshold-filter", "workers with at most max_in_flight requests in flight"},
    {"locality-band-filter",
     "ELDR's locality band: workers within eldr.tau of the best signature similarity (the eldr section's model)"},
};
constexpr KeyChoice kScorers[] = {
    {"queue-scorer", "fewest in-flight requests: (max - n) / (max - min) over the candidates, 1 when all equal"},
    {"kv-cache-utilization-scorer", "free KV memory: 1 - the fraction of KV blocks held by running requests"},
    {"prefix-cache-scorer", "the fraction of the prompt's full KV blocks cached on the worker (decode prefix cache)"},
    {"expert-locality-scorer",
     "signature similarity to the worker's profile, (s - min) / (max - min) over the candidates (the eldr "
     "section's model)"},
    {"label-match-scorer", "1 on the workers of the request label's pool, else 0"},
    {"precise-prefix-cache-scorer",
     "llm-d's KV-event prefix scorer: the prompt's full KV blocks cached on the worker, (n - min) / (max - min) "
     "over the workers with a hit (1 when their hits are equal), 0 without a hit"},
    {"active-request-scorer",
     "llm-d's in-flight scorer: 1 with at most idle_threshold requests in flight, else (max - n) / max x "
     "max_busy_score, max over every worker"},
};
constexpr KeyChoice kPickers[] = {
    {"max-score-picker", "the highest total score"},
    {"random-picker", "uniformly at random among the candidates, or among the top_k by score"},
    {"p2c-picker", "power of two choices: two distinct random candidates, the higher score (the first drawn on a tie)"},
    {"round-robin-picker", "workers in turn, skipping those filtered out"},
};
constexpr KeyChoice kTieBreaks[] = {
    {"random", "uniformly among the tied candidates"},
    {"lowest-index", "the lowest-numbered tied candidate"},
};

#define SCORER(TYPE, HELP)                                                                                             \
  {.path = "composed.scorers." TYPE, .type = K::section, .help = HELP},                                                \
  {                                                                                                                    \
    .path = "composed.scorers." TYPE ".weight", .type = K::number, .def = "1", .min = 0, .max = 1e6,                   \
    .help = "the score's weight in the total"                                                                          \
  }

const ConfigKey kComposedKeys[] = {
    {.path = "composed",
     .type = K::section,
     .help = "router \"composed\": filters, weighted scorers and a picker (docs/routing-policies.md)"},
    {.path = "composed.name",
     .type = K::text,
     .def  = "\"composed\"",
     .help = "names the policy and its random stream (router.NAME): a built-in router's name draws its numbers"},
    {.path = "composed.scheduler",
     .type = K::text,
     .def  = "\"\"",
     .help = "an llm-d EndpointPickerConfig (YAML): its decode profile gives the plugins; filters, scorers and "
             "picker given here replace its entries"},
    {.path = "composed.filters",
     .type = K::section,
     .help = "filters, applied in this reference's order; one that would leave no candidate is skipped (counted)"},
    {.path = "composed.filters.label-pool-filter", .type = K::section, .help = kFilters[0].help},
    {.path = "composed.filters.load-threshold-filter", .type = K::section, .help = kFilters[1].help},
    {.path = "composed.filters.load-threshold-filter.max_in_flight",
     .type = K::integer,
     .def  = "16",
     .unit = "requests",
     .min  = 0,
     .max  = 1e6,
     .help = "the most in-flight requests a candidate may hold"},
    {.path = "composed.filters.locality-band-filter", .type = K::section, .help = kFilters[2].help},
    {.path = "composed.scorers",
     .type = K::section,
     .help = "scorers: a worker's total is the weighted sum of its scores, each in [0, 1]"},
    SCORER("queue-scorer", kScorers[0].help),
    SCORER("kv-cache-utilization-scorer", kScorers[1].help),
    SCORER("prefix-cache-scorer", kScorers[2].help),
    SCORER("expert-locality-scorer", kScorers[3].help),
    SCORER("label-match-scorer", kScorers[4].help),
    SCORER("precise-prefix-cache-scorer", kScorers[5].help),
    SCORER("active-request-scorer", kScorers[6].help),
    {.path = "composed.scorers.active-request-scorer.idle_threshold",
     .type = K::integer,
     .def  = "0",
     .unit = "requests",
     .min  = 0,
     .max  = 1e6,
     .help = "a worker with at most this many requests in flight is idle: score 1 (llm-d's idleThreshold)"},
    {.path = "composed.scorers.active-request-scorer.max_busy_score",
     .type = K::number,
     .def  = "1",
     .min  = 0,
     .max  = 1,
     .help = "the score of the least busy worker above idle_threshold (llm-d's maxBusyScore)"},
    {.path = "composed.picker",
     .type = K::section,
     .help = "the picker, exactly one (absent: max-score-picker with its defaults)"},
    {.path = "composed.picker.max-score-picker", .type = K::section, .help = kPickers[0].help},
    {.path    = "composed.picker.max-score-picker.tie_break",
     .type    = K::choice,
     .def     = "\"random\"",
     .choices = kTieBreaks,
     .help    = "among candidates with the same total"},
    {.path = "composed.picker.random-picker", .type = K::section, .help = kPickers[1].help},
    {.path = "composed.picker.random-picker.top_k",
     .type = K::integer,
     .def  = "0",
     .unit = "workers",
     .min  = 0,
     .max  = 1e6,
     .help = "0: every candidate; k: the k highest totals (ties by lowest index)"},
    {.path = "composed.picker.p2c-picker", .type = K::section, .help = kPickers[2].help},
    {.path = "composed.picker.round-robin-picker", .type = K::section, .help = kPickers[3].help},
};
#undef SCORER

// The prefill router's section: the composed section's keys under prefill_router, but for the locality
// plugins (a prompt's experts are known only once it is prefilled); its scheduler file gives the prefill
// profile.
KeyTable prefill_keys()
{
  static std::deque<std::string> paths;
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> out;
    for (ConfigKey k : kComposedKeys) {
      const std::string_view path = k.path;
      if (path.find("locality") != std::string_view::npos)
        continue;
      k.path = paths.emplace_back("prefill_router" + std::string(path.substr(std::string_view("composed").size())));
      if (k.path == "prefill_router")
        k.help = "the prefill router as a composition (docs/routing-policies.md); no plugin given: the front end's "
                 "consistent-hash ring (serving.prefill_hash_vnodes, serving.prefill_load_factor)";
      if (k.path == "prefill_router.name") {
        k.def  = "\"prefill\"";
        k.help = "names the prefill policy and its random stream (router.NAME)";
      }
      if (k.path == "prefill_router.scheduler")
        k.help = "an llm-d EndpointPickerConfig (YAML) with a P/D profile handler: its prefill profile gives the "
                 "plugins; filters, scorers and picker given here replace its entries (run --scheduler sets it "
                 "for a P/D file)";
      out.push_back(k);
    }
    return out;
  }();
  return keys;
}

// The smallest weight above 0: weights span at most 1e12 (up to 1e6), so weighted scores stay normal
// numbers and scaling every weight keeps the policy.
constexpr double kMinWeight = 1e-6;

constexpr const char* kPluginKinds[] = {"filters", "scorers", "picker"};

// A plugin of the decode router that a section's table leaves out (the prefill router's).
constexpr const char* kNotHere =
    "not for the prefill router: expert locality needs the prompt's experts, known only once it is prefilled";

// Reads filters, scorers and picker from `r` (the composed section, or what a scheduler file maps to).
Composition read_steps(ConfigReader& r)
{
  Composition c;
  ConfigReader filters = r.section("filters");
  for (size_t i = 0; i < std::size(kFilters); ++i) {
    const std::string type(kFilters[i].value);
    if (!filters.has(type))
      continue;
    if (!filters.declares(type))
      filters.fail(type, kNotHere);
    ConfigReader f = filters.section(type);
    FilterStep step;
    step.type = FilterType(i);
    if (step.type == FilterType::load_threshold)
      step.max_in_flight = f.integer("max_in_flight");
    f.finish();
    c.filters.push_back(step);
  }
  filters.finish();

  ConfigReader scorers = r.section("scorers");
  for (size_t i = 0; i < std::size(kScorers); ++i) {
    const std::string type(kScorers[i].value);
    if (!scorers.has(type))
      continue;
    if (!scorers.declares(type))
      scorers.fail(type, kNotHere);
    ConfigReader s      = scorers.section(type);
    const double weight = s.number("weight");
    ScorerStep step{ScorerType(i), weight};
    if (step.type == ScorerType::active_request) {
      step.idle_threshold = s.integer("idle_threshold");
      step.max_busy_score = s.number("max_busy_score");
    }
    // Totals are compared across candidates: a weight so small that weight x score loses its digits (or
    // goes subnormal) would make a policy and the same policy scaled differ.
    if (weight > 0 && weight < kMinWeight)
      s.fail("weight", "must be 0 (the scorer off) or at least 1e-6 (smaller weights lose the score's digits; scale "
                       "every weight up instead), got " +
                           s.json()["weight"].dump());
    s.finish();
    if (weight > 0)  // weight 0 is the policy without the scorer (a sweep's first point), its state unbuilt
      c.scorers.push_back(step);
  }
  scorers.finish();

  ConfigReader picker                  = r.section("picker");
  const std::vector<std::string> given = picker.keys();
  if (given.size() > 1)
    picker.fail(given[1], "a second picker (give exactly one; the first is '" + given[0] + "')");
  size_t i = 0;
  if (!given.empty()) {
    const auto* it =
        std::find_if(std::begin(kPickers), std::end(kPickers), [&](const KeyChoice& p) { return p.value == given[0]; });
    if (it == std::end(kPickers))
      picker.finish();  // the unknown picker's error, with the closest name
    i = size_t(it - std::begin(kPickers));
  }
  ConfigReader p = picker.section(std::string(kPickers[i].value));
  c.picker.type  = PickerType(i);
  if (c.picker.type == PickerType::max_score)
    c.picker.ties = p.choice_of<TieBreak>("tie_break");
  if (c.picker.type == PickerType::random)
    c.picker.top_k = p.integer("top_k");
  p.finish();
  picker.finish();
  return c;
}

std::string read_name(ConfigReader& r)
{
  const std::string name = r.text("name");
  if (name.empty())
    r.fail("name", "must not be empty (it names the policy and its random stream)");
  return name;
}

// A resolved section: the scheduler file, if any, already expanded into filters, scorers and picker.
Composition read_section(ConfigReader& r)
{
  const std::string name = read_name(r);
  if (r.has("scheduler"))
    r.ignore("scheduler");
  Composition c = read_steps(r);
  c.name        = name;
  r.finish();
  return c;
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

void check_composed_with(const ConfigReader& /*r*/, const Experiment& /*x*/)
{
  say_scheduler_notes();
}

// A section with a scheduler file (given in `r`): the file's `role` profile, each of the section's own
// filters, scorers and picker replacing the file's entry of that type (the picker: the file's picker).
void read_with_scheduler(ConfigReader& r, const std::string& root, KeyTable keys, const char* path, ProfileRole role)
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
  Json merged = read_endpoint_picker_config(file, &scheduler_notes(), role);
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

// The section as given: with a scheduler file, its decode profile's plugins under the section's own.
void check_composed_section(ConfigReader& r, const std::string& root)
{
  if (r.text("scheduler").empty()) {
    read_section(r);
    return;
  }
  read_with_scheduler(r, root, kComposedKeys, "composed", ProfileRole::decode);
}

// The prefill router's section: a composition when it gives a plugin (else nothing is recorded: the
// ring routes, configured under serving).
void check_prefill_section(ConfigReader& r, const std::string& root)
{
  if (r.has("scheduler") && !r.text("scheduler").empty()) {
    read_with_scheduler(r, root, prefill_keys(), "prefill_router", ProfileRole::prefill);
    return;
  }
  if (r.has("filters") || r.has("scorers") || r.has("picker")) {
    const Json& given = r.json();
    const bool named  = std::any_of(kPluginKinds, std::end(kPluginKinds), [&](const char* kind) {
      return given.contains(kind) && !(given[kind].is_object() && given[kind].empty());
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
    ConfigReader unrecorded(r.json(), r.file(), prefill_keys(), nullptr, "prefill_router");
    read_name(unrecorded);  // checked all the same
    r.ignore("name");
  }
  r.finish();
}

// Scorers of the prefill router that read the prefill workers' prefix caches: without them every
// worker scores the same, and the router picks at random.
// A scheduler file's prefill profile is run as llm-d runs it: its cache scorers are said to score alike.
void check_prefill_with(const ConfigReader& r, const Experiment& x)
{
  static const Json kNone = Json::object();
  const auto scorers_of   = [](const Json& section) -> const Json& {
    return section.is_object() && section.contains("scorers") && section["scorers"].is_object() ? section["scorers"]
                                                                                                  : kNone;
  };
  // A P/D file routing decode whose prefill profile does not route prefill.
  if (x.router == "composed" && x.resolved.contains("composed")) {
    const std::string decode_file = x.resolved["composed"].value("scheduler", "");
    if (!decode_file.empty() && !(r.has("scheduler") && !r.json()["scheduler"].get<std::string>().empty()) &&
        has_prefill_profile(decode_file))
      scheduler_notes().push_back(decode_file + ": its prefill profile does not route prefill here: set "
                                                "prefill_router.scheduler to this file (run --scheduler does)");
  }
  const Json& own = scorers_of(r.json());
  const Json& all = x.resolved.contains("prefill_router") ? scorers_of(x.resolved["prefill_router"]) : kNone;
  for (const char* type : {"kv-cache-utilization-scorer", "prefix-cache-scorer", "precise-prefix-cache-scorer"}) {
    if (x.serving.prefix_cache)
      break;
    const std::string why = "scores every prefill worker the same without serving.prefix_cache (a prefill worker "
                            "keeps no KV between prompts)";
    if (own.contains(type) && !(own[type].contains("weight") && own[type]["weight"] == 0))
      r.fail(std::string("scorers.") + type,
             why + ", so prefill would be routed at random: set serving.prefix_cache true, or remove it");
    if (!own.contains(type) && all.contains(type) && all[type].value("weight", 1.0) > 0)
      scheduler_notes().push_back(r.file() + ": prefill_router.scheduler: the file's " + type + " " + why +
                                  ": the profile's other scorers decide");
  }
  say_scheduler_notes();
}

}  // namespace

const RouterSection kComposedSection = {"composed", kComposedKeys, check_composed_section,
                                        false,      false,         check_composed_with};
const RouterSection kPrefillSection  = {"prefill_router",  prefill_keys(), check_prefill_section, true, false,
                                        check_prefill_with};

bool Composition::uses_expert_locality() const
{
  return std::any_of(filters.begin(), filters.end(),
                     [](const FilterStep& f) { return f.type == FilterType::locality_band; }) ||
         std::any_of(scorers.begin(), scorers.end(),
                     [](const ScorerStep& s) { return s.type == ScorerType::expert_locality; });
}

bool Composition::uses_label_pools() const
{
  return std::any_of(filters.begin(), filters.end(),
                     [](const FilterStep& f) { return f.type == FilterType::label_pool; }) ||
         std::any_of(scorers.begin(), scorers.end(),
                     [](const ScorerStep& s) { return s.type == ScorerType::label_match; });
}

std::span<const KeyChoice> filter_types()
{
  return kFilters;
}
std::span<const KeyChoice> scorer_types()
{
  return kScorers;
}
std::span<const KeyChoice> picker_types()
{
  return kPickers;
}

Composition read_composition(const Json& section, const std::string& file)
{
  ConfigReader r(section, file, kComposedKeys, nullptr, "composed");
  return read_section(r);
}

std::optional<Composition> read_prefill_composition(const Json& section, const std::string& file)
{
  if (!section.contains("filters") && !section.contains("scorers") && !section.contains("picker"))
    return std::nullopt;
  ConfigReader r(section, file, prefill_keys(), nullptr, "prefill_router");
  return read_section(r);
}

}  // namespace eldr
