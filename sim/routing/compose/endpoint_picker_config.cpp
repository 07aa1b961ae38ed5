// llm-d's EndpointPickerConfig (YAML) read into the composed section's JSON form.
//
// The format followed, from these tagged sources (read offline; configs/scheduler/README.md has the
// same list):
//   https://github.com/llm-d/llm-d-inference-scheduler/tree/v0.8.0
//   llm-d/llm-d-inference-scheduler v0.8.0 (commit 05c91f0d655fbd7ea71fc50949c899c360d06f07):
//     deploy/config/pd-epp-config.yaml (the P/D example shipped here), pkg/epp/framework/plugins/register.go
//     (llm-d's plugin types), pkg/epp/framework/plugins/scheduling/profilehandler/disagg/
//     {disagg,pd}_profile_handler.go (the decode profile's name: profiles.decode, or the legacy
//     decodeProfile; default "decode").
//   https://github.com/kubernetes-sigs/gateway-api-inference-extension/tree/v1.5.0
//   kubernetes-sigs/gateway-api-inference-extension v1.5.0 (commit df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849),
//   which that release builds on: apix/config/v1alpha1/endpointpickerconfig_types.go (the file's fields;
//   apiVersion inference.networking.x-k8s.io/v1alpha1), pkg/epp/config/loader/defaults.go
//   (DefaultScorerWeight = 1.0), cmd/epp/runner/runner.go (its plugin types),
//   pkg/epp/framework/plugins/scheduling/picker/common.go (maxNumOfEndpoints),
//   pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/types.go (the prefix cache
//   parameters that prefix-cache-scorer's entry carries).
//   llm-d's documentation gives other apiVersion values for the same fields, accepted as well:
//   llm-d.ai/v1alpha1 (https://llm-d.ai/docs/0.8/api-reference/endpointpickerconfig, which adds a
//   requestHandler field), llm-d.ai/v1 (https://llm-d.ai/docs/dev/architecture/router/configuration)
//   and config.apix.gateway-api-inference-extension.sigs.k8s.io/v1alpha1
//   (https://llm-d.ai/docs/api-reference/endpointpickerconfig).
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/utf8.hpp"
#include "sim/config/config_key.hpp"
#include "sim/routing/compose/composition.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

namespace eldr {

namespace {

// A scheduler config is a few dozen lines: 1 MiB is far above any, and bounds the memory of yaml-cpp's
// nodes (hundreds of bytes each) for a wrong file.
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 20;

constexpr std::string_view kKind          = "EndpointPickerConfig";
constexpr std::string_view kApiVersions[] = {"inference.networking.x-k8s.io/v1alpha1", "llm-d.ai/v1alpha1",
                                             "llm-d.ai/v1",
                                             "config.apix.gateway-api-inference-extension.sigs.k8s.io/v1alpha1"};
// The file's fields; after the first four (GIE v1.5.0; requestHandler: llm-d's 0.8 documentation),
// the request path around the scheduler, not modelled, ignored.
constexpr std::string_view kFields[] = {
    "apiVersion", "kind",        "plugins", "schedulingProfiles", "featureGates", "saturationDetector",
    "dataLayer",  "flowControl", "parser",  "requestHandler"};

// Every candidate of a decode router is a decode worker: llm-d's decode-filter keeps them all; so
// does prefill-filter in a prefill router's profile.
constexpr std::string_view kDecodeFilter  = "decode-filter";
constexpr std::string_view kPrefillFilter = "prefill-filter";
// The P/D profile handlers, which name the decode profile (pd-profile-handler is v0.8.0's legacy alias).
constexpr std::string_view kPdHandlers[] = {"disagg-profile-handler", "pd-profile-handler"};

// The P/D deciders: whether a request is prefilled remotely (always-disagg: every one).
constexpr std::string_view kPdDeciders[] = {"prefix-based-pd-decider"};
constexpr const char* kNoPrefillProfile =
    "no P/D profile handler (disagg-profile-handler, pd-profile-handler), so no prefill profile: give a P/D "
    "file, or route prefill by the front end's ring (remove prefill_router.scheduler)";

// llm-d's filters, scorers and pickers that eldr-sim does not model: a decode profile that uses one
// is refused (the simulation would not be llm-d's policy); another profile may use them.
constexpr std::string_view kNotModelledSteps[] = {
    "prefill-filter",
    "encode-filter",
    "by-label",
    "by-label-selector",
    "prefix-cache-affinity-filter",
    "slo-headroom-tier-filter",
    "lora-affinity-scorer",
    "session-affinity-scorer",
    "load-aware-scorer",
    "no-hit-lru-scorer",
    "context-length-aware",
    "running-requests-size-scorer",
    "token-load-scorer",
    "latency-scorer",
    "predicted-latency-scorer",
    "weighted-random-picker",
};
// llm-d's plugins outside the scheduling steps (profile handlers, P/D deciders, header handlers,
// request data producers, data sources, parsers, flow control, admission): they act around the
// scheduler, so they are accepted and ignored; a profile cannot use them as a step.
constexpr std::string_view kOutsidePlugins[] = {
    "disagg-profile-handler",
    "pd-profile-handler",
    "single-profile-handler",
    "data-parallel-profile-handler",
    "disagg-headers-handler",
    "prefix-based-pd-decider",
    "always-disagg-pd-decider",
    "always-disagg-multimodal-decider",
    "tokenizer",
    "models-data-source",
    "model-server-protocol-models",
    "approx-prefix-cache-producer",
    "inflight-load-producer",
    "predicted-latency-producer",
    "latency-slo-admitter",
    "metrics-data-source",
    "core-metrics-extractor",
    "k8s-notification-source",
    "endpoint-notification-source",
    "request-attribute-reporter",
    "openai-parser",
    "vllmgrpc-parser",
    "passthrough-parser",
    "concurrency-detector",
    "utilization-detector",
    "global-strict-fairness-policy",
    "round-robin-fairness-policy",
    "fcfs-ordering-policy",
    "edf-ordering-policy",
    "slo-deadline-ordering-policy",
    "static-usage-limit-policy",
    "eviction-sheddable-filter",
    "eviction-priority-then-time-ordering",
    "probabilistic-admitter",  // after v0.8.0 (main)
};

// Plugin types llm-d accepted under other names, read as today's (v0.8.0's) with a note.
struct Rename {
  std::string_view old_type;
  std::string_view type;
  std::string_view when;
};
constexpr Rename kRenames[] = {
    // GIE v0.5.0 (llm-d v0.2.0's files): renamed in GIE v1.0.0.
    {"kv-cache-scorer", "kv-cache-utilization-scorer", "GIE v0.5.0's name"},
    // llm-d main at commit 31aff9dc (July 2025, before v0.2.0), its docs/architecture.md.
    {"prefix-cache", "prefix-cache-scorer", "llm-d's name before v0.2.0 (GIE's before v0.5.0)"},
    {"max-score", "max-score-picker", "llm-d's name before v0.2.0 (GIE's before v0.5.0)"},
    {"single-profile", "single-profile-handler", "llm-d's name before v0.2.0 (GIE's before v0.5.0)"},
    {"prefill-header", "disagg-headers-handler", "llm-d's name before v0.2.0 (then prefill-header-handler)"},
    {"kvcache-aware-scorer", "precise-prefix-cache-scorer", "llm-d's name up to v0.1.0"},
    // v0.2.0 to v0.6.1; a legacy alias in v0.8.0 (plugins/register.go).
    {"prefill-header-handler", "disagg-headers-handler", "llm-d's name up to v0.6.1"},
    // llm-d after v0.8.0 (main) renamed tokenizer to token-producer, keeping tokenizer as an alias.
    {"token-producer", "tokenizer", "llm-d's name after v0.8.0"},
};

// Known llm-d parameter, not modelled: llm-d's documented parameters of the plugins read here that
// have no meaning in the simulator (its prefix cache is the workers' own, with the model's block size;
// a picker returns one worker). Accepted so that llm-d's files read unchanged, and dropped.
struct KnownParameter {
  std::string_view type;
  std::string_view name;
};
constexpr KnownParameter kNotModelledParameters[] = {
    {"prefix-cache-scorer", "blockSize"},
    {"prefix-cache-scorer", "blockSizeTokens"},
    {"prefix-cache-scorer", "hashBlockSize"},  // before GIE v1.5.0
    {"prefix-cache-scorer", "autoTune"},
    {"prefix-cache-scorer", "maxPrefixBlocksToMatch"},
    {"prefix-cache-scorer", "maxPrefixTokensToMatch"},
    {"prefix-cache-scorer", "lruCapacityPerServer"},
    {"max-score-picker", "maxNumOfEndpoints"},
    {"random-picker", "maxNumOfEndpoints"},
    // The precise scorer reads the workers' own caches here: its tokenizer, index and event settings
    // have no counterpart (v0.8.0 preciseprefixcache/precise_prefix_cache.go, PluginConfig).
    {"precise-prefix-cache-scorer", "tokenProcessorConfig"},
    {"precise-prefix-cache-scorer", "indexerConfig"},
    {"precise-prefix-cache-scorer", "kvEventsConfig"},
    {"precise-prefix-cache-scorer", "speculativeIndexing"},
    {"precise-prefix-cache-scorer", "speculativeTTL"},
    // A request leaves the in-flight count when it ends here: it never times out of it.
    {"active-request-scorer", "requestTimeout"},
    // The P/D handlers' other parameters pick prefill, encode and the decider (v0.2.0 to v0.8.0).
    {"disagg-profile-handler", "deciders"},
    {"disagg-profile-handler", "encodeProfile"},
    {"disagg-profile-handler", "prefillDeciderPluginName"},
    {"disagg-profile-handler", "encodeDeciderPluginName"},
    {"disagg-profile-handler", "deciderPluginName"},
    {"pd-profile-handler", "prefixPluginType"},
    {"pd-profile-handler", "prefixPluginName"},
    {"pd-profile-handler", "primaryPort"},
    {"pd-profile-handler", "deciderPluginName"},
    {"pd-profile-handler", "threshold"},
    {"pd-profile-handler", "hashBlockSize"},
};

template <class R> bool contains(const R& range, std::string_view s)
{
  return std::find(std::begin(range), std::end(range), s) != std::end(range);
}

template <class R> std::string joined(const R& range)
{
  std::string out;
  for (const auto& s : range)
    out += (out.empty() ? "" : ", ") + std::string(s);
  return out;
}

std::string join(const std::string& field, std::string_view key)
{
  return field.empty() ? std::string(key) : field + "." + std::string(key);
}

std::string item(const std::string& field, size_t i)
{
  return field + "[" + std::to_string(i) + "]";
}

// Present and not null: an empty value (`weight:`) or ~ counts as absent, as in llm-d's Go decoding.
bool given(const YAML::Node& node)
{
  return node.IsDefined() && !node.IsNull();
}

// A YAML number's text as from_chars reads it: YAML allows a leading '+'.
std::string_view number_text(std::string_view s)
{
  return s.size() > 1 && s[0] == '+' ? s.substr(1) : s;
}

std::string in_quotes(std::string_view s)
{
  return "'" + std::string(s) + "'";
}

// tieBreak -> tie_break: the YAML names are camelCase as llm-d's, the composed section's keys snake_case.
std::string snake_case(std::string_view name)
{
  std::string out;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z')
      out += std::string("_") + char(c - 'A' + 'a');
    else
      out += c;
  }
  return out;
}

std::string camel_case(std::string_view name)
{
  std::string out;
  bool upper = false;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c;
    upper = false;
  }
  return out;
}

// The composed section's kind holding plugin `type` ("filters", "scorers", "picker"), or "".
std::string kind_of(PluginCatalog plugins, std::string_view type)
{
  const PluginEntry* e = find_plugin(plugins, type);
  return e ? std::string(plugin_kind(*e)) : "";
}

std::vector<std::string> supported_types(PluginCatalog plugins)
{
  std::vector<std::string> out;
  for (const std::string_view kind : {"filters", "scorers", "picker"})
    for (const PluginEntry* e : plugins)
      if (plugin_kind(*e) == kind)
        out.emplace_back(e->type);
  out.emplace_back(kDecodeFilter);
  return out;
}

struct Reader {
  const std::string& path;
  std::vector<std::string>* notes;  // may be null
  PluginCatalog catalog;            // the registered plugins

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const
  {
    throw InputError(path, field, problem);
  }

  // What llm-d runs but eldr-sim reads differently or drops: said, not refused.
  void note(const std::string& field, const std::string& what) const
  {
    if (notes)
      notes->push_back(path + ": " + (field.empty() ? "" : field + ": ") + what);
  }

  // The keys of mapping `node`, each once; `allowed` (when not empty) lists those it may hold.
  std::vector<std::string> keys(const YAML::Node& node, const std::string& field, const std::string& what,
                                std::span<const std::string_view> allowed = {}) const
  {
    if (!node.IsMap())
      fail(field, "must be a mapping (" + what + ")");
    std::vector<std::string> out;
    std::set<std::string> seen;  // not a scan of `out`: a mapping may hold a million keys
    for (const auto& kv : node) {
      if (!kv.first.IsScalar())
        fail(field, "has a key that is not a name");
      const std::string& key = kv.first.Scalar();
      if (!seen.insert(key).second)
        fail(join(field, key), "given twice (a key may appear once in a mapping)");
      if (!allowed.empty() && !contains(allowed, key)) {
        const std::vector<std::string> names(allowed.begin(), allowed.end());
        const std::string near = closest_name(key, names);
        fail(join(field, key), "unknown field" + (near.empty() ? "" : " (did you mean " + in_quotes(near) + "?)") +
                                   "; " + (field.empty() ? "the file" : field) + " takes " + joined(allowed));
      }
      out.push_back(key);
    }
    return out;
  }

  std::string text(const YAML::Node& node, const std::string& field) const
  {
    if (!node.IsDefined())
      fail(field, "missing (required)");
    if (!node.IsScalar() || node.Scalar().empty())
      fail(field, "must be a non-empty text");
    return node.Scalar();
  }

  void list(const YAML::Node& node, const std::string& field, const std::string& what) const
  {
    if (!node.IsDefined())
      fail(field, "missing (required: " + what + ")");
    if (!node.IsSequence())
      fail(field, "must be a list (" + what + ")");
  }

  double weight(const YAML::Node& node, const std::string& field) const
  {
    double w = 0;
    // The text outlives the view into it (a conditional of a string and "" would be a temporary).
    const std::string text   = node.IsScalar() && node.Tag() != "!" ? node.Scalar() : std::string();
    const std::string_view s = number_text(text);
    const auto [end, ec]     = std::from_chars(s.data(), s.data() + s.size(), w);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(w))
      fail(field,
           "must be a number (the scorer's weight)" + (node.IsScalar() ? ", not " + in_quotes(node.Scalar()) : ""));
    if (w < 0)
      fail(field, "must not be negative (got " + std::string(s) + "): a weight of 0 turns a scorer off");
    return w;
  }

  // A parameter's YAML scalar as JSON: integer, number, true/false, or text (quoted: always text).
  Json scalar(const YAML::Node& node, const std::string& field) const
  {
    if (!node.IsScalar())
      fail(field, "must be one value (a number, true/false or a text), not a list or mapping");
    const std::string& s = node.Scalar();
    if (node.Tag() == "!")
      return s;
    if (s == "true" || s == "false")
      return s == "true";
    const std::string_view n = number_text(s);
    const char* end          = n.data() + n.size();
    long long i              = 0;
    if (auto r = std::from_chars(n.data(), end, i); !n.empty() && r.ec == std::errc() && r.ptr == end)
      return i;
    double d = 0;
    if (auto r = std::from_chars(n.data(), end, d); !n.empty() && r.ec == std::errc() && r.ptr == end) {
      if (!std::isfinite(d))
        fail(field, "must be a finite number, not " + in_quotes(s));
      return d;
    }
    return s;
  }
};

struct Plugin {
  std::string name;
  std::string type;
  YAML::Node parameters;  // a mapping, or undefined/null when none
  std::string field;      // plugins[i]
};

const Rename* renamed(std::string_view type)
{
  for (const Rename& r : kRenames)
    if (r.old_type == type)
      return &r;
  return nullptr;
}

// The type an unknown one most likely means: one it begins (prefill-header: prefill-header-handler,
// before a rename) or, failing that, the nearest spelling; an old name is given as today's.
std::string suggestion(std::string_view type, const std::vector<std::string>& known)
{
  std::vector<std::string> all = known;
  all.insert(all.end(), std::begin(kNotModelledSteps), std::end(kNotModelledSteps));
  all.insert(all.end(), std::begin(kOutsidePlugins), std::end(kOutsidePlugins));
  for (const Rename& r : kRenames)
    all.emplace_back(r.old_type);
  std::string near;
  for (const std::string& name : all)
    if (name.size() > type.size() && name.compare(0, type.size(), type) == 0 && name[type.size()] == '-' &&
        (near.empty() || name.size() < near.size()))
      near = name;
  if (near.empty())
    near = closest_name(type, all);
  const Rename* old = renamed(near);
  return old ? std::string(old->type) : near;
}

// A plugin type of llm-d (or GIE) that eldr-sim reads, as opposed to eldr-sim's own.
bool llm_d_type(std::string_view type)
{
  constexpr std::string_view kLlmd[] = {"queue-scorer",          "kv-cache-utilization-scorer",
                                        "prefix-cache-scorer",   "precise-prefix-cache-scorer",
                                        "active-request-scorer", "max-score-picker",
                                        "random-picker",         "decode-filter"};
  return contains(kLlmd, type) || contains(kPdHandlers, type);
}

// The parameters of a plugin eldr-sim reads (its own types, llm-d's mapped ones, the P/D handlers):
// every one must be llm-d's or declared by the composed section; eldr-sim's are returned as JSON.
Json plugin_parameters(const Reader& r, const Plugin& p)
{
  Json out         = Json::object();
  const bool none  = !p.parameters.IsDefined() || p.parameters.IsNull();
  const auto field = join(p.field, "parameters");
  if (none)
    return out;
  const std::string kind = kind_of(r.catalog, p.type);
  std::vector<std::string> dropped, ignored;
  for (const std::string& key : r.keys(p.parameters, field, "the plugin's parameters, name: value")) {
    const auto known = [&](const KnownParameter& k) { return k.type == p.type && k.name == key; };
    if (std::any_of(std::begin(kNotModelledParameters), std::end(kNotModelledParameters), known)) {
      dropped.push_back(key);
      continue;
    }
    if (contains(kPdHandlers, p.type) &&
        (key == "decodeProfile" || key == "prefillProfile" || (key == "profiles" && p.type == kPdHandlers[0])))
      continue;  // read by role_profile
    const std::string snake = snake_case(key);
    // One spelling, llm-d's camelCase: tie_break is not taken for tieBreak.
    const bool camel         = key.find('_') == std::string::npos;
    const PluginEntry* entry = find_plugin(r.catalog, p.type);
    if (entry && camel && snake != "weight" && find_key(entry->keys, snake)) {
      out[snake] = r.scalar(p.parameters[key], join(field, key));
      continue;
    }
    std::vector<std::string> own;
    if (entry)
      for (const std::string& k : key_siblings(entry->keys, ""))
        own.push_back(camel_case(k));
    std::vector<std::string> llmd;
    for (const KnownParameter& k : kNotModelledParameters)
      if (k.type == p.type)
        llmd.emplace_back(k.name);
    if (p.type == kPdHandlers[0])
      llmd.insert(llmd.begin(), "profiles");
    if (contains(kPdHandlers, p.type))
      llmd.insert(llmd.begin(), "decodeProfile");
    // llm-d decodes parameters with Go's encoding/json, which skips a field its plugin does not have:
    // llm-d runs such a file, so it is read with a note, unless the plugin is eldr-sim's own or the
    // name is a near miss of a parameter (a typo that would change the policy) or a scorer's weight.
    std::vector<std::string> all = own;
    all.insert(all.end(), llmd.begin(), llmd.end());
    if (llm_d_type(p.type) && snake != "weight" && closest_name(key, all).empty()) {
      ignored.push_back(key);
      continue;
    }
    std::string problem = "unknown parameter of " + p.type;
    if (snake == "weight" && kind == "scorers")
      problem += ": a scorer's weight is the profile's (schedulingProfiles[].plugins[].weight)";
    problem += " (its parameters: " + (own.empty() ? std::string("none") : joined(own));
    if (!llmd.empty())
      problem += "; llm-d's, accepted but not modelled: " + joined(llmd);
    r.fail(join(field, key), problem + ")");
  }
  if (!dropped.empty())
    r.note(field, joined(dropped) + ": llm-d's " + p.type + " parameters without a meaning in the simulator, dropped");
  if (!ignored.empty())
    r.note(field,
           joined(ignored) + ": not parameters of llm-d's " + p.type + ", which ignores them (so does eldr-sim)");
  return out;
}

// The role's profile name and where it was given, when a P/D profile handler names one (llm-d's
// defaults: "decode", "prefill"; disagg_profile_handler.go, pd_profile_handler.go); nullopt without a
// P/D handler.
struct ProfileChoice {
  std::string name;
  std::string field;
};
std::string_view role_name(ProfileRole role)
{
  return role == ProfileRole::decode ? "decode" : "prefill";
}
ProfileRole other_role(ProfileRole role)
{
  return role == ProfileRole::decode ? ProfileRole::prefill : ProfileRole::decode;
}
std::optional<ProfileChoice> role_profile(const Reader& r, const std::vector<Plugin>& plugins, ProfileRole role)
{
  const Plugin* handler = nullptr;
  for (const Plugin& p : plugins) {
    if (!contains(kPdHandlers, p.type))
      continue;
    if (handler)
      r.fail(join(p.field, "type"),
             "a second P/D profile handler (" + handler->field + " is " + in_quotes(handler->name) + "): give one");
    handler = &p;
  }
  if (!handler)
    return std::nullopt;
  const std::string role_text(role_name(role));
  ProfileChoice choice{role_text, join(handler->field, "type")};
  const YAML::Node& params = handler->parameters;
  if (!params.IsDefined() || params.IsNull())
    return choice;
  const std::string field     = join(handler->field, "parameters");
  const std::string flat_name = role_text + "Profile";  // decodeProfile, prefillProfile
  const YAML::Node legacy     = params[flat_name];
  const YAML::Node nested     = params["profiles"];  // disagg-profile-handler's only
  const bool has_nested       = handler->type == kPdHandlers[0] && given(nested);
  // As llm-d v0.8.0: disagg-profile-handler takes the nested form or the older flat one, not both.
  if (given(legacy) && handler->type == kPdHandlers[0] && (given(nested) || given(params["deciders"])))
    r.fail(join(field, flat_name), "the older flat " + flat_name +
                                       " with the nested profiles/deciders: give profiles." + role_text + " instead");
  if (given(legacy)) {
    choice = {r.text(legacy, join(field, flat_name)), join(field, flat_name)};
  } else if (has_nested) {
    constexpr std::string_view kRoles[] = {"decode", "prefill", "encode"};
    r.keys(nested, join(field, "profiles"), "the profile of each role: decode, prefill, encode", kRoles);
    const std::string nested_field = join(field, "profiles." + role_text);
    if (given(nested[role_text]))
      choice = {r.text(nested[role_text], nested_field), nested_field};
  }
  return choice;
}

// Parses without building nodes: counts documents.
struct IgnoreEvents : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The file's one YAML document (a null node when empty).
YAML::Node parse_yaml(const Reader& r, const std::string& text)
{
  try {
    // At most two documents are looked at: yaml-cpp 0.7's LoadAll never returns on some inputs (a
    // stray ',' after a document), asking for documents that never end.
    std::istringstream in(text);
    YAML::Parser parser(in);
    IgnoreEvents ignore;
    size_t documents = 0;
    while (documents < 2 && parser.HandleNextDocument(ignore))
      ++documents;
    if (documents > 1)
      r.fail("", "holds more than one YAML document (a --- line, or text after the first): give one "
                 "EndpointPickerConfig");
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's own what() spans its "yaml-cpp: error at line" prefix; the message and mark suffice.
    const std::string where = e.mark.is_null() ? ""
                                               : "line " + std::to_string(e.mark.line + 1) + ", column " +
                                                     std::to_string(e.mark.column + 1) + ": ";
    r.fail("", "not valid YAML: " + where + e.msg);
  }
}

}  // namespace

Json read_endpoint_picker_config(const std::string& path, PluginCatalog catalog, std::vector<std::string>* notes,
                                 ProfileRole role)
{
  const Reader r{path, notes, catalog};
  const std::string role_text(role_name(role));
  const std::string text = read_input_file(path, kMaxFileBytes);
  require_utf8(text, path, "");
  const YAML::Node root = parse_yaml(r, text);
  if (root.IsNull())
    r.fail("", "is empty: give an EndpointPickerConfig (apiVersion, kind, plugins, schedulingProfiles)");

  r.keys(root, "", "an EndpointPickerConfig: apiVersion, kind, plugins, schedulingProfiles", kFields);
  if (const std::string kind = r.text(root["kind"], "kind"); kind != kKind)
    r.fail("kind", "is " + in_quotes(kind) +
                       ": this reader takes llm-d's scheduler configuration, kind: " + std::string(kKind));
  if (const std::string api = r.text(root["apiVersion"], "apiVersion"); !contains(kApiVersions, api))
    r.fail("apiVersion", "is " + in_quotes(api) + " (known: " + joined(kApiVersions) + ")");

  // The plugins, by name (a name defaults to the type).
  const YAML::Node plugin_list = root["plugins"];
  r.list(plugin_list, "plugins", "the plugins, each - type: TYPE");
  std::vector<Plugin> plugins;
  std::map<std::string, size_t> by_name;  // index in plugins
  const std::vector<std::string> known = supported_types(r.catalog);
  for (size_t i = 0; i < plugin_list.size(); ++i) {
    const YAML::Node node = plugin_list[i];
    // yaml-cpp's Node assignment writes into the document: a Plugin is built whole, never assigned to.
    Plugin p{"", "", node.IsMap() ? node["parameters"] : YAML::Node(), item("plugins", i)};
    constexpr std::string_view kPluginFields[] = {"name", "type", "parameters"};
    r.keys(node, p.field, "a plugin: type, and optionally name and parameters", kPluginFields);
    p.type = r.text(node["type"], join(p.field, "type"));
    p.name = given(node["name"]) ? r.text(node["name"], join(p.field, "name")) : p.type;  // the type as written
    if (const Rename* old = renamed(p.type)) {
      r.note(join(p.field, "type"), in_quotes(p.type) + " is " + std::string(old->when) + " for " +
                                        in_quotes(old->type) + ": read as " + std::string(old->type));
      p.type = old->type;
    }
    if (const auto [it, added] = by_name.emplace(p.name, i); !added)
      r.fail(join(p.field, given(node["name"]) ? "name" : "type"),
             "a second plugin named " + in_quotes(p.name) + " (" + plugins[it->second].field +
                 " has it; a name defaults to the type): give each a different name");
    if (!contains(known, p.type) && !contains(kNotModelledSteps, p.type) && !contains(kOutsidePlugins, p.type)) {
      const std::string near = suggestion(p.type, known);
      r.fail(join(p.field, "type"), "unknown plugin type " + in_quotes(p.type) +
                                        (near.empty() ? "" : " (did you mean " + in_quotes(near) + "?)") +
                                        " (supported: " + joined(known) +
                                        "; llm-d plugins without a meaning here: " + joined(kNotModelledSteps) +
                                        "; llm-d's handlers, deciders, producers and data sources are ignored)");
    }
    if (p.parameters.IsDefined() && !p.parameters.IsNull() && !p.parameters.IsMap())
      r.fail(join(p.field, "parameters"), "must be a mapping (the plugin's parameters, name: value)");
    plugins.push_back(p);
  }
  // Every plugin's parameters are checked (not only the decode profile's), as llm-d checks them all.
  std::vector<Json> parameters;
  for (const Plugin& p : plugins)
    parameters.push_back(!kind_of(r.catalog, p.type).empty() || p.type == kDecodeFilter || contains(kPdHandlers, p.type)
                             ? plugin_parameters(r, p)
                             : Json::object());

  // The profile's steps: each a plugin, its weight when given, and the fields that name them.
  struct Step {
    size_t plugin;
    std::optional<double> weight;
    std::string field;  // what an error about the step names: its pluginRef, or the plugin's type
    std::string weight_field;
  };
  std::vector<Step> steps;
  std::string profile;  // its name, for messages

  const YAML::Node profile_list = root["schedulingProfiles"];
  if (!given(profile_list) || (profile_list.IsSequence() && profile_list.size() == 0)) {
    // llm-d's default (GIE pkg/epp/config/loader/defaults.go, ensureSchedulingLayer): one profile of
    // every filter, scorer and picker plugin, scorers at weight 1.
    if (const auto choice = role_profile(r, plugins, role))
      r.fail(choice->field, "the " + std::string(role_name(role)) + " profile " + in_quotes(choice->name) +
                                " is not in schedulingProfiles (none given): add it");
    if (role == ProfileRole::prefill)
      r.fail("plugins", kNoPrefillProfile);
    profile = "default";
    for (size_t i = 0; i < plugins.size(); ++i)
      if (!contains(kOutsidePlugins, plugins[i].type))
        steps.push_back({i, std::nullopt, join(plugins[i].field, "type"), ""});
  } else {
    // Every reference resolves and every weight is a weight, in each profile.
    r.list(profile_list, "schedulingProfiles", "the scheduling profiles, each - name: NAME, plugins: [...]");
    std::vector<std::string> names;
    std::set<std::string> profile_names;
    std::vector<std::vector<Step>> profiles;
    for (size_t i = 0; i < profile_list.size(); ++i) {
      const std::string field                     = item("schedulingProfiles", i);
      constexpr std::string_view kProfileFields[] = {"name", "plugins"};
      r.keys(profile_list[i], field, "a profile: name, plugins", kProfileFields);
      const std::string name = r.text(profile_list[i]["name"], join(field, "name"));
      if (!profile_names.insert(name).second)
        r.fail(join(field, "name"), "a second profile named " + in_quotes(name) + ": give each a different name");
      names.push_back(name);
      const YAML::Node refs = profile_list[i]["plugins"];
      r.list(refs, join(field, "plugins"), "the profile's plugins, each - pluginRef: NAME");
      profiles.emplace_back();
      for (size_t k = 0; k < refs.size(); ++k) {
        const std::string ref_field             = item(join(field, "plugins"), k);
        constexpr std::string_view kRefFields[] = {"pluginRef", "weight"};
        r.keys(refs[k], ref_field, "a plugin reference: pluginRef, and weight for a scorer", kRefFields);
        const std::string ref = r.text(refs[k]["pluginRef"], join(ref_field, "pluginRef"));
        const auto it         = by_name.find(ref);
        if (it == by_name.end())
          r.fail(join(ref_field, "pluginRef"),
                 "no plugin named " + in_quotes(ref) + " (plugins: a plugin's name, or its type when it has none)");
        Step step{it->second, std::nullopt, join(ref_field, "pluginRef"), join(ref_field, "weight")};
        if (given(refs[k]["weight"]))
          step.weight = r.weight(refs[k]["weight"], step.weight_field);
        profiles.back().push_back(step);
      }
    }
    // The role's profile: the P/D handler's, else (decode) the only one.
    size_t chosen = 0;
    if (const auto choice = role_profile(r, plugins, role)) {
      const auto it = std::find(names.begin(), names.end(), choice->name);
      if (it == names.end())
        r.fail(choice->field, "the " + role_text + " profile " + in_quotes(choice->name) +
                                  " is not in schedulingProfiles (" + joined(names) + ")");
      chosen = size_t(it - names.begin());
      // The other role's profile is the other router's (composition.cpp says when it is not read).
      const auto other = role_profile(r, plugins, other_role(role));
      for (size_t i = 0; i < names.size(); ++i)
        if (i != chosen && names[i] != other->name)
          r.note(item("schedulingProfiles", i), "profile " + in_quotes(names[i]) + " is not read (only the " +
                                                    role_text + " profile " + in_quotes(choice->name) + " and the " +
                                                    std::string(role_name(other_role(role))) + " profile " +
                                                    in_quotes(other->name) + " are)");
    } else if (role == ProfileRole::prefill) {
      r.fail("plugins", kNoPrefillProfile);
    } else if (names.size() > 1) {
      r.fail("schedulingProfiles", std::to_string(names.size()) + " profiles (" + joined(names) +
                                       ") but no P/D profile handler (" + joined(kPdHandlers) +
                                       ") to choose the decode one: keep one profile or add the handler");
    }
    profile = names[chosen];
    steps   = profiles[chosen];
  }

  // llm-d's P/D deciders send a request with few uncached prompt tokens straight to decode; here every
  // request is prefilled by a prefill worker.
  if (role == ProfileRole::prefill)
    for (const Plugin& p : plugins)
      if (contains(kPdDeciders, p.type))
        r.note(join(p.field, "type"), in_quotes(p.name) + " is llm-d's " + p.type +
                                          ", not modelled: every request is prefilled by a prefill worker");

  Json out = {{"filters", Json::object()}, {"scorers", Json::object()}, {"picker", Json::object()}};
  std::map<std::string, const Step*> used;  // type -> its first step, for a second plugin of the type
  std::string picker_field;
  for (const Step& s : steps) {
    const Plugin& p = plugins[s.plugin];
    if (p.type == (role == ProfileRole::decode ? kDecodeFilter : kPrefillFilter))
      continue;
    // GIE's SchedulerProfile.AddPlugins (v1.5.0 pkg/epp/scheduling/scheduler_profile.go) keeps a
    // reference's filter, scorer and picker roles and skips a plugin that has none.
    if (contains(kOutsidePlugins, p.type)) {
      r.note(s.field, in_quotes(p.name) + " is llm-d's " + p.type +
                          ", not a filter, scorer or picker: skipped in the profile, as llm-d skips it");
      continue;
    }
    const std::string kind = kind_of(r.catalog, p.type);
    if (kind.empty())
      r.fail(s.field, in_quotes(p.name) + " is llm-d's " + p.type + ", which eldr-sim does not model" +
                          ": remove it from the " + role_text + " profile " + in_quotes(profile) +
                          " (supported: " + joined(known) + ")");
    // A type twice under two names (llm-d runs both): the same filter twice is the filter, the same
    // scorer twice is one scorer with the two weights added (the same total); different parameters
    // have no composition.
    if (const auto [it, added] = used.emplace(p.type, &s); !added && kind != "picker") {
      const Step& first = *it->second;
      if (parameters[first.plugin] != parameters[s.plugin])
        r.fail(s.field, in_quotes(p.name) + " is a second " + p.type + " in the profile (" + first.field + " is " +
                            in_quotes(plugins[first.plugin].name) +
                            ") with other parameters: a composition holds one plugin of a type, give them the same "
                            "parameters or keep one");
      if (kind == "scorers") {
        const double sum            = out[kind][p.type]["weight"].get<double>() + s.weight.value_or(1.0);
        out[kind][p.type]["weight"] = sum;
      }
      r.note(s.field, in_quotes(p.name) + " is a second " + p.type + " with the same parameters as " +
                          in_quotes(plugins[first.plugin].name) + " (" + first.field +
                          "): " + (kind == "scorers" ? "read as one of the two weights added" : "read as one"));
      continue;
    }
    if (kind == "picker" && !picker_field.empty())
      r.fail(s.field,
             "a second picker (" + picker_field + " is " + out["picker"].begin().key() + "): a profile has one picker");
    Json step = parameters[s.plugin];
    if (kind == "scorers")  // llm-d's DefaultScorerWeight
      step["weight"] = s.weight.value_or(1.0);
    if (kind == "picker")
      picker_field = s.field;
    out[kind][p.type] = step;
  }

  // A profile without a picker gets one (GIE's ensureSchedulingLayer): a picker plugin of the file if
  // it declares any (the first its map yields: any one of several), else a max-score-picker.
  if (picker_field.empty()) {
    std::vector<size_t> pickers;
    for (size_t i = 0; i < plugins.size(); ++i)
      if (kind_of(r.catalog, plugins[i].type) == "picker" || plugins[i].type == "weighted-random-picker")
        pickers.push_back(i);
    if (pickers.size() > 1)
      r.fail(plugins[pickers[1]].field, "the " + role_text + " profile " + in_quotes(profile) +
                                            " has no picker, and llm-d would give it any one of the " +
                                            std::to_string(pickers.size()) +
                                            " picker plugins: add the pluginRef of the one meant");
    if (pickers.size() == 1) {
      const Plugin& p = plugins[pickers[0]];
      if (kind_of(r.catalog, p.type).empty())
        r.fail(join(p.field, "type"), "the " + role_text + " profile " + in_quotes(profile) +
                                          " has no picker, so llm-d gives it this " + p.type +
                                          ", which eldr-sim does not model: add a picker to the profile");
      out["picker"][p.type] = parameters[pickers[0]];
    }
  }
  return out;
}

bool has_prefill_profile(const std::string& path)
{
  // yaml-cpp throws on asking a missing key's node anything but IsDefined: `scalar` asks that first.
  const auto scalar = [](const YAML::Node& n) { return given(n) && n.IsScalar() ? n.Scalar() : std::string(); };
  try {
    const Reader r{path, nullptr, {}};
    const YAML::Node root = parse_yaml(r, read_input_file(path, kMaxFileBytes));
    if (!root.IsMap() || !given(root["plugins"]) || !root["plugins"].IsSequence() ||
        !given(root["schedulingProfiles"]) || !root["schedulingProfiles"].IsSequence())
      return false;
    std::string name = "prefill";  // the handler's prefill profile, as role_profile reads it
    bool handler     = false;
    for (const YAML::Node& p : root["plugins"]) {
      if (!p.IsMap() || !contains(kPdHandlers, scalar(p["type"])))
        continue;
      handler                 = true;
      const YAML::Node params = p["parameters"];
      if (!given(params) || !params.IsMap())
        continue;
      if (const std::string flat = scalar(params["prefillProfile"]); !flat.empty())
        name = flat;
      else if (given(params["profiles"]) && params["profiles"].IsMap() &&
               !scalar(params["profiles"]["prefill"]).empty())
        name = scalar(params["profiles"]["prefill"]);
    }
    for (const YAML::Node& profile : root["schedulingProfiles"])
      if (handler && profile.IsMap() && scalar(profile["name"]) == name)
        return true;
  } catch (const std::exception&) {  // the reader that uses the file says what is wrong with it
  }
  return false;
}

}  // namespace eldr
