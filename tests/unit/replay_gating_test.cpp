// ReplayGating (sim/gating/replay_gating.hpp) and the trace workload (sim/workload/trace_workload.hpp).
#include "sim/common/input_error.hpp"
#include "sim/common/rng.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/replay_gating.hpp"
#include "sim/workload/trace_workload.hpp"
#include "sim/workload/workload_factory.hpp"
#include "trace_test_util.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>

using namespace eldr;
using namespace eldr::test;

namespace {

Request request_of(int32_t record, int prompt, int output)
{
  Request r;
  r.routing_record = record;
  r.prompt_tokens  = prompt;
  r.output_tokens  = output;
  return r;
}

// Writes a trace of `n` requests (prompt 8 + i % 5, output 4 + i % 3, labels alternating, arrival
// 0.5 i, the first `flagged` flagged calibration), with a synthetic routing file for `model` dims.
void write_trace_dir(const ScratchDir& d, int n, int flagged, int layers = 26, int experts = 64, int top_k = 6,
                     int prompt_extra = 0)
{
  std::vector<std::pair<int, int>> lengths;
  std::vector<TraceRequest> reqs;
  for (int i = 0; i < n; ++i) {
    TraceRequest q;
    q.id             = uint32_t(i);
    q.arrival_s      = 0.5 * i;
    q.prompt_tokens  = 8 + i % 5 + (i == n - 1 ? prompt_extra : 0);
    q.output_tokens  = 4 + i % 3;
    q.label          = uint16_t(i % 2);
    q.calibration    = i < flagged;
    q.routing_record = i;
    if (i % 4 == 0)
      q.prefix_hashes = {uint64_t(1000 + i)};
    lengths.emplace_back(q.prompt_tokens, q.output_tokens);
    reqs.push_back(q);
  }
  write_synthetic_routing(d.file("routing.bin"), layers, experts, top_k, lengths);
  TraceManifest m;
  // Replayed routing must be the experiment model's: the trace names the shipped model of its shape.
  const std::string name = layers == 26 && experts == 64 && top_k == 6    ? "deepseek-v2-lite"
                           : layers == 48 && experts == 128 && top_k == 8 ? "qwen3-30b-a3b"
                                                                          : "synthetic";
  m.model                = TraceModel{name, layers, experts, top_k};
  m.labels               = {"code", "math"};
  m.routing_file         = "routing.bin";
  m.prefix_block_tokens  = 16;
  write_trace(d.path(), m, reqs);
}

// configs/esft.json (DeepSeek-V2-Lite: 26 layers, 64 experts, top-6) on the trace in `d`.
Experiment esft_experiment(const ScratchDir& d, std::vector<Override> extra = {})
{
  std::vector<Override> o = {{"workload.trace", d.path()}};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_experiment("configs/esft.json", o);
}

std::string load_error(const Experiment& x)
{
  try {
    Workload w = make_workload(x);
    make_gating_source(x, w);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("replay routing: masks hold exactly the file's ids, prompt tokens then output tokens")
{
  ScratchDir d("masks");
  write_synthetic_routing(d.file("routing.bin"), 3, 130, 4, {{5, 3}, {2, 2}});  // 130 experts: 3 words a layer
  ReplayGating src(d.file("routing.bin"));
  const GatingShape& s = src.shape();
  CHECK(s.layers == 3);
  CHECK(s.experts == 130);
  CHECK(s.top_k == 4);
  CHECK(s.words_per_layer == 3);
  CHECK(src.records() == 2);
  CHECK(src.record_prompt_tokens(0) == 5);
  CHECK(src.record_output_tokens(1) == 2);
  CHECK_FALSE(src.has_gates());
  for (int rec = 0; rec < 2; ++rec) {
    const Request r = rec == 0 ? request_of(0, 5, 3) : request_of(1, 2, 2);
    for (int t = 0; t < r.prompt_tokens + r.output_tokens; ++t) {
      auto masks = src.token_experts(r, t);
      REQUIRE(masks.size() == size_t(s.words()));
      for (int l = 0; l < 3; ++l) {
        uint16_t want[4];
        synthetic_ids(rec, t, l, 130, 4, want);
        std::vector<uint64_t> expect(3, 0);
        for (uint16_t e : want)
          expect[e / 64] |= uint64_t(1) << (e % 64);
        CAPTURE(rec);
        CAPTURE(t);
        CAPTURE(l);
        for (int w = 0; w < 3; ++w)
          CHECK(masks[size_t(l * 3 + w)] == expect[size_t(w)]);
        uint16_t got[4];
        src.token_ids(r, t, l, got);
        std::sort(want, want + 4);
        CHECK(std::equal(got, got + 4, want));
      }
    }
  }
  // A request shorter than its record replays the record's leading prompt tokens and leading output tokens.
  const Request shorter = request_of(0, 2, 2), full = request_of(0, 5, 3);
  CHECK(std::ranges::equal(src.token_experts(shorter, 1), src.token_experts(full, 1)));
  CHECK(std::ranges::equal(src.token_experts(shorter, 2), src.token_experts(full, 5)));  // first output token
  CHECK(std::ranges::equal(src.token_experts(shorter, 3), src.token_experts(full, 6)));
  // accumulate_tokens (prefetching override) equals the plain OR of token_experts.
  std::vector<Request> reqs = {full, request_of(1, 2, 2), shorter};
  std::vector<TokenRef> refs;
  for (int i = 0; i < 9; ++i)
    refs.push_back({&reqs[size_t(i % 3)], i % 4});
  std::vector<uint64_t> a(size_t(s.words()), 0), b(size_t(s.words()), 0);
  src.accumulate_tokens(refs, a);
  for (const TokenRef& t : refs)
    accumulate(b, src.token_experts(*t.request, t.position));
  CHECK(a == b);
  // Requests longer than their record are refused.
  CHECK_THROWS_WITH_AS(
      src.check_request(request_of(1, 3, 2), "requests.jsonl", "line 2"),
      doctest::Contains("requests.jsonl: line 2: the request's 3 prompt + 2 output tokens exceed routing "
                        "record 1's 2 + 2"),
      InputError);
  CHECK_THROWS_WITH_AS(src.check_request(request_of(2, 1, 2), "f", "x"),
                       doctest::Contains("routing record 2 does not exist (2 records)"), InputError);
  CHECK_THROWS_AS(src.token_experts(request_of(1, 2, 2), 4), std::out_of_range);
  // One output token more than the record: fine, the last output token is never fed.
  const Request longer = request_of(1, 2, 3);
  CHECK_NOTHROW(src.check_request(longer, "f", "x"));
  CHECK(std::ranges::equal(src.token_experts(longer, 3), src.token_experts(request_of(1, 2, 2), 3)));
  CHECK_THROWS_AS(src.token_experts(longer, 4), std::out_of_range);
  CHECK_THROWS_WITH_AS(src.check_request(request_of(1, 2, 4), "f", "x"),
                       doctest::Contains("(+ 1: the last output token needs no routing)"), InputError);
}

TEST_CASE("replay routing: gate values follow the ids in ascending order")
{
  ScratchDir d("gates");
  GatingWriter w(d.file("g.bin"), 2, 8, 3, true);
  w.begin_record(1, 2);
  const uint16_t ids[3][6] = {{5, 1, 3, 0, 7, 2}, {1, 2, 3, 4, 5, 6}, {6, 0, 2, 7, 3, 1}};
  const float g[3][6]      = {
           {0.5f, 0.1f, 0.3f, 0.9f, 0.7f, 0.2f}, {1, 2, 3, 4, 5, 6}, {0.6f, 0.0f, 0.2f, 0.7f, 0.3f, 0.1f}};
  for (int t = 0; t < 3; ++t)
    w.add_token(ids[t], g[t]);
  w.end_record();
  w.close();
  ReplayGating src(d.file("g.bin"));
  REQUIRE(src.has_gates());
  const Request r = request_of(0, 1, 2);
  auto gates      = src.token_gates(r, 0);
  REQUIRE(gates.size() == 6);
  // Layer 0 ids {5, 1, 3} -> ascending {1, 3, 5} with gates {0.1, 0.3, 0.5}; layer 1 {0, 7, 2} -> {0, 2, 7}.
  const float want0[] = {0.1f, 0.3f, 0.5f, 0.9f, 0.2f, 0.7f};
  for (int i = 0; i < 6; ++i)
    CHECK(gates[size_t(i)] == want0[i]);
  uint16_t got[3];
  src.token_ids(r, 0, 1, got);
  CHECK(got[0] == 0);
  CHECK(got[1] == 2);
  CHECK(got[2] == 7);
  const float want2[] = {0.0f, 0.2f, 0.6f, 0.1f, 0.3f, 0.7f};
  for (int i = 0; i < 6; ++i)
    CHECK(src.token_gates(r, 2)[size_t(i)] == want2[i]);
}

TEST_CASE("trace workload: flagged calibration requests, then warm-up, then every remaining request measured")
{
  ScratchDir d("split");
  write_trace_dir(d, 20, 3);
  Experiment x = esft_experiment(d, {{"workload.warmup_requests", "4"}, {"workload.arrivals", "trace"}});
  Workload w   = make_workload(x);
  CHECK(w.labels == std::vector<std::string>{"code", "math"});
  REQUIRE(w.calibration.size() == 3);
  REQUIRE(w.requests.size() == 17);  // measured_requests not set: all remaining (not rate x duration)
  for (size_t i = 0; i < w.calibration.size(); ++i) {
    CHECK(w.calibration[i].id == i);
    CHECK(w.calibration[i].routing_record == int32_t(i));
    CHECK_FALSE(w.calibration[i].measured);
  }
  Rng content(x.seed, "workload.requests");
  std::vector<uint64_t> seeds(20);
  for (auto& s : seeds)
    s = content();
  for (size_t k = 0; k < w.requests.size(); ++k) {
    const Request& r = w.requests[k];
    const size_t i   = k + 3;  // file index
    CAPTURE(k);
    CHECK(r.id == k);
    CHECK(r.measured == (k >= 4));
    CHECK(r.prompt_tokens == int(8 + i % 5));
    CHECK(r.output_tokens == int(4 + i % 3));
    CHECK(r.label == i % 2);
    CHECK(r.routing_record == int32_t(i));
    CHECK(r.routing_seed == seeds[i]);
    if (i % 4 == 0)
      CHECK(r.prefix_hash == 1000 + i);
    // Trace arrivals: warm-up from its first request (file index 3), measured from the last warm-up request (6).
    CHECK(r.arrival_s == doctest::Approx(r.measured ? 0.5 * double(i) - 3.0 : 0.5 * double(i) - 1.5));
  }
  // Without a prefix hash, each request gets its own.
  CHECK(w.requests[1].prefix_hash != w.requests[2].prefix_hash);
}

TEST_CASE("trace workload: a trace's prompt lengths are as served, with no chat template added")
{
  ScratchDir d("template");
  write_trace_dir(d, 12, 2, 48, 128, 8);  // Qwen3-30B-A3B's shape: that model has a chat template
  Experiment x = esft_experiment(d, {{"model", "qwen3-30b-a3b"}, {"workload.warmup_requests", "0"}});
  CHECK(x.model.template_prefix_tokens == 3);
  CHECK(x.workload.template_prefix_tokens + x.workload.template_suffix_tokens == 0);
  Workload w = make_workload(x);
  CHECK(w.template_owner() == nullptr);
  for (size_t k = 0; k < w.requests.size(); ++k)
    CHECK(w.requests[k].prompt_tokens == int(8 + (k + 2) % 5));
}

TEST_CASE("trace workload: without flags the first calibration_requests calibrate, measured_requests clips")
{
  ScratchDir d("firstn");
  write_trace_dir(d, 20, 0);
  SUBCASE("explicit measured_requests is honoured")
  {
    Experiment x = esft_experiment(d, {{"workload.calibration_requests", "5"},
                                       {"workload.warmup_requests", "2"},
                                       {"workload.measured_requests", "6"}});
    Workload w   = make_workload(x);
    CHECK(w.calibration.size() == 5);
    CHECK(w.calibration[4].routing_record == 4);
    REQUIRE(w.requests.size() == 8);
    CHECK(w.requests[0].routing_record == 5);
    CHECK(std::count_if(w.requests.begin(), w.requests.end(), [](const Request& r) { return r.measured; }) == 6);
  }
  SUBCASE("more than the trace has: clipped to what remains")
  {
    Experiment x = esft_experiment(d, {{"workload.calibration_requests", "5"},
                                       {"workload.warmup_requests", "2"},
                                       {"workload.measured_requests", "600"}});
    CHECK(make_workload(x).requests.size() == 15);
  }
  SUBCASE("poisson arrivals are re-drawn from generate_workload's streams")
  {
    Experiment x = esft_experiment(d, {{"workload.calibration_requests", "0"},
                                       {"workload.warmup_requests", "3"},
                                       {"workload.arrivals", "poisson"},
                                       {"workload.rate_rps", "7"},
                                       {"workload.warmup_rate_rps", "11"}});
    Workload w   = make_workload(x);
    REQUIRE(w.requests.size() == 20);
    Rng warm(x.seed, "workload.arrivals.warmup"), meas(x.seed, "workload.arrivals.measured");
    double tw = 0, tm = 0;
    for (const Request& r : w.requests) {
      if (r.measured)
        tm += meas.exponential(7);
      else
        tw += warm.exponential(11);
      CHECK(r.arrival_s == (r.measured ? tm : tw));
    }
  }
  SUBCASE("not enough requests for the warm-up")
  {
    Experiment x = esft_experiment(d, {{"workload.calibration_requests", "5"}, {"workload.warmup_requests", "15"}});
    CHECK(load_error(x).find("workload.warmup_requests: 15 warm-up requests and at least one measured request need 16 "
                             "requests, but") != std::string::npos);
  }
}

TEST_CASE("trace workload: a model mismatch names both files")
{
  ScratchDir d("mismatch");
  write_trace_dir(d, 6, 1, 4, 16, 2);
  Experiment x        = esft_experiment(d, {{"workload.warmup_requests", "0"}});
  const std::string e = load_error(x);
  CHECK(e.find(d.file("trace.json") + ": model: 'synthetic' (4 layers, 16 experts, top-2) does not match the "
                                      "experiment's model 'deepseek-v2-lite' (26 layers, 64 experts, top-6) in "
                                      "configs/esft.json") != std::string::npos);
  // With another routing source the trace's routing is not used, and any model runs it.
  Experiment u = esft_experiment(d, {{"workload.warmup_requests", "0"}, {"workload.routing", "uniform"}});
  CHECK(load_error(u) == "(no error)");
}

TEST_CASE("trace workload: requests a worker cannot hold are refused at load time")
{
  ScratchDir d("limits");
  write_trace_dir(d, 6, 1, 26, 64, 6, 20000);  // the last request has a 20,008-token prompt
  SUBCASE("prefill token budget")
  {
    Experiment x = esft_experiment(d, {{"workload.warmup_requests", "0"}});
    CHECK(load_error(x).find("requests.jsonl: line 6: prompt_tokens: 20008 tokens exceed serving.prefill_token_budget "
                             "(8192 in configs/esft.json)") != std::string::npos);
  }
  SUBCASE("decode KV memory")
  {
    // DeepSeek-V2-Lite's weights take 31.4 GB; at 0.1652 x 192 GB about 0.3 GB (~9.8k tokens) of KV remain.
    Experiment x = esft_experiment(d, {{"workload.warmup_requests", "0"},
                                       {"serving.prefill_token_budget", "100000"},
                                       {"serving.kv_memory_fraction", "0.1652"}});
    CHECK(load_error(x).find("requests.jsonl: line 6: 20008 prompt + 6 output tokens need") != std::string::npos);
    CHECK(load_error(x).find("more than a decode worker holds") != std::string::npos);
  }
  SUBCASE("calibration requests are never served, so they are not checked")
  {
    ScratchDir d2("limits2");
    write_trace_dir(d2, 6, 0, 26, 64, 6, 20000);
    Experiment x = esft_experiment(d2, {{"workload.warmup_requests", "0"}, {"workload.calibration_requests", "0"}});
    CHECK(load_error(x).find("line 6: prompt_tokens") != std::string::npos);
  }
}

TEST_CASE("trace workload: replay needs a routing file")
{
  ScratchDir d("nofile");
  TraceManifest m;
  m.labels = {"chat"};
  std::vector<TraceRequest> reqs(3);
  for (int i = 0; i < 3; ++i)
    reqs[size_t(i)] = {uint32_t(i), double(i), 10, 4, 0, false, {}, -1};
  write_trace(d.path(), m, reqs);
  Experiment x = esft_experiment(d, {{"workload.warmup_requests", "0"}, {"workload.calibration_requests", "0"}});
  CHECK(load_error(x).find("configs/esft.json: workload.routing: 'trace' replays the trace's routing file, but") !=
        std::string::npos);
  Experiment u = esft_experiment(
      d, {{"workload.warmup_requests", "0"}, {"workload.calibration_requests", "0"}, {"workload.routing", "uniform"}});
  CHECK(make_workload(u).requests.size() == 3);
}
