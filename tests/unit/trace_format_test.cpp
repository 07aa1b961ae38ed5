// Trace directories (sim/trace/trace_format.hpp): manifest and requests.jsonl round trip and
// validation, checked against the routing file's index.
#include "sim/common/input_error.hpp"
#include "sim/trace/trace_format.hpp"
#include "trace_test_util.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

using namespace eldr;
using namespace eldr::test;

namespace {

std::string read_text(const std::string& path)
{
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes trace.json and requests.jsonl as given, returns read_trace's error ("(no error)" if none).
std::string trace_error(const ScratchDir& d, const std::string& manifest, const std::string& requests)
{
  write_text(d.file("trace.json"), manifest);
  write_text(d.file("requests.jsonl"), requests);
  try {
    read_trace(d.path());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kGoodLine0 =
    R"({"id": 0, "arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 4, "label": "code"})";

}  // namespace

TEST_CASE("trace format: write then read gives back every field")
{
  ScratchDir d("roundtrip");
  write_synthetic_routing(d.file("routing.bin"), 3, 16, 2, {{2, 3}, {4, 2}});
  TraceManifest m;
  m.model               = TraceModel{"tiny", 3, 16, 2};
  m.labels              = {"code", "math"};
  m.routing_file        = "routing.bin";
  m.prefix_block_tokens = 2;
  m.source              = "hand-written";
  std::vector<TraceRequest> reqs(3);
  reqs[0] = {0, 0.0, 2, 3, 1, true, {}, 0};
  reqs[1] = {1, 0.125, 4, 2, 0, false, {18446744073709551615ULL, 7}, 1};
  reqs[2] = {2, 1.0 / 3.0, 2, 3, 1, false, {42}, 0};  // records may be shared
  write_trace(d.path(), m, reqs);

  // The JSONL is one object per line with only the fields that are set.
  const std::string text = read_text(d.file("requests.jsonl"));
  CHECK(
      text.find(
          R"({"id":0,"arrival_s":0,"prompt_tokens":2,"output_tokens":3,"label":"math","calibration":true,"routing_record":0})"
          "\n") == 0);
  CHECK(text.find(R"("prefix_hashes":[18446744073709551615,7])") != std::string::npos);

  Trace t = read_trace(d.path());
  CHECK(t.manifest.model->name == "tiny");
  CHECK(t.manifest.model->layers == 3);
  CHECK(t.manifest.model->experts == 16);
  CHECK(t.manifest.model->top_k == 2);
  CHECK(t.manifest.labels == std::vector<std::string>{"code", "math"});
  CHECK(t.manifest.routing_file == "routing.bin");
  CHECK(t.manifest.prefix_block_tokens == 2);
  CHECK(t.manifest.source == "hand-written");
  REQUIRE(t.requests.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(t.requests[i].id == reqs[i].id);
    CHECK(t.requests[i].arrival_s == reqs[i].arrival_s);  // exact: shortest round-trip text
    CHECK(t.requests[i].prompt_tokens == reqs[i].prompt_tokens);
    CHECK(t.requests[i].output_tokens == reqs[i].output_tokens);
    CHECK(t.requests[i].label == reqs[i].label);
    CHECK(t.requests[i].calibration == reqs[i].calibration);
    CHECK(t.requests[i].prefix_hashes == reqs[i].prefix_hashes);
    CHECK(t.requests[i].routing_record == reqs[i].routing_record);
  }
}

TEST_CASE("trace format: a trace without routing has null model and routing file")
{
  ScratchDir d("norouting");
  TraceManifest m;
  m.labels = {"chat"};
  std::vector<TraceRequest> reqs(1);
  reqs[0].prompt_tokens = 100;
  reqs[0].output_tokens = 2;
  write_trace(d.path(), m, reqs);
  const std::string man = read_text(d.file("trace.json"));
  CHECK(man.find(R"("model": null)") != std::string::npos);
  CHECK(man.find(R"("routing_file": null)") != std::string::npos);
  Trace t = read_trace(d.path());
  CHECK_FALSE(t.manifest.model.has_value());
  CHECK(t.manifest.routing_file.empty());
  CHECK(t.requests[0].routing_record == -1);
}

TEST_CASE("trace format: manifest errors")
{
  ScratchDir d("manifest");
  const std::string req = kGoodLine0 + "\n";
  CHECK(trace_error(d, manifest_json(), req) == "(no error)");
  CHECK(
      trace_error(d, R"({"format": "other", "version": 1, "model": null, "labels": ["a"], "routing_file": null})", req)
          .find("trace.json: format: expected \"eldr-trace\"") != std::string::npos);
  CHECK(
      trace_error(d, R"({"format": "eldr-trace", "version": 2, "model": null, "labels": ["a"], "routing_file": null})",
                  req)
          .find("trace.json: version: version 2 is not supported (this eldrsim reads version 1)") != std::string::npos);
  CHECK(trace_error(d, manifest_json("null", "null", R"(["code", "math"])", R"(, "colour": "red")"), req)
            .find("trace.json: colour: unknown key") != std::string::npos);
  CHECK(trace_error(d, manifest_json("null", "null", R"(["code", "code"])"), req)
            .find("trace.json: labels: label \"code\" appears twice") != std::string::npos);
  CHECK(trace_error(d, manifest_json("null", "null", "[]"), req).find("trace.json: labels: must be a non-empty list") !=
        std::string::npos);
  CHECK(trace_error(d, manifest_json("null", R"("routing.bin")"), req)
            .find("trace.json: model: is required when routing_file is given") != std::string::npos);
  CHECK(
      trace_error(d, manifest_json(R"({"name": "m", "layers": 2, "experts": 8, "top_k": 2})", R"("nowhere.bin")"), req)
          .find("trace.json: routing_file: file not found") != std::string::npos);
  CHECK(trace_error(d, manifest_json(R"({"name": "m", "layers": 2, "experts": 8, "top_k": 9})"), req)
            .find("trace.json: model.top_k: must be between 1 and 8, got 9") != std::string::npos);
}

TEST_CASE("trace format: requests.jsonl errors name the line, the key and the problem")
{
  ScratchDir d("requests");
  const std::string man = manifest_json();
  auto err              = [&](const std::string& second_line) {
    return trace_error(d, man, kGoodLine0 + "\n" + second_line + "\n");
  };
  CHECK(
      err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math", "calibration": true})") ==
      "(no error)");
  CHECK(err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math", "colour": 1})")
            .find("requests.jsonl: line 2: colour: unknown key") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": 0.25, "prompt_tokens": 5, "output_tokens": 2, "label": "math"})")
            .find("requests.jsonl: line 2: arrival_s: 0.25 is before the previous request's 0.5 (arrivals must be "
                  "non-decreasing)") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "legal"})")
            .find("requests.jsonl: line 2: label: \"legal\" is not one of the labels in trace.json") !=
        std::string::npos);
  CHECK(err(R"({"id": 3, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math"})")
            .find("line 2: id: expected 1 (ids are 0, 1, ... in file order), got 3") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 0, "output_tokens": 2, "label": "math"})")
            .find("line 2: prompt_tokens: must be between 1 and") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 1, "label": "math"})")
            .find("line 2: output_tokens: must be between 2 and") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5.5, "output_tokens": 2, "label": "math"})")
            .find("line 2: prompt_tokens: must be an integer, got 5.5") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": "soon", "prompt_tokens": 5, "output_tokens": 2, "label": "math"})")
            .find("line 2: arrival_s: must be a number, got string") != std::string::npos);
  CHECK(err(R"({"id": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math"})")
            .find("line 2: arrival_s: is required") != std::string::npos);
  CHECK(
      err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math", "prefix_hashes": [1]})")
          .find("line 2: prefix_hashes: given, but trace.json has no prefix_block_tokens") != std::string::npos);
  CHECK(
      err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math", "prefix_hashes": [-1]})")
          .find("line 2: prefix_hashes: must be a list of unsigned 64-bit integers, found -1") != std::string::npos);
  CHECK(
      err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math", "routing_record": 0})")
          .find("line 2: routing_record: given, but trace.json has no routing_file") != std::string::npos);
  CHECK(err(R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math"} trailing)")
            .find("requests.jsonl: line 2: invalid JSON") != std::string::npos);
  CHECK(err("[1, 2]").find("line 2: must be a JSON object, got array") != std::string::npos);
  // A blank line in the middle is an error; one at the very end is not.
  CHECK(trace_error(d, man, kGoodLine0 + "\n\n" + kGoodLine0 + "\n").find("line 2: empty line") != std::string::npos);
  CHECK(trace_error(d, man, kGoodLine0 + "\n\n") == "(no error)");
  CHECK(trace_error(d, man, "").find("requests.jsonl: no requests") != std::string::npos);
  // Prefix hashes: at most one per block of the prompt.
  const std::string man_blocks = manifest_json("null", "null", R"(["code", "math"])", R"(, "prefix_block_tokens": 4)");
  CHECK(
      trace_error(
          d, man_blocks,
          kGoodLine0 + "\n" +
              R"({"id": 1, "arrival_s": 1, "prompt_tokens": 5, "output_tokens": 2, "label": "math", "prefix_hashes": [1, 2, 3]})" +
              "\n")
          .find("line 2: prefix_hashes: 3 hashes for a prompt of 5 tokens (2 blocks of 4)") != std::string::npos);
}

TEST_CASE("trace format: requests must match their routing records (the last output token aside)")
{
  ScratchDir d("records");
  write_synthetic_routing(d.file("routing.bin"), 2, 8, 2, {{10, 4}, {3, 2}});
  const std::string man = manifest_json(R"({"name": "m", "layers": 2, "experts": 8, "top_k": 2})", R"("routing.bin")");
  auto line             = [](int prompt, int output, const std::string& rec) {
    return R"({"id": 0, "arrival_s": 0, "prompt_tokens": )" + std::to_string(prompt) + R"(, "output_tokens": )" +
           std::to_string(output) + R"(, "label": "code")" + rec + "}\n";
  };
  CHECK(trace_error(d, man, line(10, 4, R"(, "routing_record": 0)")) == "(no error)");
  CHECK(trace_error(d, man, line(11, 4, R"(, "routing_record": 0)"))
            .find("requests.jsonl: line 1: routing_record: record 0 holds 10 prompt + 4 output tokens, the request has "
                  "11 + 4 (prompts must be equal; the record's output may lack the request's last token only)") !=
        std::string::npos);
  CHECK(trace_error(d, man, line(10, 3, R"(, "routing_record": 0)")).find("the request has 10 + 3") !=
        std::string::npos);
  // The record may lack the last output token (sampled, never fed through the model), nothing more.
  CHECK(trace_error(d, man, line(10, 5, R"(, "routing_record": 0)")) == "(no error)");
  CHECK(trace_error(d, man, line(10, 6, R"(, "routing_record": 0)")).find("the request has 10 + 6") !=
        std::string::npos);
  CHECK(trace_error(d, man, line(3, 2, R"(, "routing_record": 2)"))
            .find("line 1: routing_record: record 2 does not exist") != std::string::npos);
  CHECK(trace_error(d, man, line(3, 2, "")).find("line 1: routing_record: is required") != std::string::npos);
  // The manifest's model must describe the routing file.
  const std::string wrong =
      manifest_json(R"({"name": "m", "layers": 3, "experts": 8, "top_k": 2})", R"("routing.bin")");
  CHECK(trace_error(d, wrong, line(10, 4, R"(, "routing_record": 0)"))
            .find("trace.json: model: layers 3, experts 8, top_k 2 differ from the routing file's header") !=
        std::string::npos);
}

TEST_CASE("trace format: the writer applies the reader's rules before writing anything")
{
  ScratchDir d("writer");
  TraceManifest m;
  m.labels = {"chat"};
  std::vector<TraceRequest> reqs(2);
  reqs[0] = {0, 1.0, 10, 2, 0, false, {}, -1};
  reqs[1] = {1, 0.5, 10, 2, 0, false, {}, -1};
  CHECK_THROWS_WITH_AS(write_trace(d.path(), m, reqs),
                       doctest::Contains("requests.jsonl: line 2: arrival_s: 0.5 is before the previous request's 1"),
                       InputError);
  reqs[1].arrival_s     = 2;
  reqs[1].output_tokens = 1;
  CHECK_THROWS_WITH_AS(write_trace(d.path(), m, reqs), doctest::Contains("line 2: output_tokens: must be at least 2"),
                       InputError);
  CHECK_FALSE(std::filesystem::exists(d.file("trace.json")));
  CHECK_FALSE(std::filesystem::exists(d.file("requests.jsonl")));
}
