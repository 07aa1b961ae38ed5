// llm-d's EndpointPickerConfig read as a composition: the shipped examples against their JSON worked
// out by hand, and each bad file against the field its error names.
#include "sim/common/input_error.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/routing/registry/plugin_table.hpp"
#include "unit/input_error_util.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace eldr;
using eldr::test::contains;

namespace {

struct EppDir {
  std::filesystem::path path;
  EppDir() : path(std::filesystem::temp_directory_path() / ("eldr-epp-test." + std::to_string(::getpid())))
  {
    std::filesystem::create_directories(path);
  }
  ~EppDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& text, const std::string& name = "epp.yaml") const
  {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

const std::string kHead = "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\n";

// The InputError of reading `text`: its field, and its message through `message`.
std::string error_field(const std::string& text, std::string* message = nullptr)
{
  EppDir dir;
  const std::string file = dir.write(text);
  try {
    read_endpoint_picker_config(file);
  } catch (const InputError& e) {
    if (message)
      *message = e.what();
    CHECK(contains(e.what(), file));
    return e.field();
  }
  FAIL("expected InputError for:\n" << text);
  return "";
}

// A one-profile file around `plugins` and `refs` (YAML list lines).
std::string single(const std::string& plugins, const std::string& refs)
{
  return kHead + "plugins:\n" + plugins + "schedulingProfiles:\n- name: default\n  plugins:\n" + refs;
}

}  // namespace

TEST_CASE("EndpointPickerConfig: llm-d's P/D example gives its decode profile")
{
  const Json got = read_endpoint_picker_config("configs/scheduler/llm-d-decode.yaml");
  // decode: decode-filter (every candidate), max-score-picker, prefix-cache-scorer 2, queue-scorer 1;
  // the prefix cache's sizes and the prefill profile are dropped.
  const Json want = Json::parse(R"({"filters": {},
    "scorers": {"prefix-cache-scorer": {"weight": 2}, "queue-scorer": {"weight": 1}},
    "picker": {"max-score-picker": {}}})");
  CHECK(got == want);

  Json section        = got;
  section["name"]     = "llm-d";
  const Composition c = read_composition(section, "configs/scheduler/llm-d-decode.yaml");
  CHECK(c.filters.empty());
  REQUIRE(c.scorers.size() == 2);
  CHECK(c.scorers[0].type() == "queue-scorer");
  CHECK(c.scorers[0].weight == 1);
  CHECK(c.scorers[1].type() == "prefix-cache-scorer");
  CHECK(c.scorers[1].weight == 2);
  CHECK(c.picker.type() == "max-score-picker");
}

TEST_CASE("EndpointPickerConfig: the example with expert locality adds its scorer")
{
  const Json got  = read_endpoint_picker_config("configs/scheduler/llm-d-decode-expert-locality.yaml");
  const Json want = Json::parse(R"({"filters": {},
    "scorers": {"prefix-cache-scorer": {"weight": 2}, "queue-scorer": {"weight": 1},
                "expert-locality-scorer": {"weight": 2}},
    "picker": {"max-score-picker": {}}})");
  CHECK(got == want);
  Json section    = got;
  section["name"] = "llm-d-eldr";
  CHECK(read_composition(section, "x").uses_fit("eldr"));
}

TEST_CASE("EndpointPickerConfig: eldr-sim's plugins, camelCase parameters, default weight, profile choice")
{
  EppDir dir;
  const Json got  = read_endpoint_picker_config(dir.write(
       single("- type: load-threshold-filter\n  parameters:\n    maxInFlight: 8\n"
               "- type: queue-scorer\n- type: max-score-picker\n  parameters:\n    tieBreak: lowest-index\n"
               "    maxNumOfEndpoints: 1\n- type: single-profile-handler\n",
              "  - pluginRef: load-threshold-filter\n  - pluginRef: queue-scorer\n  - pluginRef: max-score-picker\n")));
  const Json want = Json::parse(R"({"filters": {"load-threshold-filter": {"max_in_flight": 8}},
    "scorers": {"queue-scorer": {"weight": 1}},
    "picker": {"max-score-picker": {"tie_break": "lowest-index"}}})");
  CHECK(got == want);

  // pd-profile-handler (the older name) with its decodeProfile; the random picker's topK.
  const Json pd = read_endpoint_picker_config(dir.write(
      kHead + "plugins:\n- type: pd-profile-handler\n  parameters:\n    decodeProfile: d\n    threshold: 10\n"
              "- type: random-picker\n  parameters:\n    topK: 2\n- name: busy\n  type: kv-cache-utilization-scorer\n"
              "- type: lora-affinity-scorer\n"
              "schedulingProfiles:\n- name: prefill\n  plugins:\n  - pluginRef: lora-affinity-scorer\n"
              "- name: d\n  plugins:\n  - pluginRef: busy\n    weight: 0.5\n  - pluginRef: random-picker\n"));
  CHECK(pd == Json::parse(R"({"filters": {}, "scorers": {"kv-cache-utilization-scorer": {"weight": 0.5}},
    "picker": {"random-picker": {"top_k": 2}}})"));

  // An empty weight or name is absent, as in llm-d (Go's decoding of null); YAML numbers may carry a '+'.
  const Json nulls = read_endpoint_picker_config(dir.write(
      single("- type: queue-scorer\n  name:\n- type: load-threshold-filter\n  parameters:\n    maxInFlight: +4\n",
             "  - pluginRef: queue-scorer\n    weight: ~\n  - pluginRef: load-threshold-filter\n")));
  CHECK(nulls["scorers"]["queue-scorer"]["weight"] == 1);
  CHECK(nulls["filters"]["load-threshold-filter"]["max_in_flight"] == 4);
  CHECK(read_endpoint_picker_config(dir.write(
            single("- type: queue-scorer\n",
                   "  - pluginRef: queue-scorer\n    weight: +2.5\n")))["scorers"]["queue-scorer"]["weight"] == 2.5);

  // No profile: llm-d's default one, every filter, scorer and picker at weight 1 (handlers aside).
  const Json defaulted = read_endpoint_picker_config(
      dir.write(kHead + "plugins:\n- type: decode-filter\n- type: queue-scorer\n- type: prefix-cache-scorer\n"
                        "- type: random-picker\n- type: single-profile-handler\n"));
  CHECK(defaulted == Json::parse(R"({"filters": {}, "scorers": {"queue-scorer": {"weight": 1},
    "prefix-cache-scorer": {"weight": 1}}, "picker": {"random-picker": {}}})"));
  CHECK(read_endpoint_picker_config(dir.write(kHead + "plugins: []\nschedulingProfiles: []\n")) ==
        Json::parse(R"({"filters": {}, "scorers": {}, "picker": {}})"));

  // A profile without a picker gets the file's only picker plugin (llm-d reuses it), else none here
  // (the composed section's default, max-score-picker).
  const Json reused = read_endpoint_picker_config(
      dir.write(kHead + "plugins:\n- type: pd-profile-handler\n- type: queue-scorer\n- type: random-picker\n"
                        "  parameters:\n    topK: 3\nschedulingProfiles:\n- name: prefill\n  plugins:\n"
                        "  - pluginRef: random-picker\n- name: decode\n  plugins:\n  - pluginRef: queue-scorer\n"));
  CHECK(reused["picker"] == Json::parse(R"({"random-picker": {"top_k": 3}})"));

  // disagg-profile-handler's profiles.decode
  const Json disagg = read_endpoint_picker_config(
      dir.write(kHead + "plugins:\n- type: disagg-profile-handler\n  parameters:\n    profiles:\n      decode: dec\n"
                        "- type: p2c-picker\n- type: queue-scorer\n"
                        "schedulingProfiles:\n- name: decode\n  plugins:\n  - pluginRef: queue-scorer\n"
                        "- name: dec\n  plugins:\n  - pluginRef: p2c-picker\n"));
  CHECK(disagg == Json::parse(R"({"filters": {}, "scorers": {}, "picker": {"p2c-picker": {}}})"));
}

TEST_CASE("EndpointPickerConfig: the file itself")
{
  EppDir dir;
  const auto field_of = [](const std::string& file) {
    try {
      read_endpoint_picker_config(file);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(contains(field_of((dir.path / "absent.yaml").string()), "not found"));
  CHECK(contains(field_of(dir.path.string()), "directory"));
  CHECK(contains(field_of("/dev/zero"), "not a regular file"));
  // A file far larger than any scheduler config is refused before it is read.
  const std::string big = dir.write("", "big.yaml");
  std::filesystem::resize_file(big, uint64_t(2) << 20);
  CHECK(contains(field_of(big), "larger than"));

  std::string msg;
  CHECK(error_field(kHead + "plugins: [\n", &msg) == "");
  CHECK(contains(msg, "not valid YAML: line "));
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(error_field(kHead + "plugins:\n- type: queue-scorer\n  name: \"\xff\"\n", &msg) == "");
  CHECK(contains(msg, "UTF-8"));
  CHECK(error_field("", &msg) == "");
  CHECK(contains(msg, "empty"));
  CHECK(error_field("- a\n- b\n") == "");
  CHECK(error_field(kHead + "---\n" + kHead, &msg) == "");
  CHECK(contains(msg, "more than one YAML document"));
  // A stray ',' after the document: yaml-cpp's LoadAll would ask for documents forever.
  CHECK(error_field("  kind: EndpointPickerConfig\n,\n", &msg) == "");
  CHECK(contains(msg, "more than one YAML document"));
  CHECK(error_field(",") == "");
  CHECK(error_field(std::string(5000, '[')) == "");  // nested past yaml-cpp's depth guard: an error, no crash
}

TEST_CASE("EndpointPickerConfig: top-level fields")
{
  std::string msg;
  CHECK(error_field("apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: InferencePool\n", &msg) == "kind");
  CHECK(contains(msg, "kind: EndpointPickerConfig"));
  CHECK(error_field("apiVersion: inference.networking.x-k8s.io/v1alpha1\n") == "kind");
  CHECK(error_field("apiVersion: v1\nkind: EndpointPickerConfig\n") == "apiVersion");
  CHECK(error_field(kHead + "plugins: queue-scorer\n") == "plugins");
  CHECK(error_field(kHead + "schedulingProfiles: []\n") == "plugins");
  CHECK(error_field(kHead + "plugin: []\n", &msg) == "plugin");
  CHECK(contains(msg, "did you mean 'plugins'"));
  CHECK(error_field(kHead + "kind: EndpointPickerConfig\n") == "kind");  // twice

  // llm-d's documentation's apiVersion values and its requestHandler field are accepted.
  EppDir dir;
  for (const std::string api : {"llm-d.ai/v1alpha1", "llm-d.ai/v1"})
    CHECK(read_endpoint_picker_config(dir.write(
        "apiVersion: " + api + "\nkind: EndpointPickerConfig\nrequestHandler: {}\nplugins:\n" +
        "- type: queue-scorer\nschedulingProfiles:\n- name: d\n  plugins:\n  - pluginRef: queue-scorer\n"))["scorers"]
              .contains("queue-scorer"));
}

TEST_CASE("EndpointPickerConfig: plugins")
{
  std::string msg;
  const std::string ref = "  - pluginRef: queue-scorer\n";
  CHECK(error_field(single("- type: queue-scorer\n- parameters: {}\n", ref)) == "plugins[1].type");
  CHECK(error_field(single("- type: queue-scorer\n- type: \"\"\n", ref)) == "plugins[1].type");
  CHECK(error_field(single("- queue-scorer\n", ref)) == "plugins[0]");
  CHECK(error_field(single("- type: queue-scorer\n- type: queue-scorer\n", ref), &msg) == "plugins[1].type");
  CHECK(contains(msg, "a second plugin named 'queue-scorer'"));
  CHECK(error_field(single("- type: queue-scorer\n- name: queue-scorer\n  type: kv-cache-utilization-scorer\n", ref)) ==
        "plugins[1].name");
  CHECK(error_field(single("- type: foo-scorer\n", ref), &msg) == "plugins[0].type");
  CHECK(contains(msg, "unknown plugin type 'foo-scorer'"));
  CHECK(contains(msg, "supported: "));
  CHECK(contains(msg, "queue-scorer"));
  CHECK(contains(msg, "lora-affinity-scorer"));
  CHECK(error_field(single("- type: queue-scorer\n  typ: x\n", ref), &msg) == "plugins[0].typ");
  CHECK(contains(msg, "did you mean 'type'"));
  CHECK(error_field(single("- type: queue-scorer\n  parameters: [1]\n", ref)) == "plugins[0].parameters");
  // Many plugins (names are looked up, not scanned): the repeated name is found after 20,000 others.
  std::string many;
  for (int i = 0; i < 20000; ++i)
    many += "- name: q" + std::to_string(i) + "\n  type: queue-scorer\n";
  CHECK(error_field(single(many + "- name: q7\n  type: queue-scorer\n", "  - pluginRef: q0\n"), &msg) ==
        "plugins[20000].name");
  CHECK(contains(msg, "(plugins[7] has it"));
}

TEST_CASE("EndpointPickerConfig: parameters")
{
  std::string msg;
  CHECK(error_field(single("- type: max-score-picker\n  parameters:\n    tieBreaks: random\n",
                           "  - pluginRef: max-score-picker\n"),
                    &msg) == "plugins[0].parameters.tieBreaks");
  CHECK(contains(msg, "tieBreak"));
  CHECK(contains(msg, "maxNumOfEndpoints"));
  CHECK(error_field(single("- type: queue-scorer\n  parameters:\n    weight: 2\n", "  - pluginRef: queue-scorer\n"),
                    &msg) == "plugins[0].parameters.weight");
  CHECK(contains(msg, "schedulingProfiles[].plugins[].weight"));
  CHECK(error_field(single("- type: prefix-cache-scorer\n  parameters:\n    blockSizeToken: 16\n",
                           "  - pluginRef: prefix-cache-scorer\n")) == "plugins[0].parameters.blockSizeToken");
  CHECK(error_field(single("- type: load-threshold-filter\n  parameters:\n    maxInFlight: [1, 2]\n",
                           "  - pluginRef: load-threshold-filter\n")) == "plugins[0].parameters.maxInFlight");
  // camelCase only, as llm-d writes its parameters
  CHECK(error_field(single("- type: max-score-picker\n  parameters:\n    tie_break: random\n",
                           "  - pluginRef: max-score-picker\n"),
                    &msg) == "plugins[0].parameters.tie_break");
  CHECK(contains(msg, "tieBreak"));
  CHECK(error_field(single("- type: disagg-profile-handler\n  parameters:\n    decodeProfiles: x\n", "")) ==
        "plugins[0].parameters.decodeProfiles");
  // A parameter's value is checked later, by the composed section's reader: passed through here.
  EppDir dir;
  CHECK(read_endpoint_picker_config(
            dir.write(single("- type: random-picker\n  parameters:\n    topK: -3\n",
                             "  - pluginRef: random-picker\n")))["picker"]["random-picker"]["top_k"] == -3);
}

TEST_CASE("EndpointPickerConfig: profiles and references")
{
  std::string msg;
  const std::string plugins = "- type: queue-scorer\n- type: max-score-picker\n";
  CHECK(error_field(single(plugins, "  - pluginRef: queue-scorer\n  - pluginRef: queue-scorerr\n"), &msg) ==
        "schedulingProfiles[0].plugins[1].pluginRef");
  CHECK(contains(msg, "no plugin named 'queue-scorerr'"));
  CHECK(error_field(single(plugins, "  - pluginRef: queue-scorer\n    weight: heavy\n")) ==
        "schedulingProfiles[0].plugins[0].weight");
  CHECK(error_field(single(plugins, "  - pluginRef: queue-scorer\n    weight: \"2\"\n")) ==
        "schedulingProfiles[0].plugins[0].weight");
  CHECK(error_field(single(plugins, "  - pluginRef: queue-scorer\n    weight: -1\n"), &msg) ==
        "schedulingProfiles[0].plugins[0].weight");
  CHECK(contains(msg, "negative"));
  CHECK(error_field(single(plugins, "  - pluginRef: queue-scorer\n    weight: .nan\n")) ==
        "schedulingProfiles[0].plugins[0].weight");
  CHECK(error_field(single(plugins + "- type: random-picker\n",
                           "  - pluginRef: max-score-picker\n  - pluginRef: random-picker\n"),
                    &msg) == "schedulingProfiles[0].plugins[1].pluginRef");
  CHECK(contains(msg, "a second picker"));
  CHECK(error_field(single("- type: active-request-scorer\n- name: a2\n  type: active-request-scorer\n"
                           "  parameters:\n    idleThreshold: 2\n",
                           "  - pluginRef: active-request-scorer\n  - pluginRef: a2\n"),
                    &msg) == "schedulingProfiles[0].plugins[1].pluginRef");
  CHECK(contains(msg, "with other parameters"));
  CHECK(error_field(single(plugins + "- type: lora-affinity-scorer\n",
                           "  - pluginRef: queue-scorer\n  - pluginRef: lora-affinity-scorer\n"),
                    &msg) == "schedulingProfiles[0].plugins[1].pluginRef");
  CHECK(contains(msg, "does not model"));
  CHECK(
      error_field(single(plugins + "- type: session-affinity-scorer\n", "  - pluginRef: session-affinity-scorer\n")) ==
      "schedulingProfiles[0].plugins[0].pluginRef");

  // Several profiles: a P/D handler chooses; its decode profile must exist.
  const std::string two = "schedulingProfiles:\n- name: prefill\n  plugins: []\n- name: decode\n  plugins: []\n";
  CHECK(error_field(kHead + "plugins:\n" + plugins + two, &msg) == "schedulingProfiles");
  CHECK(contains(msg, "disagg-profile-handler"));
  CHECK(error_field(kHead + "plugins:\n- type: pd-profile-handler\n  parameters:\n    decodeProfile: dec\n" + two) ==
        "plugins[0].parameters.decodeProfile");
  CHECK(error_field(kHead +
                    "plugins:\n- type: disagg-profile-handler\n  parameters:\n    profiles:\n      decode: d\n" +
                    two) == "plugins[0].parameters.profiles.decode");
  CHECK(error_field(kHead +
                    "plugins:\n- type: disagg-profile-handler\n  parameters:\n    decodeProfile: decode\n"
                    "    deciders:\n      prefill: x\n" +
                    two) == "plugins[0].parameters.decodeProfile");
  CHECK(error_field(kHead + "plugins:\n- type: disagg-profile-handler\n- type: pd-profile-handler\n" + two) ==
        "plugins[1].type");
  CHECK(error_field(kHead + "plugins: []\nschedulingProfiles:\n- name: a\n  plugins: []\n- name: a\n  plugins: []\n") ==
        "schedulingProfiles[1].name");
  CHECK(error_field(kHead + "plugins: []\nschedulingProfiles:\n- plugins: []\n") == "schedulingProfiles[0].name");

  // No picker in the decode profile: llm-d would take any of several, or one not modelled.
  CHECK(error_field(kHead + "plugins:\n- type: queue-scorer\n- type: random-picker\n- type: p2c-picker\n"
                            "schedulingProfiles:\n- name: d\n  plugins:\n  - pluginRef: queue-scorer\n",
                    &msg) == "plugins[2]");
  CHECK(contains(msg, "any one of the 2 picker plugins"));
  CHECK(error_field(kHead + "plugins:\n- type: weighted-random-picker\n") == "plugins[0].type");
  // Without profiles a P/D handler has no decode profile; a not-modelled plugin joins the default one.
  CHECK(error_field(kHead + "plugins:\n- type: disagg-profile-handler\n") == "plugins[0].type");
  CHECK(error_field(kHead + "plugins:\n- type: queue-scorer\n- type: lora-affinity-scorer\n", &msg) ==
        "plugins[1].type");
  CHECK(contains(msg, "does not model"));
}

namespace {

// The composition and the notes of reading `text`.
Json read_noting(const std::string& text, std::vector<std::string>& notes)
{
  EppDir dir;
  notes.clear();
  return read_endpoint_picker_config(dir.write(text), &notes);
}

bool noted(const std::vector<std::string>& notes, const std::string& field, const std::string& what)
{
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return contains(n, ": " + field + ": ") && contains(n, what); });
}

}  // namespace

TEST_CASE("EndpointPickerConfig: the names of other llm-d and GIE versions are read as today's, with a note")
{
  std::vector<std::string> notes;
  // llm-d v0.2.0's files (GIE v0.5.0): kv-cache-scorer.
  Json got = read_noting(single("- type: kv-cache-scorer\n", "  - pluginRef: kv-cache-scorer\n    weight: 2\n"), notes);
  CHECK(got["scorers"] == Json::parse(R"({"kv-cache-utilization-scorer": {"weight": 2}})"));
  REQUIRE(notes.size() == 1);
  CHECK(noted(notes, "plugins[0].type", "'kv-cache-scorer' is GIE v0.5.0's name for 'kv-cache-utilization-scorer'"));
  // Before v0.2.0: prefix-cache, max-score, single-profile, prefill-header, kvcache-aware-scorer; a name
  // defaults to the type as written.
  got = read_noting(single("- type: prefix-cache\n  parameters:\n    hashBlockSize: 5\n- type: max-score\n"
                           "- type: single-profile\n- type: prefill-header\n- type: kvcache-aware-scorer\n",
                           "  - pluginRef: max-score\n  - pluginRef: prefix-cache\n    weight: 50\n"
                           "  - pluginRef: kvcache-aware-scorer\n"),
                    notes);
  CHECK(got == Json::parse(R"({"filters": {}, "scorers": {"prefix-cache-scorer": {"weight": 50},
    "precise-prefix-cache-scorer": {"weight": 1}}, "picker": {"max-score-picker": {}}})"));
  CHECK(noted(notes, "plugins[1].type", "read as max-score-picker"));
  CHECK(noted(notes, "plugins[2].type", "read as single-profile-handler"));
  CHECK(noted(notes, "plugins[3].type", "read as disagg-headers-handler"));
  CHECK(noted(notes, "plugins[4].type", "read as precise-prefix-cache-scorer"));
  // v0.2.0 to v0.6.1's prefill-header-handler; main's token-producer (tokenizer in v0.8.0).
  read_noting(single("- type: prefill-header-handler\n- type: token-producer\n- type: queue-scorer\n",
                     "  - pluginRef: queue-scorer\n"),
              notes);
  CHECK(noted(notes, "plugins[0].type", "read as disagg-headers-handler"));
  CHECK(noted(notes, "plugins[1].type", "'token-producer' is llm-d's name after v0.8.0 for 'tokenizer'"));

  // "Did you mean" follows the renames: a name's beginning, then its spelling, given as today's name.
  std::string msg;
  const std::string ref = "  - pluginRef: queue-scorer\n";
  CHECK(error_field(single("- type: queue-scorer\n- type: kv-cache\n", ref), &msg) == "plugins[1].type");
  CHECK(contains(msg, "did you mean 'kv-cache-utilization-scorer'"));
  CHECK(error_field(single("- type: queue-scorer\n- type: prefill-header-handlr\n", ref), &msg) == "plugins[1].type");
  CHECK(contains(msg, "did you mean 'disagg-headers-handler'"));
  CHECK(error_field(single("- type: queue-scorer\n- type: max-scor\n", ref), &msg) == "plugins[1].type");
  CHECK(contains(msg, "did you mean 'max-score-picker'"));
}

TEST_CASE("EndpointPickerConfig: precise-prefix-cache-scorer and active-request-scorer with llm-d's parameters")
{
  std::vector<std::string> notes;
  const Json got = read_noting(
      single("- type: precise-prefix-cache-scorer\n  parameters:\n    indexerConfig:\n      tokenizersPoolConfig: {}\n"
             "    tokenProcessorConfig:\n      blockSize: 64\n- type: active-request-scorer\n  parameters:\n"
             "    requestTimeout: 30s\n    idleThreshold: 2\n    maxBusyScore: 0.5\n",
             "  - pluginRef: precise-prefix-cache-scorer\n    weight: 2\n  - pluginRef: active-request-scorer\n"),
      notes);
  CHECK(got["scorers"] == Json::parse(R"({"precise-prefix-cache-scorer": {"weight": 2},
    "active-request-scorer": {"weight": 1, "idle_threshold": 2, "max_busy_score": 0.5}})"));
  CHECK(noted(notes, "plugins[0].parameters", "indexerConfig, tokenProcessorConfig: llm-d's"));
  CHECK(noted(notes, "plugins[1].parameters", "requestTimeout: llm-d's"));
  Json section        = got;
  section["name"]     = "x";
  const Composition c = read_composition(section, "x");
  REQUIRE(c.scorers.size() == 2);
  CHECK(c.scorers[0].type() == "precise-prefix-cache-scorer");
  CHECK(c.scorers[1].type() == "active-request-scorer");
  CHECK(c.scorers[1].params["idle_threshold"] == 2);
  CHECK(c.scorers[1].params["max_busy_score"] == 0.5);
}

TEST_CASE("EndpointPickerConfig: what llm-d runs and skips is skipped with a note")
{
  std::vector<std::string> notes;
  // A profile's reference to a plugin that is no filter, scorer or picker (GIE's AddPlugins skips it).
  Json got = read_noting(
      single("- type: tokenizer\n- type: queue-scorer\n", "  - pluginRef: tokenizer\n  - pluginRef: queue-scorer\n"),
      notes);
  CHECK(got["scorers"] == Json::parse(R"({"queue-scorer": {"weight": 1}})"));
  CHECK(noted(notes, "schedulingProfiles[0].plugins[0].pluginRef", "not a filter, scorer or picker: skipped"));
  // Parameters llm-d's plugin does not have (Go's JSON decoding skips them); a near miss stays an error.
  got = read_noting(single("- type: queue-scorer\n  parameters:\n    hashBlockSize: 64\n    lruCapacityPerServer: 9\n"
                           "- type: decode-filter\n  parameters:\n    role: decode\n",
                           "  - pluginRef: queue-scorer\n  - pluginRef: decode-filter\n"),
                    notes);
  CHECK(got["scorers"] == Json::parse(R"({"queue-scorer": {"weight": 1}})"));
  CHECK(noted(notes, "plugins[0].parameters", "hashBlockSize, lruCapacityPerServer: not parameters of llm-d's"));
  CHECK(noted(notes, "plugins[1].parameters", "role: not parameters of llm-d's decode-filter"));
  CHECK(error_field(single("- type: label-match-scorer\n  parameters:\n    role: x\n",
                           "  - pluginRef: label-match-scorer\n")) == "plugins[0].parameters.role");
  // The same type under two names with the same parameters: one scorer, the weights added.
  got = read_noting(single("- type: queue-scorer\n- name: q2\n  type: queue-scorer\n- type: decode-filter\n"
                           "- name: d2\n  type: decode-filter\n",
                           "  - pluginRef: queue-scorer\n    weight: 2\n  - pluginRef: q2\n    weight: 0.5\n"
                           "  - pluginRef: decode-filter\n  - pluginRef: d2\n"),
                    notes);
  CHECK(got == Json::parse(R"({"filters": {}, "scorers": {"queue-scorer": {"weight": 2.5}}, "picker": {}})"));
  CHECK(noted(notes, "schedulingProfiles[0].plugins[1].pluginRef", "the two weights added"));
  // A P/D file's profiles other than decode and prefill are not read; the prefill one is the prefill router's.
  read_noting(kHead + "plugins:\n- type: pd-profile-handler\n- type: queue-scorer\nschedulingProfiles:\n"
                      "- name: prefill\n  plugins:\n  - pluginRef: queue-scorer\n- name: decode\n  plugins: []\n"
                      "- name: encode\n  plugins: []\n",
              notes);
  CHECK(noted(notes, "schedulingProfiles[2]", "profile 'encode' is not read"));
  CHECK(!noted(notes, "schedulingProfiles[0]", "is not read"));
}

// The prefill profile of `text` (prefill_router.scheduler), with its notes.
Json read_prefill(const std::string& text, std::vector<std::string>& notes)
{
  EppDir dir;
  notes.clear();
  return read_endpoint_picker_config(dir.write(text), &notes, ProfileRole::prefill);
}

TEST_CASE("EndpointPickerConfig: a P/D file's prefill profile routes prefill")
{
  std::vector<std::string> notes;
  // llm-d's P/D example: prefill-filter (every candidate is a prefill worker), max-score-picker,
  // prefix-cache-scorer 2, queue-scorer 1; the decider is said not modelled.
  Json got = read_endpoint_picker_config("configs/scheduler/llm-d-decode.yaml", &notes, ProfileRole::prefill);
  CHECK(got == Json::parse(R"({"filters": {},
    "scorers": {"prefix-cache-scorer": {"weight": 2}, "queue-scorer": {"weight": 1}},
    "picker": {"max-score-picker": {}}})"));
  CHECK(noted(notes, "plugins[6].type", "prefix-based-pd-decider, not modelled: every request is prefilled"));
  got["name"] = "llm-d-prefill";
  CHECK(read_prefill_composition(got, "x").has_value());

  // The handler names the profile: pd-profile-handler's flat prefillProfile, disagg-profile-handler's
  // nested profiles.prefill; the default is "prefill".
  const std::string profiles = "- type: queue-scorer\n- type: random-picker\nschedulingProfiles:\n"
                               "- name: p\n  plugins:\n  - pluginRef: queue-scorer\n"
                               "- name: prefill\n  plugins:\n  - pluginRef: random-picker\n"
                               "- name: decode\n  plugins: []\n";
  for (const char* handler : {"- type: pd-profile-handler\n  parameters:\n    prefillProfile: p\n",
                              "- type: disagg-profile-handler\n  parameters:\n    profiles:\n      prefill: p\n"}) {
    CAPTURE(handler);
    got = read_prefill(kHead + "plugins:\n" + handler + profiles, notes);
    CHECK(got["scorers"] == Json::parse(R"({"queue-scorer": {"weight": 1}})"));
  }
  got = read_prefill(kHead + "plugins:\n- type: disagg-profile-handler\n" + profiles, notes);
  CHECK(got["picker"] == Json::parse(R"({"random-picker": {}})"));
  CHECK(got["scorers"].empty());

  // No prefill profile: no handler, or the profile it names is missing; decode-filter has no place in it.
  const auto prefill_error = [&](const std::string& text) {
    try {
      read_prefill(text, notes);
    } catch (const InputError& e) {
      return e.field() + ": " + e.what();
    }
    return std::string("no error");
  };
  CHECK(contains(prefill_error(single("- type: queue-scorer\n", "  - pluginRef: queue-scorer\n")),
                 "plugins: no P/D profile handler"));
  CHECK(contains(prefill_error(kHead + "plugins:\n- type: pd-profile-handler\n- type: queue-scorer\n"
                                       "schedulingProfiles:\n- name: decode\n  plugins: []\n"),
                 "the prefill profile 'prefill' is not in schedulingProfiles (decode)"));
  CHECK(contains(prefill_error(kHead + "plugins:\n- type: pd-profile-handler\n- type: decode-filter\n"
                                       "schedulingProfiles:\n- name: prefill\n  plugins:\n"
                                       "  - pluginRef: decode-filter\n- name: decode\n  plugins: []\n"),
                 "remove it from the prefill profile 'prefill'"));

  // Whether --scheduler routes prefill by the file.
  EppDir dir;
  CHECK(has_prefill_profile("configs/scheduler/llm-d-decode.yaml"));
  CHECK(!has_prefill_profile("configs/scheduler/gie-default.yaml"));
  CHECK(!has_prefill_profile("tests/data/llm-d/main-sim-e-pd-epp-config.yaml"));  // encode and decode only
  CHECK(!has_prefill_profile((dir.path / "missing.yaml").string()));
  CHECK(!has_prefill_profile(dir.write("plugins: [", "broken.yaml")));
}

// llm-d's published EndpointPickerConfig files (tests/data/llm-d/README.md: every distinct version of
// llm-d-inference-scheduler's deploy/config files, v0.2.0 to v0.8.0 and main) through the reader and
// the composed section's check; the ones eldr-sim cannot run fail with the reason below.
TEST_CASE("EndpointPickerConfig: llm-d's published files")
{
  struct NotRun {
    const char* file;
    const char* field;
    const char* why;
  };
  // load-aware-scorer (waiting-queue score, 0.5 when empty) and no-hit-lru-scorer (an LRU of the
  // workers that served cold prompts) are not modelled.
  const NotRun kNotRun[] = {
      {"v0.2.0-epp-prefix-estimate-config.yaml", "schedulingProfiles[0].plugins[2].pluginRef", "load-aware-scorer"},
      {"v0.3.0-epp-estimate-prefix-cache-config.yaml", "schedulingProfiles[0].plugins[2].pluginRef",
       "load-aware-scorer"},
      {"main-epp-estimate-prefix-cache-config.yaml", "schedulingProfiles[0].plugins[2].pluginRef", "load-aware-scorer"},
      {"v0.4.0-sim-epp-no-hit-lru.yaml", "schedulingProfiles[0].plugins[3].pluginRef", "no-hit-lru-scorer"},
      {"v0.6.0-sim-epp-no-hit-lru.yaml", "schedulingProfiles[0].plugins[3].pluginRef", "no-hit-lru-scorer"},
      {"main-sim-epp-no-hit-lru.yaml", "schedulingProfiles[0].plugins[3].pluginRef", "no-hit-lru-scorer"},
  };
  const std::filesystem::path dir = "tests/data/llm-d";
  std::ifstream readme_file(dir / "README.md");
  const std::string readme((std::istreambuf_iterator<char>(readme_file)), std::istreambuf_iterator<char>());
  size_t files = 0, run = 0, prefill_run = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml")
      continue;
    ++files;
    CAPTURE(name);
    CHECK(contains(readme, "`" + name + "`"));  // its source is given
    const auto* not_run =
        std::find_if(std::begin(kNotRun), std::end(kNotRun), [&](const NotRun& n) { return name == n.file; });
    std::vector<std::string> notes;
    if (not_run != std::end(kNotRun)) {
      try {
        read_endpoint_picker_config(entry.path().string(), &notes);
        FAIL("expected an error");
      } catch (const InputError& e) {
        CHECK(e.field() == not_run->field);
        CHECK(contains(e.what(), std::string("llm-d's ") + not_run->why + ", which eldr-sim does not model"));
      }
      continue;
    }
    Json section    = read_endpoint_picker_config(entry.path().string(), &notes);
    section["name"] = "llm-d";
    read_composition(section, entry.path().string());
    ++run;
    if (has_prefill_profile(entry.path().string())) {  // and its prefill profile routes prefill
      Json prefill    = read_endpoint_picker_config(entry.path().string(), &notes, ProfileRole::prefill);
      prefill["name"] = "llm-d-prefill";
      CHECK(read_prefill_composition(prefill, entry.path().string()).has_value());
      ++prefill_run;
    }
  }
  CHECK(files == 40);
  CHECK(run == files - std::size(kNotRun));
  CHECK(prefill_run == 11);  // the 9 P/D files and two E/P/D ones
}
