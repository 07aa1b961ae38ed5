// vLLM routed-expert arrays (sim/trace/expert_array.hpp) and `trace import vllm`
// (import_vllm): base64, .npy of int16 and int32, nested lists, and the hand-made fixtures of
// tests/data/vllm/ (both encodings of the same six responses) imported to the same trace.
#include "input_error_util.hpp"
#include "sim/trace/expert_array.hpp"
#include "sim/trace/gating_file.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_importers.hpp"
#include "support/scratch_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <sstream>

using namespace eldr;
using namespace eldr::test;

namespace {

const std::string kFixtures = "tests/data/vllm/";

std::string b64(const std::vector<uint8_t>& bytes)
{
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = uint32_t(bytes[i]) << 16 | (i + 1 < bytes.size() ? uint32_t(bytes[i + 1]) << 8 : 0) |
                 (i + 2 < bytes.size() ? bytes[i + 2] : 0);
    s += a[v >> 18 & 63];
    s += a[v >> 12 & 63];
    s += i + 1 < bytes.size() ? a[v >> 6 & 63] : '=';
    s += i + 2 < bytes.size() ? a[v & 63] : '=';
  }
  return s;
}

// A .npy v1.0 file as NumPy writes it: header padded with spaces to a multiple of 64, ending '\n'.
std::vector<uint8_t> npy(const std::string& descr, const std::string& shape, const std::vector<int64_t>& values,
                         int item)
{
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string head = "\x93NUMPY";
  head += {'\1', '\0', char(h.size() & 0xff), char(h.size() >> 8)};
  head += h;
  std::vector<uint8_t> b(head.begin(), head.end());
  for (int64_t v : values)
    for (int j = 0; j < item; ++j)
      b.push_back(uint8_t(uint64_t(v) >> (8 * j)));
  return b;
}

std::string slurp(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("vllm arrays: base64 decodes with and without padding, truncated or stray input is an error")
{
  auto text = [](const std::string& s) {
    auto v = decode_base64(s, "f", "x");
    return std::string(v.begin(), v.end());
  };
  CHECK(text("TWFu") == "Man");
  CHECK(text("TWE=") == "Ma");
  CHECK(text("TQ==") == "M");
  CHECK(text("TWFu\nTWFu") == "ManMan");
  CHECK(text("") == "");
  CHECK(contains(
      input_error_of([] { decode_base64("TWFuTW", "f", "line 2: routed_experts"); }),
      "f: line 2: routed_experts: base64: 6 characters, not a whole number of 4-character groups (truncated?)"));
  CHECK(contains(input_error_of([] { decode_base64("TW*u", "f", "x"); }), "invalid character '*' at offset 2"));
  CHECK(contains(input_error_of([] { decode_base64("TQ==TWFu", "f", "x"); }), "data after '=' padding"));
}

TEST_CASE("vllm arrays: .npy of int16 and int32 (negative values sign-extended), and its errors")
{
  const std::vector<int64_t> v = {3, 0, 63, 7, 1, 2, -1, 5, 6, 4, 8, 9};  // shape (2, 3, 2)
  for (auto [descr, item] : {std::pair<std::string, int>{"<i2", 2}, {"<i4", 4}, {"<i8", 8}}) {
    ExpertArray a = parse_npy(npy(descr, "(2, 3, 2)", v, item), "f", "x");
    CHECK(a.shape == std::array<size_t, 3>{2, 3, 2});
    CHECK(a.values == v);
    CHECK(a.at(1, 0, 0) == -1);
    CHECK(a.encoding == "base64 .npy " + descr);
  }
  auto err = [&](const std::vector<uint8_t>& b) { return input_error_of([&] { parse_npy(b, "f", "x"); }); };
  auto b   = npy("<i2", "(2, 3, 2)", v, 2);
  b.pop_back();
  CHECK(contains(err(b), "npy data of 23 bytes; shape (2, 3, 2) of <i2 needs 24 (truncated?)"));
  CHECK(contains(err(npy(">i2", "(2, 3, 2)", v, 2)), "only little-endian"));
  CHECK(contains(err(npy("<f4", "(2, 3, 2)", v, 4)), "expert ids must be int8..int64"));
  CHECK(contains(err(npy("<i2", "(12,)", v, 2)), "npy shape (12,): expected 3 dimensions"));
  CHECK(contains(err({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}), "no \\x93NUMPY magic"));
  b = npy("<i2", "(2, 3, 2)", v, 2);
  b.resize(40);
  CHECK(contains(err(b), "truncated"));
}

TEST_CASE("vllm arrays: nested lists and base64 strings give the same array, ragged lists name the element")
{
  const Json lists    = Json::parse("[[[1,2],[3,4],[5,6]],[[7,8],[9,10],[11,12]]]");
  const ExpertArray a = parse_expert_array(lists, "f", "x");
  const ExpertArray b =
      parse_expert_array(Json(b64(npy("<i2", "(2, 3, 2)", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 2))), "f", "x");
  CHECK(a.shape == b.shape);
  CHECK(a.values == b.values);
  CHECK(parse_expert_array(Json::array(), "f", "x").shape[0] == 0);
  CHECK(contains(input_error_of([] { parse_expert_array(Json::parse("[[[1,2],[3,4]],[[5,6]]]"), "f", "x"); }),
                 "f: x[1]: expected a list of 2 layers (as token 0 has), got 1"));
  CHECK(contains(input_error_of([] { parse_expert_array(Json::parse("[[[1,2],[3]]]"), "f", "x"); }), "f: x[0][1]:"));
  CHECK(contains(input_error_of([] { parse_expert_array(Json::parse("[[[1,2.5]]]"), "f", "x"); }),
                 "x[0][0][1]: expert id is not an integer"));
  CHECK(contains(input_error_of([] { parse_expert_array(Json(7), "f", "x"); }), "got number"));
}

TEST_CASE("trace import vllm: both fixture encodings give the same trace, sorted by arrival, ids as captured")
{
  ScratchDir d("vllm");
  VllmImportOptions o;
  o.model_file     = "models/deepseek-v2-lite.json";
  o.input          = kFixtures + "responses_lists.jsonl";
  o.out_dir        = d.file("lists");
  o.calibration    = 1;
  ImportReport rep = import_vllm(o);
  CHECK(rep.rows == 6);
  CHECK(rep.requests == 6);
  CHECK(rep.calibration == 1);
  CHECK(contains(rep.model, "expert ids of 'deepseek-ai/DeepSeek-V2-Lite'"));
  CHECK(contains(rep.model, "deepseek-v2-lite: 26 MoE layers, 64 experts, top-6"));

  o.input        = kFixtures + "responses_npy.jsonl";
  o.arrivals_csv = kFixtures + "arrivals.csv";
  o.out_dir      = d.file("npy");
  import_vllm(o);
  CHECK(slurp(d.file("lists/requests.jsonl")) == slurp(d.file("npy/requests.jsonl")));
  CHECK(slurp(d.file("lists/routing.bin")) == slurp(d.file("npy/routing.bin")));

  const Trace t = read_trace(d.file("npy"));
  REQUIRE(t.requests.size() == 6);
  CHECK(t.manifest.model->name == "deepseek-v2-lite");
  CHECK(t.manifest.labels == std::vector<std::string>{"code", "legal"});
  // make_fixtures.py's table: by arrival cmpl-a0 (30 + 6), a1 (12 + 8), a2 (21 + no usage: 11 routed + 1) ...
  CHECK(t.requests[0].arrival_s == 0.0);
  CHECK(t.requests[0].calibration);
  CHECK(t.requests[0].prompt_tokens == 30);
  CHECK(t.requests[0].output_tokens == 6);
  CHECK(t.requests[1].arrival_s == doctest::Approx(0.4));
  CHECK(t.requests[2].prompt_tokens == 21);
  CHECK(t.requests[2].output_tokens == 12);
  CHECK(t.requests[3].output_tokens == 4);  // cmpl-a3: 4 routed tokens, completion_tokens 4
  CHECK(t.requests[5].arrival_s == doctest::Approx(2.1));

  // The first prompt token of the earliest request, as the lists fixture holds it (line 2, at top level).
  std::ifstream in(kFixtures + "responses_lists.jsonl");
  std::string line;
  std::getline(in, line);
  std::getline(in, line);
  const Json r = Json::parse(line);
  REQUIRE(r["id"] == "cmpl-a0");
  const GatingFile rf = GatingFile::load(t.routing_path());
  std::vector<uint16_t> ids(6);
  rf.ids(size_t(t.requests[0].routing_record), 0, 25, ids);
  for (size_t k = 0; k < 6; ++k)
    CHECK(ids[k] == r["prompt_routed_experts"][0][25][k].get<int>());
}

TEST_CASE("trace import vllm: a wrong model, a missing arrival or id, and --calibration too large")
{
  ScratchDir d("vllm-bad");
  VllmImportOptions o;
  o.model_file = "models/qwen3-30b-a3b.json";
  o.input      = kFixtures + "responses_lists.jsonl";
  o.out_dir    = d.file("x");
  CHECK(contains(
      input_error_of([&] { import_vllm(o); }),
      "responses_lists.jsonl: line 1: choices[0].prompt_routed_experts: shape (12, 26, 6) (tokens, layers, top_k) "
      "does not fit models/qwen3-30b-a3b.json: 48 MoE layers, top-8"));
  o.model_file = "models/deepseek-v2-lite.json";
  o.input      = kFixtures + "responses_npy.jsonl";
  CHECK(contains(input_error_of([&] { import_vllm(o); }), "line 1: arrival_s: missing"));
  o.arrivals_csv = kFixtures + "arrivals.csv";
  o.id_field     = "object";
  CHECK(contains(input_error_of([&] { import_vllm(o); }), "line 1: object: 'text_completion' is not in"));
  o.id_field    = "id";
  o.calibration = 6;
  CHECK(contains(input_error_of([&] { import_vllm(o); }), "6 calibration requests leave none to serve"));
  CHECK(!std::filesystem::exists(d.file("x")));
}
