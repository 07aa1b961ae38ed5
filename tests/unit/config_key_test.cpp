// The key declarations (sim/config/config_key.hpp, experiment_keys.cpp, the routers' sections) against
// what the readers accept, and the resolved config a run records.
#include "sim/common/input_error.hpp"
#include "sim/config/config_reader.hpp"
#include "sim/config/experiment.hpp"
#include "support/scratch_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

using namespace eldr;
using eldr::test::ScratchDir;

namespace {

const std::string kDefault = "configs/default.json";

std::string error_of(const std::vector<Override>& overrides)
{
  try {
    load_experiment(kDefault, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Concrete paths of a declaration: "*" stands for both instance groups.
std::vector<std::string> concrete(std::string_view path)
{
  const std::string p(path);
  const size_t star = p.find(".*.");
  if (star == std::string::npos)
    return {p};
  return {p.substr(0, star) + ".prefill." + p.substr(star + 3), p.substr(0, star) + ".decode." + p.substr(star + 3)};
}

}  // namespace

TEST_CASE("config keys: every declared key is one the readers accept")
{
  // Given a value of the wrong type, a declared key is read (a type error naming it) or deliberately
  // ignored in this configuration (no error): never "unknown key".
  int checked = 0;
  for (const ConfigKey& k : config_keys()) {
    if (k.type == KeyType::section || k.path.find("[]") != std::string_view::npos)
      continue;
    for (const std::string& path : concrete(k.path)) {
      INFO(path);
      const std::string e = error_of({{path, R"({"not": "a value"})"}});
      CHECK(e.find("unknown key") == std::string::npos);
      if (k.type != KeyType::value && path != "workload.trace")
        CHECK(e.find(path) != std::string::npos);
      ++checked;
    }
  }
  CHECK(checked > 60);
}

TEST_CASE("config keys: paths are unique, defaults parse and sit in their ranges, choices have help")
{
  std::set<std::string> seen;
  for (const ConfigKey& k : config_keys()) {
    INFO(k.path);
    CHECK(seen.insert(std::string(k.path)).second);
    CHECK(!k.help.empty());
    CHECK((k.type == KeyType::choice) == !k.choices.empty());
    for (const KeyChoice& c : k.choices)
      CHECK(!c.help.empty());
    CHECK(!(k.def.empty() == false && k.default_note.empty() == false));  // one or the other
    if (k.def.empty())
      continue;
    const Json d = Json::parse(k.def);
    if (k.type == KeyType::number || k.type == KeyType::integer) {
      CHECK(d.get<double>() >= k.min);
      CHECK(d.get<double>() <= k.max);
    }
    if (k.type == KeyType::choice) {
      bool listed = false;
      for (const KeyChoice& c : k.choices)
        listed = listed || c.value == d.get<std::string>();
      CHECK(listed);
    }
  }
}

TEST_CASE("config keys: reading an undeclared key, the wrong type or an undeclared computed default is a bug")
{
  const ConfigKey keys[] = {
      {.path = "n", .type = KeyType::number, .def = "2", .min = 0, .max = 10, .help = "a number"},
      {.path = "m", .type = KeyType::integer, .default_note = "twice n", .help = "an integer"},
  };
  const Json doc = Json::parse(R"({"n": 3})");
  Json resolved  = Json::object();
  ConfigReader r(doc, "t.json", keys, &resolved);
  CHECK_THROWS_AS(r.number("x"), std::logic_error);
  CHECK_THROWS_AS(r.integer("n"), std::logic_error);
  CHECK_THROWS_AS(r.number("n", 1.0), std::logic_error);  // n's default is declared, not computed
  CHECK_THROWS_AS(r.integer("m"), std::logic_error);      // m's is computed: the caller must give it
  CHECK(r.number("n") == 3);
  CHECK(r.integer("m", 6) == 6);
  CHECK(resolved == Json::parse(R"({"n": 3, "m": 6})"));
}

TEST_CASE("config keys: an unknown key suggests the closest declared one and lists its section's keys")
{
  CHECK(error_of({{"workload.rate_rsp", "3"}}) ==
        "configs/default.json: workload.rate_rsp: unknown key (did you mean 'rate_rps'?); keys here: kind, trace, "
        "distinct_prompts, system_prompts, system_prompt_tokens, chat_template, calibration_requests, arrivals, "
        "arrivals_file, rate_rps, duration_s, measured_requests, warmup_requests, warmup_rate_rps, "
        "drain_after_warmup, horizon_s, output_tokens, prompt_min_tokens, prompt_max_tokens, lengths_file, routing, "
        "routing_profile, union, mix_schedule, new_subtopics_after_s");
  CHECK(
      error_of({{"eldr.tua", "0.2"}}).starts_with("configs/default.json: eldr.tua: unknown key (did you mean 'tau'?)"));
  CHECK(error_of({{"topology.decode.gpus", "2"}}).find("keys here: instances, gpus_per_instance,") !=
        std::string::npos);
  // Nothing close: no suggestion, the list only.
  CHECK(error_of({{"colour", "1"}}) ==
        "configs/default.json: colour: unknown key; keys here: description, cluster, "
        "model, router, seed, topology, workload, serving, speculative, eplb, output, eldr, composed, jsq_of_d, "
        "prefill_router");
}

TEST_CASE("config keys: the resolved config holds every value used, defaults included, and reads back to itself")
{
  const Experiment x = load_experiment(kDefault, {{"router", "eldr"}});
  const Json& r      = x.resolved;
  // Not in configs/default.json: defaults, as the struct holds them.
  CHECK(r["serving"]["max_decode_seqs"] == x.serving.max_decode_seqs);
  CHECK(r["serving"]["max_decode_seqs"] == 1024);
  CHECK(r["eldr"]["tau"] == 0.1);
  CHECK(r["eldr"]["refit"] == "online");
  CHECK(r["topology"]["decode"]["expert_parallel"] == 1);  // computed: gpus_per_instance
  CHECK(r["workload"]["union"] == "expected");             // computed: generated routing, single-GPU decode
  CHECK(r["workload"]["measured_requests"] == x.workload.measured_requests);
  CHECK(!r.contains("jsq_of_d"));  // only the run's router's section
  CHECK(!load_experiment(kDefault).resolved.contains("eldr"));

  // The resolved config, given as a config, resolves to itself and runs the same experiment.
  ScratchDir dir("resolved");
  const std::string path = (dir.dir / "resolved.json").string();
  std::ofstream(path) << r.dump(2);
  const Experiment y = load_experiment(path);
  CHECK(y.resolved == r);
  CHECK(y.workload.lengths_file == x.workload.lengths_file);
  CHECK(y.router_sections == x.router_sections);
}

TEST_CASE("config keys: an enum's names are its declared choices, in order")
{
  for (const ConfigKey& k : config_keys()) {
    INFO(k.path);
    std::vector<std::string_view> names;
    if (k.path == "workload.kind")
      names = {to_string(WorkloadKind::task), to_string(WorkloadKind::language), to_string(WorkloadKind::trace)};
    else if (k.path == "workload.arrivals")
      names = {to_string(ArrivalProcess::poisson), to_string(ArrivalProcess::trace), to_string(ArrivalProcess::file)};
    else if (k.path == "workload.routing")
      names = {to_string(ExpertRouting::generated), to_string(ExpertRouting::uniform), to_string(ExpertRouting::trace)};
    else if (k.path == "workload.union")
      names = {to_string(UnionMode::expected), to_string(UnionMode::sampled)};
    else if (k.path == "topology.*.placement")
      names = {to_string(Placement::contiguous), to_string(Placement::random), to_string(Placement::cluster_balanced)};
    else
      continue;
    REQUIRE(names.size() == k.choices.size());
    for (size_t i = 0; i < names.size(); ++i)
      CHECK(names[i] == k.choices[i].value);
  }
  // Read through choice_of: the enum of the value given.
  CHECK(load_experiment(kDefault, {{"workload.union", "sampled"}}).workload.expert_union == UnionMode::sampled);
  CHECK(load_experiment(kDefault, {{"topology.decode.gpus_per_instance", "2"},
                                   {"topology.decode.instances", "8"},
                                   {"topology.decode.placement", "random"}})
            .topology.decode.placement == Placement::random);
}

TEST_CASE("config keys: workload.routing defaults to the calibrated generator, the same in code and declaration")
{
  Json doc = Json::parse(R"({"topology": {"prefill": {"instances": 1}, "decode": {"instances": 2}}})");
  ScratchDir dir("routing-default");
  const std::string path = (dir.dir / "scratch.json").string();
  std::ofstream(path) << doc.dump();
  const Experiment x = load_experiment(path);
  CHECK(x.workload.routing == ExpertRouting::generated);
  CHECK(x.resolved["workload"]["routing"] == "generated");
  for (const ConfigKey& k : config_keys())
    if (k.path == "workload.routing")
      CHECK(k.default_note.starts_with("generated"));
}
