// JsonReader, apply_override and load_experiment (sim/common/json_reader.hpp, sim/config/experiment.hpp):
// strict parsing, one-line errors naming the file and the dotted key, and GPU placement.
#include "sim/common/input_error.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/registry/router_registry.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace eldr;

namespace {

const std::string kDefault = "configs/default.json";

// Runs `f`, requires an InputError, and returns its message.
template <class F> std::string input_error_of(F&& f)
{
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected InputError, got std::exception: " << e.what());
  }
  FAIL("expected InputError, nothing was thrown");
  return "";
}

bool contains(const std::string& s, const std::string& part)
{
  return s.find(part) != std::string::npos;
}

// A scratch directory removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir()
  {
    path = std::filesystem::temp_directory_path() /
           ("eldr-unit-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const
  {
    auto p = path / name;
    std::ofstream(p) << text;
    return p.string();
  }
  static inline int counter = 0;
};

}  // namespace

// ---------------------------------------------------------------- JsonReader

TEST_CASE("config: JsonReader reads typed values and defaults")
{
  Json j = Json::parse(R"({"n": 2.5, "i": 7, "s": "x", "b": true, "l": [1, 2, 3], "o": {"k": 1}, "z": null})");
  JsonReader r(j, "f.json");
  CHECK(r.number("n", 0) == 2.5);
  CHECK(r.number("i", 0) == 7);  // an integer is a number
  CHECK(r.integer("i", 0) == 7);
  CHECK(r.string("s", "") == "x");
  CHECK(r.boolean("b", false) == true);
  CHECK(r.integer_list("l", {}, 0, 10) == std::vector<long>{1, 2, 3});
  CHECK(r.number("absent", 4.5) == 4.5);
  // null is not "absent": it is an error, never the default (issue 17).
  CHECK(input_error_of([&] { r.number("z", 9); }) ==
        "f.json: z: is null (give a value, or leave the key out for the default)");
  CHECK(r.has("z"));
  CHECK(r.has("n"));
  auto o = r.object("o");
  CHECK(o.integer("k", 0) == 1);
  o.finish();
  CHECK_NOTHROW(r.finish());
  CHECK(r.keys() == std::vector<std::string>{"b", "i", "l", "n", "o", "s", "z"});
}

TEST_CASE("config: JsonReader errors name the file and the dotted key")
{
  Json j = Json::parse(R"({"a": {"b": {"rate": "fast", "count": 2.5, "neg": -1, "mode": "x", "list": [1, "2"]}},
                           "typo": 1, "top": 5})");
  JsonReader r(j, "exp.json");
  auto a = r.object("a");
  auto b = a.object("b");

  std::string e = input_error_of([&] { b.number("rate", 0); });
  CHECK(e == "exp.json: a.b.rate: must be a number, got string");

  e = input_error_of([&] { b.integer("count", 0); });
  CHECK(contains(e, "exp.json: a.b.count: must be an integer"));

  e = input_error_of([&] { b.integer("neg", 0, 0, 10); });
  CHECK(e == "exp.json: a.b.neg: must be between 0 and 10, got -1");
  e = input_error_of([&] { b.number("neg", 0, 0); });
  CHECK(e == "exp.json: a.b.neg: must be at least 0, got -1");
  e = input_error_of([&] { b.number("neg", 0, -1e300 * 1e300, -2); });
  CHECK(e == "exp.json: a.b.neg: must be at most -2, got -1");

  e = input_error_of([&] { b.choice("mode", "y", {"y", "z"}); });
  CHECK(e == "exp.json: a.b.mode: unknown value 'x' (expected one of: y, z)");

  e = input_error_of([&] { b.integer_list("list", {}, 0, 9); });
  CHECK(contains(e, "exp.json: a.b.list: must be a list of integers"));

  e = input_error_of([&] { b.require_number("missing"); });
  CHECK(e == "exp.json: a.b.missing: is required");

  e = input_error_of([&] { r.object("top"); });
  CHECK(e == "exp.json: top: must be an object, got number");

  // finish() reports the first key never asked for.
  JsonReader r2(j, "exp.json");
  r2.object("a");
  r2.integer("top", 0);
  e = input_error_of([&] { r2.finish(); });
  CHECK(e == "exp.json: typo: unknown key");

  // ignore() marks free-form keys as known.
  JsonReader r3(j, "exp.json");
  r3.ignore("a");
  r3.ignore("typo");
  r3.ignore("top");
  CHECK_NOTHROW(r3.finish());

  e = input_error_of([&] { JsonReader bad(Json::array(), "arr.json"); });
  CHECK(e == "arr.json: (top level): must be a JSON object");

  // InputError keeps its parts.
  try {
    b.number("rate", 0);
  } catch (const InputError& err) {
    CHECK(err.file() == "exp.json");
    CHECK(err.field() == "a.b.rate");
  }
}

TEST_CASE("config: load_json_file reports missing files and syntax errors on one line")
{
  TempDir d;
  std::string e = input_error_of([&] { load_json_file((d.path / "nope.json").string()); });
  CHECK(contains(e, "nope.json: file not found"));
  CHECK(e.find('\n') == std::string::npos);

  std::string bad = d.write("bad.json", "{\n  \"a\": 1,\n  \"b\": \n}\n");
  e               = input_error_of([&] { load_json_file(bad); });
  CHECK(contains(e, bad + ": invalid JSON"));
  CHECK(contains(e, "line 4"));
  CHECK(e.find('\n') == std::string::npos);

  // A number beyond a double is nlohmann's out_of_range, not a parse_error (a fuzzing finding).
  std::string huge = d.write("huge.json", "{\"rate\": 1e500}");
  e                = input_error_of([&] { load_json_file(huge); });
  CHECK(e == huge + ": invalid JSON: number overflow parsing '1e500'");
  e = input_error_of([&] { parse_json("[1, -2E999]", "t.jsonl", "line 7"); });
  CHECK(e == "t.jsonl: line 7: invalid JSON: number overflow parsing '-2E999'");
}

TEST_CASE("config: JSON nested past kMaxJsonDepth and duplicate keys are input errors, found while parsing")
{
  const size_t n   = 200000;  // far past the limit: would overflow the stack if copied recursively
  std::string deep = std::string(n, '[') + std::string(n, ']');
  std::string e    = input_error_of([&] { parse_json(deep, "d.json"); });
  CHECK(e == "d.json: JSON nested deeper than 100 levels");
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK(parse_json(at_limit, "d.json").is_array());
  e = input_error_of([&] { parse_json("[" + at_limit + "]", "d.json", "line 2"); });
  CHECK(e == "d.json: line 2: JSON nested deeper than 100 levels");

  e = input_error_of([&] { parse_json(R"({"a": {"b": 1, "c": [{"x": 1, "x": 2}]}})", "k.json"); });
  CHECK(e == "k.json: a.c[0].x: duplicate key (a key may appear once in an object)");
  e = input_error_of([&] { parse_json(R"({"a": 1, "a": 1})", "k.json", "line 3"); });
  CHECK(e == "k.json: line 3: a: duplicate key (a key may appear once in an object)");
  // The same key in sibling objects is fine.
  CHECK(parse_json(R"([{"a": 1}, {"a": 2}, {"b": {"a": 3}}])", "k.json").size() == 3);
  // --set values go through the same checks.
  Json doc = Json::object();
  e        = input_error_of([&] { apply_override(doc, {"w", deep}, "f.json"); });
  CHECK(e == "f.json: --set w: JSON nested deeper than 100 levels");
}

TEST_CASE("config: null is never a default")
{
  Json j = Json::parse(R"({"n": null, "o": null})");
  JsonReader r(j, "f.json");
  CHECK(r.has("n"));
  CHECK(input_error_of([&] { r.number("n", 1); }) ==
        "f.json: n: is null (give a value, or leave the key out for the default)");
  CHECK(contains(input_error_of([&] { r.object("o"); }), "f.json: o: is null"));
  CHECK(r.is_null("n"));
  CHECK(contains(input_error_of([] { load_experiment(kDefault, {{"router", "null"}}); }), "router: is null"));
  CHECK(contains(input_error_of([] {
                   load_experiment(kDefault, {{"workload.measured_requests", "0"}});
                 }),
                 "workload.measured_requests: must be between 1 and 10000000, got 0"));
}

TEST_CASE("config: an input error quoting a huge value is cut to a readable length")
{
  const std::string e = InputError("f.json", "router", "unknown value '" + std::string(100000, 'r') + "'").what();
  CHECK(e.size() < 1100);
  CHECK(contains(e, "... (99"));
}

TEST_CASE("config: an input error is one line even when it quotes control characters from the input")
{
  // A fuzzing finding: a router name holding a newline was echoed into a two-line message.
  CHECK(std::string(InputError("f.json", "router", "unknown value 'g\nx\r\x01\x7f\ty'").what()) ==
        "f.json: router: unknown value 'g\\nx\\r\\x01\\x7f\ty'");
  const std::string e = input_error_of([] { load_experiment(kDefault, {{"router", "round\nrobin"}}); });
  CHECK(contains(e, "router: unknown value 'round\\nrobin'"));
  CHECK(e.find('\n') == std::string::npos);
}

// ---------------------------------------------------------------- apply_override (--set)

TEST_CASE("config: --set values are JSON when they parse else strings and create nested objects")
{
  Json doc = Json::parse(R"({"a": {"x": 1}, "s": "keep"})");
  apply_override(doc, {"a.x", "2.5"}, "f.json");
  CHECK(doc["a"]["x"].is_number_float());
  CHECK(doc["a"]["x"] == 2.5);
  apply_override(doc, {"a.y", "3"}, "f.json");
  CHECK(doc["a"]["y"].is_number_integer());
  apply_override(doc, {"model", "gpt-oss-120b"}, "f.json");
  CHECK(doc["model"] == "gpt-oss-120b");
  apply_override(doc, {"quoted", "\"5\""}, "f.json");
  CHECK(doc["quoted"] == "5");
  apply_override(doc, {"flag", "true"}, "f.json");
  CHECK(doc["flag"] == true);
  apply_override(doc, {"list", "[1,2]"}, "f.json");
  CHECK(doc["list"] == Json::parse("[1,2]"));
  apply_override(doc, {"empty", ""}, "f.json");
  CHECK(doc["empty"] == "");
  apply_override(doc, {"new.deep.key", "-5"}, "f.json");
  CHECK(doc["new"]["deep"]["key"] == -5);
  CHECK(doc["s"] == "keep");
  CHECK(doc["a"]["x"] == 2.5);

  std::string e = input_error_of([&] { apply_override(doc, {"s.inner", "1"}, "f.json"); });
  CHECK(e == "f.json: s.inner: cannot set a field inside a non-object value");
  e = input_error_of([&] { apply_override(doc, {"", "1"}, "f.json"); });
  CHECK(contains(e, "f.json: --set: empty key"));
  e = input_error_of([&] { apply_override(doc, {"a..b", "1"}, "f.json"); });
  CHECK(contains(e, "f.json: a..b: malformed key path"));
  e = input_error_of([&] { apply_override(doc, {"a.", "1"}, "f.json"); });
  CHECK(contains(e, "malformed key path"));
  e = input_error_of([&] { apply_override(doc, {"rate", "1e500"}, "f.json"); });
  CHECK(e == "f.json: --set rate: value '1e500' is not a usable JSON value (a number too large?)");
}

// ---------------------------------------------------------------- load_experiment

TEST_CASE("config: the default experiment loads with the documented values")
{
  Experiment x = load_experiment(kDefault);
  CHECK(x.model.name == "qwen3-30b-a3b");
  CHECK(x.hardware.name == "mi300x");
  CHECK(x.cluster.gpus() == 40);
  CHECK(x.cluster.nic_bandwidth_Bps == doctest::Approx(50e9));
  // No explicit count: measured requests = rate x duration (7200 at the documented 60 req/s x 120 s).
  CHECK(x.workload.measured_requests == std::lround(x.workload.rate_rps * x.workload.duration_s));
  CHECK(x.workload.output_tokens == 512);
  CHECK(x.workload.prompt_max_tokens == 1024);
  CHECK(x.serving.prefill_hash_vnodes == 160);
  CHECK(x.serving.prefill_load_factor == 1.25);
  CHECK(std::filesystem::is_regular_file(x.workload.lengths_file));
  CHECK(x.calibration.decode_bw_efficiency > 0);
  CHECK(x.resolved["workload"]["rate_rps"] == x.workload.rate_rps);
}

TEST_CASE("config: placement puts 8 prefill on node 0 and 16 decode on nodes 1-2")
{
  Experiment x = load_experiment(kDefault);
  REQUIRE(x.topology.prefill.gpus.size() == 8);
  REQUIRE(x.topology.decode.gpus.size() == 16);
  for (int i = 0; i < 8; ++i)
    CHECK(x.topology.prefill.gpus[size_t(i)] == std::vector<int>{i});
  for (int i = 0; i < 16; ++i)
    CHECK(x.topology.decode.gpus[size_t(i)] == std::vector<int>{8 + i});

  // Decode listed on node 0 too: node 0's GPUs are taken by prefill, so decode lands on node 1.
  x = load_experiment(kDefault, {{"topology.decode.nodes", "[0, 1]"}, {"topology.decode.instances", "8"}});
  for (int i = 0; i < 8; ++i)
    CHECK(x.topology.decode.gpus[size_t(i)] == std::vector<int>{8 + i});

  // 8P24D over nodes 1-3.
  x = load_experiment(kDefault, {{"topology.decode.nodes", "[1, 2, 3]"}, {"topology.decode.instances", "24"}});
  CHECK(x.topology.decode.gpus.back() == std::vector<int>{31});
}

TEST_CASE("config: too many instances for the listed nodes is an error")
{
  std::string e = input_error_of([] { load_experiment(kDefault, {{"topology.decode.instances", "17"}}); });
  CHECK(contains(e, "configs/default.json: topology.decode.instances: 17 instances"));
  CHECK(contains(e, "16 free GPUs"));

  e = input_error_of([] {
    load_experiment(kDefault, {{"topology.decode.nodes", "[0, 1]"}, {"topology.decode.instances", "9"}});
  });
  CHECK(contains(e, "topology.decode.instances"));
  CHECK(contains(e, "8 free GPUs"));

  e = input_error_of([] { load_experiment(kDefault, {{"topology.prefill.nodes", "[7]"}}); });
  CHECK(contains(e, "configs/default.json: topology.prefill.nodes: node 7 does not exist"));

  e = input_error_of([] { load_experiment(kDefault, {{"topology.decode.instances", "0"}}); });
  CHECK(contains(e, "configs/default.json: topology.decode.instances: must be between 1"));

  e = input_error_of([] { load_experiment(kDefault, {{"topology.decode.gpus_per_instance", "4"}}); });
  CHECK(contains(e, "configs/default.json: topology.decode.instances: 16 instances x 4 GPUs do not fit"));
}

TEST_CASE("config: multi-GPU instances (TP/EP) and their one-line errors")
{
  auto four = [](std::vector<Override> more) {
    std::vector<Override> o{{"topology.decode.gpus_per_instance", "4"}, {"topology.decode.instances", "4"}};
    o.insert(o.end(), more.begin(), more.end());
    return o;
  };
  Experiment x = load_experiment(kDefault, four({{"topology.decode.placement", "cluster_balanced"}}));
  CHECK(x.topology.decode.tensor_parallel == 4);
  CHECK(x.topology.decode.expert_parallel == 4);
  CHECK(x.topology.decode.placement == Placement::cluster_balanced);
  CHECK(x.topology.decode.placement_batch == 32);
  CHECK(x.topology.decode.gpus[1] == std::vector<int>{12, 13, 14, 15});
  CHECK(x.topology.prefill.expert_parallel == 1);
  x = load_experiment(kDefault, four({{"topology.decode.expert_parallel", "1"}}));
  CHECK(x.topology.decode.expert_parallel == 1);

  std::string e = input_error_of([&] { load_experiment(kDefault, four({{"topology.decode.tensor_parallel", "2"}})); });
  CHECK(e == "configs/default.json: topology.decode.tensor_parallel: must equal gpus_per_instance (4): attention is "
             "split over all of an instance's GPUs");
  e = input_error_of([&] { load_experiment(kDefault, four({{"topology.decode.expert_parallel", "2"}})); });
  CHECK(contains(e, "configs/default.json: topology.decode.expert_parallel: must be 1 (experts tensor-split) or "
                    "gpus_per_instance (4)"));
  e = input_error_of([] {
    load_experiment(kDefault, {{"topology.decode.gpus_per_instance", "3"}, {"topology.decode.instances", "2"}});
  });
  CHECK(contains(
      e, "topology.decode.expert_parallel: 128 experts of model 'qwen3-30b-a3b' do not split evenly over 3 GPUs"));
  e = input_error_of([] {
    load_experiment(kDefault, {{"topology.decode.gpus_per_instance", "3"},
                               {"topology.decode.expert_parallel", "1"},
                               {"topology.decode.instances", "3"}});
  });
  CHECK(contains(e, "configs/default.json: topology.decode.gpus_per_instance: instance 2 would span nodes 1 and 2"));
  e = input_error_of([] { load_experiment(kDefault, {{"topology.decode.placement", "cluster_balanced"}}); });
  CHECK(contains(e, "topology.decode.placement: places experts on the GPUs of an expert-parallel instance"));
  e = input_error_of([] {
    load_experiment(kDefault, {{"topology.prefill.gpus_per_instance", "4"},
                               {"topology.prefill.instances", "2"},
                               {"topology.prefill.placement", "random"}});
  });
  CHECK(contains(e, "topology.prefill.placement: prefill instances model no expert placement"));
  e = input_error_of([&] { load_experiment(kDefault, four({{"topology.decode.placement", "balanced"}})); });
  CHECK(contains(e, "topology.decode.placement"));
  e = input_error_of([&] { load_experiment(kDefault, four({{"topology.decode.placement_batch", "0"}})); });
  CHECK(contains(e, "topology.decode.placement_batch"));
}

TEST_CASE("config: Qwen3-235B-A22B needs multi-GPU instances, on 4 GPUs its weights leave room")
{
  std::string e = input_error_of([] { load_experiment(kDefault, {{"model", "qwen3-235b-a22b"}}); });
  CHECK(contains(
      e, "models/qwen3-235b-a22b.json: (weights): model weights leave no room for one request's KV cache on 'mi300x'"));
  e = input_error_of([] {
    load_experiment(
        kDefault,
        {{"model", "qwen3-235b-a22b"}, {"topology.decode.gpus_per_instance", "4"}, {"topology.decode.instances", "4"}});
  });
  CHECK(contains(e, "prefill instances"));
  Experiment x = load_experiment("configs/tpep.json");
  CHECK(x.topology.decode.instances == 8);
  CHECK(x.topology.decode.gpus_per_instance == 4);
  CHECK(x.topology.prefill.gpus_per_instance == 4);
  CHECK(x.calibration.moe_layer_overhead_s == doctest::Approx(32.880e-6));
}

TEST_CASE("config: unknown keys or wrong types or out-of-range values name file and dotted key")
{
  std::string e = input_error_of([] { load_experiment(kDefault, {{"workload.rate_rsp", "5"}}); });
  CHECK(e.starts_with("configs/default.json: workload.rate_rsp: unknown key (did you mean 'rate_rps'?)"));

  e = input_error_of([] { load_experiment(kDefault, {{"colour", "blue"}}); });
  CHECK(e.starts_with("configs/default.json: colour: unknown key; keys here: description,"));

  e = input_error_of([] { load_experiment(kDefault, {{"topology.decode.extra", "1"}}); });
  CHECK(e.starts_with("configs/default.json: topology.decode.extra: unknown key; keys here: instances,"));

  e = input_error_of([] { load_experiment(kDefault, {{"workload.rate_rps", "fast"}}); });
  CHECK(e == "configs/default.json: workload.rate_rps: must be a number, got string");

  e = input_error_of([] { load_experiment(kDefault, {{"workload.rate_rps", "-5"}}); });
  CHECK(contains(e, "configs/default.json: workload.rate_rps: must be between"));
  CHECK(contains(e, "got -5"));

  e = input_error_of([] { load_experiment(kDefault, {{"serving.kv_memory_fraction", "1.5"}}); });
  CHECK(contains(e, "configs/default.json: serving.kv_memory_fraction: must be between 0.01 and 1, got 1.5"));

  e = input_error_of([] { load_experiment(kDefault, {{"serving.max_decode_seqs", "2.5"}}); });
  CHECK(contains(e, "configs/default.json: serving.max_decode_seqs: must be an integer"));

  e = input_error_of([] { load_experiment(kDefault, {{"workload.drain_after_warmup", "1"}}); });
  CHECK(contains(e, "workload.drain_after_warmup: must be true or false"));

  e = input_error_of([] { load_experiment(kDefault, {{"workload", "3"}}); });
  CHECK(e == "configs/default.json: workload: must be an object, got number");

  // Cross-field check: the prefill token budget must hold the longest prompt.
  e = input_error_of([] { load_experiment(kDefault, {{"serving.prefill_token_budget", "512"}}); });
  CHECK(contains(e, "serving.prefill_token_budget: must be at least workload.prompt_max_tokens + the model's chat "
                    "template (1032)"));
  e = input_error_of([] {
    load_experiment(kDefault, {{"workload.system_prompts", "2"}, {"workload.system_prompt_tokens", "7200"}});
  });
  CHECK(contains(e, "serving.prefill_token_budget: must be at least workload.prompt_max_tokens + "
                    "system_prompt_tokens + the model's chat template (8232)"));

  // Prompt sharing: a system prompt needs a count and a length; traces bring their own hashes.
  e = input_error_of([] { load_experiment(kDefault, {{"workload.system_prompts", "3"}}); });
  CHECK(e == "configs/default.json: workload.system_prompt_tokens: system prompts need both a count "
             "(system_prompts) and a length (system_prompt_tokens) above 0");
  e = input_error_of([] { load_experiment(kDefault, {{"workload.distinct_prompts", "-1"}}); });
  CHECK(contains(e, "configs/default.json: workload.distinct_prompts: must be between 0 and"));
  e = input_error_of([] { load_experiment(kDefault, {{"serving.prefix_cache", "yes"}}); });
  CHECK(contains(e, "configs/default.json: serving.prefix_cache: must be true or false"));
  e = input_error_of([] { load_experiment("configs/esft.json", {{"workload.distinct_prompts", "10"}}); });
  CHECK(contains(e, "workload.distinct_prompts: prompt sharing is generated for kinds 'task' and 'language'"));

  e = input_error_of([] {
    load_experiment(kDefault, {{"workload.prompt_min_tokens", "100"}, {"workload.prompt_max_tokens", "50"}});
  });
  CHECK(contains(e, "workload.prompt_max_tokens: must be at least prompt_min_tokens (100), got 50"));
}

TEST_CASE("config: enum choices list the allowed values")
{
  std::string e = input_error_of([] { load_experiment(kDefault, {{"router", "foo"}}); });
  CHECK(e == "configs/default.json: router: unknown value 'foo' (expected one of: random, round_robin, jsq, p2c, "
             "domain, eldr, composed, jsq_of_d, prefix_affinity)");
  e = input_error_of([] { load_experiment(kDefault, {{"workload.kind", "chat"}}); });
  CHECK(contains(e, "configs/default.json: workload.kind: unknown value 'chat'"));
  e = input_error_of([] { load_experiment(kDefault, {{"workload.routing", "magic"}}); });
  CHECK(contains(e, "workload.routing: unknown value 'magic'"));
  for (const auto& name : decode_router_names())
    CHECK(load_experiment(kDefault, {{"router", name}}).router == name);
}

TEST_CASE("config: missing files are errors naming the file or the key that points to it")
{
  std::string e = input_error_of([] { load_experiment("configs/does-not-exist.json"); });
  CHECK(e == "configs/does-not-exist.json: file not found");

  e = input_error_of([] { load_experiment(kDefault, {{"model", "nope"}}); });
  CHECK(contains(e, "configs/default.json: model: file not found"));
  CHECK(contains(e, "models/nope.json"));

  e = input_error_of([] { load_experiment(kDefault, {{"cluster", "nowhere"}}); });
  CHECK(contains(e, "configs/default.json: cluster: file not found"));

  e = input_error_of([] { load_experiment(kDefault, {{"workload.lengths_file", "traces/missing.csv"}}); });
  CHECK(contains(e, "configs/default.json: workload.lengths_file: file not found"));
}

TEST_CASE("config: a config in another directory with a typo deep inside names that file")
{
  TempDir d;
  // The default config with one misspelt key, written elsewhere (models and traces still resolve
  // against the project root, found from the working directory).
  Json doc                            = load_json_file(kDefault);
  doc["serving"]["kv_memory_fration"] = 0.5;
  std::string cfg                     = d.write("exp.json", doc.dump(2));
  std::string e                       = input_error_of([&] { load_experiment(cfg); });
  CHECK(e.starts_with(cfg + ": serving.kv_memory_fration: unknown key (did you mean 'kv_memory_fraction'?)"));
  doc["serving"].erase("kv_memory_fration");
  CHECK_NOTHROW(load_experiment(d.write("ok.json", doc.dump(2))));

  // A minimal config needs the topology's instance counts; the error says which.
  std::string minimal = d.write("min.json", R"({"model": "qwen3-30b-a3b"})");
  e                   = input_error_of([&] { load_experiment(minimal); });
  CHECK(e == minimal + ": topology.prefill.instances: is required");

  std::string arr = d.write("arr.json", "[1, 2]");
  e               = input_error_of([&] { load_experiment(arr); });
  CHECK(e == arr + ": (top level): must be a JSON object");
}

TEST_CASE("config: overrides are echoed in the resolved config and named or path models both resolve")
{
  Experiment x = load_experiment(kDefault, {{"workload.rate_rps", "80"}, {"model", "gpt-oss-120b"}, {"seed", "9"}});
  CHECK(x.workload.rate_rps == 80);
  CHECK(x.workload.measured_requests == 9600);
  CHECK(x.model.name == "gpt-oss-120b");
  CHECK(x.model.sliding_window == 128);
  CHECK(x.model.norm_topk_prob);  // it softmaxes its top-4 logits
  CHECK(x.seed == 9);
  CHECK(x.resolved["workload"]["rate_rps"] == 80);
  CHECK(x.resolved["model"] == "gpt-oss-120b");

  // measured_requests defaults to rate x duration: 7.5 req/s x 40 s = 300; an explicit count wins.
  Experiment m = load_experiment(kDefault, {{"workload.rate_rps", "7.5"}, {"workload.duration_s", "40"}});
  CHECK(m.workload.measured_requests == 300);
  m = load_experiment(kDefault, {{"workload.rate_rps", "7.5"}, {"workload.measured_requests", "123"}});
  CHECK(m.workload.measured_requests == 123);

  Experiment y = load_experiment(kDefault, {{"model", "models/gpt-oss-120b.json"}});
  CHECK(y.model.name == "gpt-oss-120b");
}

TEST_CASE("config: a model that leaves no room for one request's KV cache is rejected")
{
  // Qwen3-30B weights are 61.08 GB: at 0.3 x 192 GB = 57.6 GB nothing is left.
  std::string e = input_error_of([] { load_experiment(kDefault, {{"serving.kv_memory_fraction", "0.3"}}); });
  CHECK(contains(e, "models/qwen3-30b-a3b.json: (weights): model weights leave no room"));
  // 0.33 x 192 GB = 63.36 GB: 2.28 GB left, room for ~15 of the largest requests.
  CHECK_NOTHROW(load_experiment(kDefault, {{"serving.kv_memory_fraction", "0.33"}}));
}

// Admission reserves whole KV blocks, ceil((prompt + output) / kv_block_tokens) x kv_block_tokens
// tokens, so validation must check that rounded size: with prompt_max 1000 and 512 output tokens the
// largest request needs 1520 tokens of blocks, not 1512. A KV memory between the two used to pass
// validation and leave a decode worker spinning forever, at a fixed simulated time, on a request it
// could never admit.
TEST_CASE("config: the capacity check counts whole KV blocks")
{
  // weights 61.07776e9 B; a capacity of 1516 tokens x 98304 B sits between 1512 and 1520 tokens:
  // fraction = (61.07776e9 + 1516 * 98304) / 192e9.
  auto fraction = [](double tokens) {
    char text[64];
    std::snprintf(text, sizeof text, "%.12f", (61.07776e9 + tokens * 98304.0) / 192e9);
    return std::string(text);
  };
  std::string e = input_error_of([&] {
    load_experiment(kDefault, {{"workload.prompt_max_tokens", "1000"}, {"serving.kv_memory_fraction", fraction(1516)}});
  });
  CHECK(contains(e, "(weights): model weights leave no room"));
  // 1521 tokens of room: the 1520-token request fits.
  CHECK_NOTHROW(load_experiment(
      kDefault, {{"workload.prompt_max_tokens", "1000"}, {"serving.kv_memory_fraction", fraction(1521)}}));
}

// An unsigned JSON integer of 2^63 or more must not wrap when read: the message shows what the user wrote.
TEST_CASE("config: integers beyond the long range are reported as written")
{
  std::string e = input_error_of([] { load_experiment(kDefault, {{"seed", "18446744073709551615"}}); });
  CHECK(contains(e, "configs/default.json: seed: "));
  CHECK(contains(e, "18446744073709551615"));
}
