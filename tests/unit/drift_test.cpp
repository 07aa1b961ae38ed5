// Drifting workloads (issue 9, docs/model.md section 4a): a schedule of label mixes over measured time,
// sub-topics the calibration split never saw, and one-line errors for bad schedules.
#include "input_error_util.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/workload/workload_factory.hpp"
#include "sim/workload/workload_generator.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace eldr;
using eldr::test::contains;
using eldr::test::input_error_of;

namespace {

// The default experiment's workload with these counts and rate: 500 calibration requests.
WorkloadSpec task_spec(long warmup, long measured, double rate)
{
  return load_experiment("configs/default.json", {{"workload.warmup_requests", std::to_string(warmup)},
                                                  {"workload.measured_requests", std::to_string(measured)},
                                                  {"workload.rate_rps", std::to_string(rate)},
                                                  {"workload.calibration_requests", "500"}})
      .workload;
}

// Label shares of the measured requests arriving in [t0, t1).
std::vector<double> shares(const Workload& w, double t0, double t1, long* count = nullptr)
{
  std::vector<double> n(w.labels.size(), 0);
  long total = 0;
  for (const Request& r : w.requests)
    if (r.measured && r.arrival_s >= t0 && r.arrival_s < t1) {
      n[r.label] += 1;
      ++total;
    }
  for (double& x : n)
    x /= double(total);
  if (count)
    *count = total;
  return n;
}

// Three binomial standard deviations of a share p over n draws, plus a little slack.
double tolerance(double p, long n)
{
  return 3 * std::sqrt(p * (1 - p) / double(n)) + 1e-3;
}

const std::vector<double> kBase = {2779, 2744, 2545, 3600};  // code, math, medical, legal

}  // namespace

TEST_CASE("drift: a rotation schedule gives the intended label mix in each window")
{
  // 30,000 measured requests at 250 req/s: 120 s, about 10,000 per 40-s window.
  WorkloadSpec s = task_spec(2000, 30000, 250);
  // Code-heavy, then math-heavy, then legal-heavy; medical absent in the last piece.
  s.mix_schedule   = {{0, {0.6, 0.2, 0.1, 0.1}}, {40, {0.1, 0.6, 0.2, 0.1}}, {80, {0.2, 0.2, 0, 0.6}}};
  const Workload w = generate_workload(s, 7);
  REQUIRE(w.labels == std::vector<std::string>{"code", "math", "medical", "legal"});
  const double edges[] = {0, 40, 80, 1e9};
  for (int k = 0; k < 3; ++k) {
    long n                        = 0;
    const std::vector<double> got = shares(w, edges[k], edges[k + 1], &n);
    CAPTURE(k);
    CHECK(n > 9000);
    for (size_t l = 0; l < 4; ++l) {
      const double want = s.mix_schedule[size_t(k)].weights[l];
      CAPTURE(l);
      CHECK(std::abs(got[l] - want) <= tolerance(want, n));
    }
  }
  // A label with weight 0 never appears in its piece.
  CHECK(shares(w, 80, 1e9)[2] == 0);
  // Warm-up and calibration keep the base mix: legal 3600 / 11668 = 30.9%.
  std::vector<double> warm(4, 0), cal(4, 0);
  for (const Request& r : w.requests)
    if (!r.measured)
      warm[r.label] += 1.0 / 2000;
  for (const Request& r : w.calibration)
    cal[r.label] += 1.0 / 500;
  CHECK(std::abs(warm[3] - 3600 / 11668.0) <= tolerance(0.309, 2000));
  CHECK(std::abs(cal[3] - 3600 / 11668.0) <= tolerance(0.309, 500));
}

TEST_CASE("drift: a burst lifts one label to 60% for a minute, the base mix around it")
{
  WorkloadSpec s   = task_spec(0, 24000, 200);  // 120 s
  s.mix_schedule   = {{0, kBase}, {30, {0.1218, 0.1203, 0.6, 0.1578}}, {90, kBase}};
  const Workload w = generate_workload(s, 3);
  long n           = 0;
  CHECK(std::abs(shares(w, 30, 90, &n)[2] - 0.6) <= tolerance(0.6, n));
  const double base_medical = 2545 / 11668.0;  // 21.8%
  CHECK(std::abs(shares(w, 0, 30, &n)[2] - base_medical) <= tolerance(base_medical, n));
  CHECK(std::abs(shares(w, 90, 1e9, &n)[2] - base_medical) <= tolerance(base_medical, n));
}

TEST_CASE("drift: deterministic, and a schedule of the base mix changes nothing")
{
  WorkloadSpec s       = task_spec(100, 3000, 60);
  const Workload plain = generate_workload(s, 11);
  s.mix_schedule       = {{0, kBase}};
  const Workload same  = generate_workload(s, 11);
  s.mix_schedule       = {{0, {1, 1, 1, 1}}, {20, {0, 0, 0, 1}}};
  const Workload a = generate_workload(s, 11), b = generate_workload(s, 11);
  REQUIRE(plain.requests.size() == same.requests.size());
  for (size_t i = 0; i < plain.requests.size(); ++i) {
    CHECK(plain.requests[i].label == same.requests[i].label);
    CHECK(plain.requests[i].prompt_tokens == same.requests[i].prompt_tokens);
    CHECK(plain.requests[i].routing_seed == same.requests[i].routing_seed);
    // Arrivals and the per-request random draws do not depend on the mix.
    CHECK(plain.requests[i].arrival_s == a.requests[i].arrival_s);
    CHECK(plain.requests[i].routing_seed == a.requests[i].routing_seed);
    CHECK(a.requests[i].label == b.requests[i].label);
    CHECK(a.requests[i].prompt_tokens == b.requests[i].prompt_tokens);
    if (a.requests[i].measured && a.requests[i].arrival_s >= 20)
      CHECK(a.requests[i].label == 3);
  }
}

TEST_CASE("drift: mix_at picks the last piece started")
{
  const std::vector<MixPhase> s = {{0, {1}}, {10, {2}}, {20, {3}}};
  CHECK((*mix_at(s, 0))[0] == 1);
  CHECK((*mix_at(s, 9.99))[0] == 1);
  CHECK((*mix_at(s, 10))[0] == 2);
  CHECK((*mix_at(s, 1e6))[0] == 3);
  CHECK(mix_at({}, 5) == nullptr);
}

TEST_CASE("drift: the example configs load with their schedules resolved by label")
{
  Experiment rot = load_experiment("configs/whatif/drift-rotation.json");
  REQUIRE(rot.workload.mix_schedule.size() == 3);
  CHECK(rot.workload.mix_schedule[1].at_s == 40);
  CHECK(rot.workload.mix_schedule[1].weights[1] == doctest::Approx(0.6));  // math
  Experiment burst = load_experiment("configs/whatif/drift-burst.json");
  REQUIRE(burst.workload.mix_schedule.size() == 3);
  CHECK(burst.workload.mix_schedule[0].weights == kBase);  // "base"
  CHECK(burst.workload.mix_schedule[1].weights[2] == doctest::Approx(0.6));
  Experiment novel = load_experiment("configs/whatif/drift-new-subtopics.json");
  CHECK(novel.workload.new_subtopics_after_s == 60);
  CHECK(std::isinf(load_experiment("configs/default.json").workload.new_subtopics_after_s));
}

TEST_CASE("drift: a share piece gives listed labels their fraction and the rest the usual proportions")
{
  Experiment x =
      load_experiment("configs/default.json", {{"workload.mix_schedule", R"([{"at_s": 0, "share": {"medical": 0.6}},
                                                                {"at_s": 10, "share": {"code": 0.5, "legal": 0.5}},
                                                                {"at_s": 20, "share": {"math": 0}}])"}});
  const auto& p = x.workload.mix_schedule;
  REQUIRE(p.size() == 3);
  // code, math, legal keep 2779 : 2744 : 3600 of the remaining 40%: 0.4 x 2779 / 9123 = 0.121846...
  CHECK(p[0].weights[2] == doctest::Approx(0.6));
  CHECK(p[0].weights[0] == doctest::Approx(0.4 * 2779 / 9123));
  CHECK(p[0].weights[1] == doctest::Approx(0.4 * 2744 / 9123));
  CHECK(p[0].weights[3] == doctest::Approx(0.4 * 3600 / 9123));
  // Fractions adding up to 1 leave nothing for the others.
  CHECK(p[1].weights == std::vector<double>{0.5, 0, 0, 0.5});
  // A label switched off, the others in their usual proportions: medical 2545 / 8924.
  CHECK(p[2].weights[1] == 0);
  CHECK(p[2].weights[2] == doctest::Approx(2545.0 / 8924));
}

TEST_CASE("drift: bad schedules are one-line errors naming the file and the key")
{
  const std::string f = "configs/default.json";
  auto err            = [&](const std::string& key, const std::string& value, std::vector<Override> more = {}) {
    more.insert(more.begin(), {key, value});
    return input_error_of([&] { load_experiment(f, more); });
  };
  const std::string key = "workload.mix_schedule";
  CHECK(err(key, "[]") == f + ": workload.mix_schedule: must be a non-empty list of {\"at_s\": seconds, "
                              "\"weights\": {label: weight} or \"base\"}");
  CHECK(err(key, "{\"at_s\": 0}").find(f + ": workload.mix_schedule: must be a non-empty list") == 0);
  CHECK(err(key, R"([{"at_s": 5, "weights": "base"}])") ==
        f + ": workload.mix_schedule[0].at_s: the first piece must start at 0 (the start of the measured phase)");
  CHECK(err(key, R"([{"at_s": 0, "weights": "base"}, {"at_s": 0, "weights": "base"}])") ==
        f + ": workload.mix_schedule[1].at_s: must be later than the previous piece's (0.000000 s)");
  CHECK(err(key, R"([{"at_s": 0, "weights": {"code": 1, "poetry": 2}}])") ==
        f + ": workload.mix_schedule[0].weights.poetry: not a label of workload kind 'task' (code, math, medical, "
            "legal)");
  CHECK(err(key, R"([{"at_s": 0, "weights": {"code": -1}}])").find(f + ": workload.mix_schedule[0].weights.code: ") ==
        0);
  CHECK(err(key, R"([{"at_s": 0, "weights": {"code": 0}}])") ==
        f + ": workload.mix_schedule[0].weights: needs at least one label with a weight above 0");
  CHECK(err(key, R"([{"at_s": 0, "weights": "uniform"}])") ==
        f + ": workload.mix_schedule[0].weights: must be an object {label: weight, ...} or the string \"base\"");
  CHECK(err(key, R"([{"at_s": 0}])") ==
        f + ": workload.mix_schedule[0].weights: give exactly one of weights (relative, by label) and share "
            "(fractions of traffic for some labels, the rest in the usual mix)");
  CHECK(err(key, R"([{"at_s": 0, "weights": "base", "until": 3}])").find(f + ": workload.mix_schedule[0].until: ") ==
        0);
  CHECK(err(key, R"([3])") ==
        f + ": workload.mix_schedule[0]: must be an object {\"at_s\": seconds, \"weights\": ...}");
  CHECK(err(key, R"([{"at_s": 0, "weights": {"code": 1}}])", {{"workload.kind", "language"}}) ==
        f + ": workload.mix_schedule[0].weights.code: not a label of workload kind 'language' (en, zh, ru, fr, rest)");
  CHECK_NOTHROW(load_experiment(f, {{key, R"([{"at_s": 0, "weights": {"zh": 1}}])"}, {"workload.kind", "language"}}));
  CHECK(err(key, R"([{"at_s": 0, "weights": "base"}])", {{"workload.distinct_prompts", "100"}}) ==
        f + ": workload.mix_schedule: cannot drift the mix of a prompt pool (distinct_prompts): its prompts' labels "
            "are fixed");
  CHECK(err("workload.new_subtopics_after_s", "10", {{"workload.routing", "uniform"}}) ==
        f + ": workload.new_subtopics_after_s: needs workload.routing 'generated' (sub-topics are the routing "
            "generator's)");
  CHECK(err("workload.new_subtopics_after_s", "-1").find(f + ": workload.new_subtopics_after_s: ") == 0);
  CHECK(err(key, R"([{"at_s": 0, "weights": "base", "share": {"code": 0.6}}])") ==
        f + ": workload.mix_schedule[0].share: give exactly one of weights (relative, by label) and share (fractions "
            "of traffic for some labels, the rest in the usual mix)");
  CHECK(err(key, R"([{"at_s": 0, "share": {"code": 0.7, "math": 0.5}}])") ==
        f + ": workload.mix_schedule[0].share: fractions add up to 1.200000, more than 1");
  CHECK(err(key, R"([{"at_s": 0, "share": {"code": 1.5}}])") ==
        f + ": workload.mix_schedule[0].share.code: must be between 0 and 1, got 1.5");
  CHECK(
      err(key, R"([{"at_s": 0, "share": {"poetry": 0.5}}])") ==
      f + ": workload.mix_schedule[0].share.poetry: not a label of workload kind 'task' (code, math, medical, legal)");
  CHECK(err(key, R"([{"at_s": 0, "share": {}}])") ==
        f + ": workload.mix_schedule[0].share: must be a non-empty object {label: fraction of traffic, ...}");
  CHECK(err(key, R"([{"at_s": 0, "share": {"code": 0, "math": 0, "medical": 0, "legal": 0}}])") ==
        f + ": workload.mix_schedule[0].share: needs at least one label with a fraction above 0");
  // Every message is one line.
  CHECK(err(key, R"([{"at_s": 0, "weights": {"code": 0}}])").find('\n') == std::string::npos);
}

TEST_CASE("drift: sub-topics after new_subtopics_after_s are ones the calibration split never saw")
{
  Experiment x     = load_experiment("configs/default.json", {{"workload.warmup_requests", "50"},
                                                              {"workload.measured_requests", "400"},
                                                              {"workload.calibration_requests", "100"}});
  const Workload w = make_workload(x);
  GeneratedGating plain(x.model, x.routing_profile, "task", w.labels, x.seed, x.workload.routing_profile_file);
  const double after = w.requests.back().arrival_s / 2;
  GeneratedGating novel(x.model, x.routing_profile, "task", w.labels, x.seed, x.workload.routing_profile_file, after);
  // The usual palettes are untouched; the novel ones are appended, before the chat template's.
  const int usual = plain.template_palette();
  CHECK(novel.template_palette() == 2 * usual);
  for (int p = 0; p <= usual; ++p) {
    auto a = plain.palette_logits(p), b = novel.palette_logits(p < usual ? p : novel.template_palette());
    REQUIRE(std::equal(a.begin(), a.end(), b.begin()));
  }
  int before = 0, later = 0;
  for (const Request& r : w.requests) {
    const bool is_novel = r.measured && r.arrival_s >= after;
    (is_novel ? later : before) += 1;
    for (int t : {0, r.prompt_tokens / 2, r.prompt_tokens, r.prompt_tokens + 100}) {
      const int p = novel.palette_of(r, t);
      if (is_novel) {
        CHECK(p >= usual);
        CHECK(p - usual == plain.palette_of(r, t));  // same label, sub-topic slot and phase
      } else {
        CHECK(p == plain.palette_of(r, t));
        auto m1 = plain.token_experts(r, t);
        std::vector<uint64_t> m(m1.begin(), m1.end());
        auto m2 = novel.token_experts(r, t);
        CHECK(std::equal(m.begin(), m.end(), m2.begin()));
      }
    }
  }
  CHECK(before > 100);
  CHECK(later > 100);
  for (const Request& r : w.calibration)
    CHECK(novel.palette_of(r, 0) < usual);
  // Novel sub-topics prefer other experts: their logits differ from the usual ones of the same slot.
  auto u = novel.palette_logits(0), v = novel.palette_logits(usual);
  CHECK_FALSE(std::equal(u.begin(), u.end(), v.begin()));
}
