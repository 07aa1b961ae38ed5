// Importers (sim/trace/trace_importers.hpp): ESFT routing against the raw data, Azure and Mooncake
// on small hand-written inputs.
#include "sim/common/input_error.hpp"
#include "sim/gating/replay_gating.hpp"
#include "sim/trace/gating_file.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_importers.hpp"
#include "trace_test_util.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

using namespace eldr;
using namespace eldr::test;

namespace {

const std::string kEsftDir = "traces/routing/esft_deepseek_v2_lite";

struct EsftSeq {
  long tokens, offset;
};

// The data, read independently of the importer: seqlens rows and the raw u8 ids.
std::vector<EsftSeq> esft_seqlens(const std::string& domain)
{
  std::ifstream in(kEsftDir + "/esft_" + domain + "_seqlens.csv");
  std::string line;
  std::getline(in, line);
  std::vector<EsftSeq> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string idx, n, off;
    std::getline(ss, idx, ',');
    std::getline(ss, n, ',');
    std::getline(ss, off, ',');
    out.push_back({std::stol(n), std::stol(off)});
  }
  return out;
}

std::vector<uint8_t> esft_bin(const std::string& domain)
{
  std::ifstream in(kEsftDir + "/esft_" + domain + "_top6_u8.bin", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("ESFT import: a slice has the data's token counts and ids, split 40/60 into prompt and output")
{
  REQUIRE_MESSAGE(std::filesystem::is_directory(kEsftDir), "the ESFT data must be at " << kEsftDir);
  ScratchDir d("esft");
  EsftImportOptions o;
  o.data_dir             = kEsftDir;
  o.out_dir              = d.path();
  o.domains              = {"law", "intent"};
  o.sequences_per_domain = 3;
  o.shuffle              = false;
  o.calibration          = 1;
  ImportReport rep       = import_esft(o);
  CHECK(rep.rows == 6);
  CHECK(rep.requests == 6);
  CHECK(rep.calibration == 1);
  CHECK(rep.skipped_short == 0);

  Trace t = read_trace(d.path());
  CHECK(t.manifest.labels == std::vector<std::string>{"law", "intent"});
  REQUIRE(t.manifest.model);
  CHECK(t.manifest.model->layers == 26);
  CHECK(t.manifest.model->experts == 64);
  CHECK(t.manifest.model->top_k == 6);
  GatingFile f = GatingFile::load(t.routing_path());
  REQUIRE(f.records() == 6);
  CHECK_FALSE(f.header().gates);

  uint64_t tokens = 0;
  for (int dom = 0; dom < 2; ++dom) {
    const std::string name = dom == 0 ? "law" : "intent";
    const auto seqs        = esft_seqlens(name);
    const auto bin         = esft_bin(name);
    for (int s = 0; s < 3; ++s) {
      const size_t i        = size_t(dom * 3 + s);  // no shuffle: domain then sequence order
      const TraceRequest& q = t.requests[i];
      CAPTURE(name);
      CAPTURE(s);
      CHECK(q.label == dom);
      CHECK(q.calibration == (i == 0));
      CHECK(q.routing_record == int32_t(i));
      const long n = seqs[size_t(s)].tokens;
      CHECK(q.prompt_tokens == long(double(n) * 0.4));
      CHECK(q.prompt_tokens + q.output_tokens == n);
      CHECK(f.record(i).prompt_tokens == uint32_t(q.prompt_tokens));
      CHECK(f.record(i).output_tokens == uint32_t(q.output_tokens));
      tokens += uint64_t(n);
      long mismatches = 0;
      uint16_t ids[6];
      for (long tok = 0; tok < n; ++tok)
        for (int l = 0; l < 26; ++l) {
          f.ids(i, uint64_t(tok), l, ids);
          const size_t at = (size_t(seqs[size_t(s)].offset + tok) * 26 + size_t(l)) * 6;
          for (int j = 0; j < 6; ++j)
            mismatches += ids[j] != bin[at + size_t(j)];
        }
      CHECK(mismatches == 0);
    }
  }
  CHECK(rep.routing_tokens == tokens);
  // Calibration requests arrive at 0; served ones by Poisson arrivals after them.
  CHECK(t.requests[0].arrival_s == 0);
  CHECK(t.requests[1].arrival_s > 0);
}

TEST_CASE("ESFT import: shuffle, calibration and repeats")
{
  REQUIRE(std::filesystem::is_directory(kEsftDir));
  ScratchDir d("esft-repeat");
  EsftImportOptions o;
  o.data_dir             = kEsftDir;
  o.out_dir              = d.path();
  o.sequences_per_domain = 5;
  o.calibration          = 4;
  o.repeat               = 3;
  o.seed                 = 7;
  o.prompt_fraction      = 0.25;
  import_esft(o);
  Trace t = read_trace(d.path());
  CHECK(t.manifest.labels.size() == 4);
  REQUIRE(t.requests.size() == 4 + 16 * 3);
  std::set<int32_t> calibration;
  std::map<int32_t, int> served;
  for (const auto& q : t.requests) {
    if (q.calibration)
      calibration.insert(q.routing_record);
    else
      ++served[q.routing_record];
  }
  CHECK(calibration.size() == 4);
  CHECK(served.size() == 16);
  for (const auto& [rec, n] : served) {
    CHECK(n == 3);
    CHECK_FALSE(calibration.count(rec));  // calibration sequences are never served
  }
  // Shuffled: the calibration set is not simply the first law sequences.
  CHECK(calibration != std::set<int32_t>{0, 1, 2, 3});
  // Too many calibration sequences.
  o.calibration = 20;
  CHECK_THROWS_WITH_AS(import_esft(o), doctest::Contains("20 calibration sequences leave none to serve"), InputError);
}

TEST_CASE("Azure import: arrivals relative to the first row, lengths, clamps, clipping and dropping")
{
  ScratchDir d("azure");
  const std::string csv = d.file("azure_code.csv");
  write_text(csv, "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                  "2023-11-16 23:59:59.5000000,100,10\r\n"
                  "2023-11-17 00:00:00.7500001,9000,1\r\n"
                  "2023-11-17 00:00:02.0000000,300,20\r\n");
  RequestTraceImportOptions o;
  o.input          = csv;
  o.out_dir        = d.file("out");
  ImportReport rep = import_azure(o);
  CHECK(rep.rows == 3);
  CHECK(rep.clamped_outputs == 1);
  CHECK(rep.prompts_over_8192 == 1);
  Trace t = read_trace(o.out_dir);
  CHECK(t.manifest.labels == std::vector<std::string>{"code"});  // from the file name
  CHECK_FALSE(t.manifest.model);
  REQUIRE(t.requests.size() == 3);
  CHECK(t.requests[0].arrival_s == 0);
  CHECK(t.requests[1].arrival_s == doctest::Approx(1.2500001).epsilon(1e-12));  // across midnight
  CHECK(t.requests[2].arrival_s == doctest::Approx(2.5));
  CHECK(t.requests[1].prompt_tokens == 9000);
  CHECK(t.requests[1].output_tokens == 2);

  o.max_prompt = 4096;
  o.time_scale = 2;
  o.label      = "chat";
  rep          = import_azure(o);
  CHECK(rep.clipped_prompts == 1);
  t = read_trace(o.out_dir);
  CHECK(t.manifest.labels == std::vector<std::string>{"chat"});
  CHECK(t.requests[1].prompt_tokens == 4096);
  CHECK(t.requests[2].arrival_s == doctest::Approx(5.0));

  o.drop_long = true;
  o.limit     = 2;
  rep         = import_azure(o);
  CHECK(rep.rows == 2);
  CHECK(rep.dropped_long == 1);
  CHECK(read_trace(o.out_dir).requests.size() == 1);

  write_text(csv, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:00:00,5,5\n2023-11-16 09:00:00,5,5\n");
  o         = {};
  o.input   = csv;
  o.out_dir = d.file("out2");
  CHECK_THROWS_WITH_AS(import_azure(o),
                       doctest::Contains("azure_code.csv: line 3: TIMESTAMP: earlier than the previous row"),
                       InputError);
  write_text(csv, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 10:00:00,x,5\n");
  CHECK_THROWS_WITH_AS(import_azure(o), doctest::Contains("line 2: ContextTokens: not an integer: 'x'"), InputError);
}

TEST_CASE("Mooncake import: prefix hashes as given, cut with the prompt")
{
  ScratchDir d("mooncake");
  const std::string in = d.file("m.jsonl");
  write_text(in, R"({"timestamp": 1000, "input_length": 1500, "output_length": 1, "hash_ids": [0, 1, 2]})"
                 "\n"
                 R"({"timestamp": 1250, "input_length": 600, "output_length": 30, "hash_ids": [0, 3]})"
                 "\n");
  RequestTraceImportOptions o;
  o.input          = in;
  o.out_dir        = d.file("out");
  o.max_prompt     = 1024;
  ImportReport rep = import_mooncake(o);
  CHECK(rep.clipped_prompts == 1);
  CHECK(rep.clamped_outputs == 1);
  Trace t = read_trace(o.out_dir);
  CHECK(t.manifest.prefix_block_tokens == 512);
  CHECK(t.manifest.labels == std::vector<std::string>{"chat"});
  REQUIRE(t.requests.size() == 2);
  CHECK(t.requests[0].prompt_tokens == 1024);
  CHECK(t.requests[0].output_tokens == 2);
  CHECK(t.requests[0].prefix_hashes == std::vector<uint64_t>{0, 1});  // 2 blocks of 512 remain
  CHECK(t.requests[1].prefix_hashes == std::vector<uint64_t>{0, 3});
  CHECK(t.requests[1].arrival_s == doctest::Approx(0.25));

  write_text(in, R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0], "extra": 1})"
                 "\n");
  CHECK_THROWS_WITH_AS(import_mooncake(o), doctest::Contains("m.jsonl: line 1.extra: unknown key"), InputError);
  write_text(in, R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [0, 1]})"
                 "\n");
  CHECK_THROWS_WITH_AS(import_mooncake(o),
                       doctest::Contains("line 1.hash_ids: 2 hashes for 10 tokens (1 blocks of 512)"), InputError);
}

TEST_CASE("Azure timestamps")
{
  CHECK(parse_timestamp_ns("1970-01-01 00:00:00") == 0);
  CHECK(parse_timestamp_ns("1970-01-02 00:00:01.5") == 86401500000000LL);
  CHECK(parse_timestamp_ns("2023-11-16 18:15:46.6805900") - parse_timestamp_ns("2023-11-16 18:15:46") == 680590000);
  CHECK(parse_timestamp_ns("4046-11-16 18:17:03.9799600") == -1);  // past 2262: int64 ns overflow (a fuzzing finding)
  CHECK(parse_timestamp_ns("0999-01-01 00:00:00") == -1);
  CHECK(parse_timestamp_ns("2024-03-01 00:00:00") - parse_timestamp_ns("2024-02-28 00:00:00") == 2 * 86400000000000LL);
  CHECK(parse_timestamp_ns("2023-11-16T18:15:46") == -1);
  CHECK(parse_timestamp_ns("2023-11-16 18:15:46.x") == -1);
  CHECK(parse_timestamp_ns("garbage") == -1);
}
