// EldrRouter and EldrModel (sim/routing/eldr/eldr_router.hpp, eldr_model.hpp): the locality band, its
// limits tau = 0 and tau = 1, the model file, the online refit, and a fit on generated routing; the
// refit policies (static never refits, periodic every interval, online = periodic, triggered on a shift).
#include "sim/common/input_error.hpp"
#include "sim/common/rng.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/prompt_profile.hpp"
#include "sim/routing/eldr/eldr_router.hpp"
#include "sim/routing/eldr/eldr_spec.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "sim/workload/workload_factory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

using namespace eldr;

namespace {

// A model with 4 workers whose centroids are the unit axes of a 1-layer, 4-expert space.
EldrModel axes_model()
{
  EldrModel m;
  m.model     = "toy";
  m.layers    = 1;
  m.experts   = 4;
  m.mask      = {0};
  m.idf       = IdfTable{1, 4, 10, {1, 1, 1, 1}};
  m.centroids = DenseMatrix(4, 4);
  for (int k = 0; k < 4; ++k)
    m.centroids.row(k)[size_t(k)] = 1.f;
  return m;
}

std::vector<float> unit(std::vector<float> v)
{
  double n = 0;
  for (float x : v)
    n += x * x;
  for (float& x : v)
    x = float(x / std::sqrt(n));
  return v;
}

EldrSpec spec(double tau, bool min_two = true)
{
  EldrSpec s = default_eldr_spec();
  s.tau      = tau;
  s.min_two  = min_two;
  s.refit    = "static";
  return s;
}

}  // namespace

TEST_CASE("eldr: tau = 0 is pure locality, whatever the load")
{
  EldrRouter r(axes_model(), spec(0));
  // Signature closest to worker 2 (cos .8 vs .6 to worker 0); worker 2 is the busiest.
  auto sig = unit({0.6f, 0, 0.8f, 0});
  CHECK(r.choose_signature(sig, std::vector<int>{0, 0, 50, 0}) == 2);
}

TEST_CASE("eldr: tau = 1 picks the least-loaded worker (lowest index on ties), like JSQ")
{
  EldrRouter r(axes_model(), spec(1));
  auto sig = unit({0.6f, 0, 0.8f, 0});
  CHECK(r.choose_signature(sig, std::vector<int>{3, 1, 5, 1}) == 1);
  CHECK(r.choose_signature(sig, std::vector<int>{0, 1, 5, 1}) == 0);
}

TEST_CASE("eldr: the band holds the workers within tau of the best, at least two when tau > 0")
{
  // cos to workers: 0 -> .6, 1 -> 0, 2 -> .8, 3 -> 0.
  auto sig = unit({0.6f, 0, 0.8f, 0});
  std::vector<int> load{1, 0, 9, 0};
  EldrRouter wide(axes_model(), spec(0.25));
  CHECK(wide.choose_signature(sig, load) == 0);  // band {2 (.8), 0 (.6)}: 0 is less loaded
  EldrRouter narrow(axes_model(), spec(0.1, false));
  CHECK(narrow.choose_signature(sig, load) == 2);  // band {2} only
  EldrRouter two(axes_model(), spec(0.1, true));
  CHECK(two.choose_signature(sig, load) == 0);  // the runner-up joins a band of one
}

TEST_CASE("eldr: a model file round-trips and bad files are named")
{
  namespace fs    = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "eldr-model-test").string();
  fs::create_directories(dir);
  EldrModel m = axes_model();
  {
    std::ofstream f(dir + "/m.json");
    f << eldr_model_json(m);
  }
  EldrModel back = read_eldr_model(dir + "/m.json");
  CHECK(back.mask == m.mask);
  CHECK(back.centroids.values == m.centroids.values);
  CHECK(back.idf.idf == m.idf.idf);
  {
    std::ofstream f(dir + "/bad.json");
    f << R"({"format": "eldr-router-model", "version": 1, "model": "toy", "layers": 1, "experts": 4,
             "variant": "counts_idf", "mask": [0], "idf": [1, 1, 1], "centroids": [[1, 0, 0, 0]]})";
  }
  try {
    read_eldr_model(dir + "/bad.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("bad.json: idf: must be a list of layers x experts numbers") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("eldr: fitted on generated routing, same-label requests share workers and signatures beat chance")
{
  Experiment x = load_experiment("configs/default.json", {{"workload.measured_requests", "400"},
                                                          {"workload.warmup_requests", "0"},
                                                          {"workload.calibration_requests", "600"},
                                                          {"eldr.mask_pairs", "5000"}});
  Workload w   = make_workload(x);
  auto routing = make_gating_source(x, w);
  EldrModel m  = fit_eldr_for(x, w, *routing);
  CHECK(m.centroids.rows == 16);
  CHECK(!m.mask.empty());
  CHECK(m.mask_spearman > 0.5);
  // Pure locality: each label's requests concentrate on few workers (16 workers, 4 labels).
  EldrRouter r(m, spec(0));
  auto gates = make_gate_source(*routing);
  std::vector<std::vector<int>> hits(w.labels.size(), std::vector<int>(16, 0));
  std::vector<int> idle(16, 0);
  for (int i = 0; i < 400; ++i) {
    const Request& q = w.requests[size_t(i)];
    Signature s      = m.signature(count_prompt(*routing, q, fields_for(m.variant), gates.get()));
    ++hits[q.label][size_t(r.choose_signature(s, idle))];
  }
  for (size_t c = 0; c < hits.size(); ++c) {
    std::vector<int> h = hits[c];
    std::sort(h.rbegin(), h.rend());
    int total = 0, top4 = h[0] + h[1] + h[2] + h[3];
    for (int v : h)
      total += v;
    CAPTURE(w.labels[c]);
    CHECK(top4 > 0.7 * total);  // uniform placement would give 25%
  }
}

TEST_CASE("eldr: the online refit keeps stable clusters on their workers")
{
  // Traffic that matches the centroids exactly: a refit must not move any profile to another worker.
  EldrSpec s         = spec(0);
  s.refit            = "online";
  s.refit_interval_s = 1;
  s.refit_window_s   = 5;
  EldrRouter r(axes_model(), s);
  std::vector<int> load(4, 0);
  double t = 0;
  for (int i = 0; i < 400; ++i, t += 0.02) {
    int k = i % 4;
    std::vector<float> v(4, 0.f);
    v[size_t(k)]           = 1.f;
    v[size_t((k + 1) % 4)] = 0.1f;
    PromptProfile p;
    p.layers  = 1;
    p.experts = 4;
    p.counts  = {uint16_t(v[0] * 10), uint16_t(v[1] * 10), uint16_t(v[2] * 10), uint16_t(v[3] * 10)};
    Request q;
    q.id = uint32_t(i);
    r.observe_prompt(q, p);
    CHECK(r.choose(q, DecodeLoadView{load, t}) == k);
  }
  auto stats = r.stats();
  CHECK(stats[0].first == "refits");
  CHECK(stats[0].second >= 6);
}

namespace {

// The decision as docs/design.md section 1 states it, on exact dot() similarities: the reference the
// router's bounded-estimate shortcut must reproduce.
std::pair<int, float> reference_choice(const DenseMatrix& c, std::span<const float> sig, std::span<const int> load,
                                       double tau, bool min_two)
{
  std::vector<float> s(size_t(c.rows));
  float best = -2;
  for (int w = 0; w < c.rows; ++w)
    best = std::max(best, s[size_t(w)] = dot(c.row(w), sig));
  const float floor = best - float(tau);
  int band          = 0;
  for (float v : s)
    band += v >= floor;
  float second = -2;
  if (tau > 0 && min_two && band < 2 && c.rows > 1)
    for (float v : s)
      if (v < best)
        second = std::max(second, v);
  int choice = -1;
  for (int w = 0; w < c.rows; ++w)
    if ((s[size_t(w)] >= floor || s[size_t(w)] == second) && (choice < 0 || load[size_t(w)] < load[size_t(choice)]))
      choice = w;
  return {choice, best};
}

}  // namespace

TEST_CASE("eldr: decisions and best similarity equal the exact reference, near ties and band edges included")
{
  Rng rng(11, "test.eldr.decision");
  auto gauss = [&] {
    return float(std::sqrt(-2 * std::log(1 - rng.uniform01())) * std::cos(6.283185307 * rng.uniform01()));
  };
  auto normalise = [](std::span<float> v) {
    double n = 0;
    for (float x : v)
      n += double(x) * x;
    for (float& x : v)
      x = n > 0 ? float(x / std::sqrt(n)) : 0.f;
  };
  int away = 0, exact_ties = 0;
  for (int round = 0; round < 60; ++round) {
    const int experts = round % 3 == 0 ? 128 : 40, layers = 1 + round % 9,
              k = std::vector<int>{1, 2, 5, 16, 20}[size_t(round % 5)];
    EldrModel m;
    m.layers  = layers;
    m.experts = experts;
    for (int l = 0; l < layers; ++l)
      m.mask.push_back(l);
    m.centroids = DenseMatrix(k, layers * experts);
    for (int w = 0; w < k; ++w) {
      auto row = m.centroids.row(w);
      if (w > 0 && rng.uniform01() < 0.4) {
        // A near or exact copy of the previous centroid: similarities within float rounding.
        auto prev        = m.centroids.row(w - 1);
        const double eps = rng.uniform01() < 0.3 ? 0 : std::pow(10.0, -3 - 4 * rng.uniform01());
        for (size_t i = 0; i < row.size(); ++i)
          row[i] = prev[i] + float(eps) * gauss();
      } else {
        for (float& v : row)
          v = std::abs(gauss()) * (rng.uniform01() < 0.7 ? 1.f : 0.f);
      }
      normalise(row);
    }
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> sig(size_t(m.dimension()));
      const double density = rng.uniform01();
      if (trial % 4 == 0) {
        // A mix of two centroids: similarities to them nearly equal.
        auto a = m.centroids.row(int(rng.below(uint64_t(k)))), b = m.centroids.row(int(rng.below(uint64_t(k))));
        for (size_t i = 0; i < sig.size(); ++i)
          sig[i] = a[i] + b[i] * float(1 + 1e-6 * gauss());
      } else {
        for (float& v : sig)
          v = rng.uniform01() < density ? std::abs(gauss()) : 0.f;
      }
      if (trial % 7 != 6)
        normalise(sig);  // and some signatures of any norm
      std::vector<int> load(static_cast<size_t>(k));
      for (int& l : load)
        l = int(rng.below(4));
      // tau values that put the band floor on, or within a few ulps of, another worker's similarity.
      std::vector<float> s(static_cast<size_t>(k));
      for (int w = 0; w < k; ++w)
        s[size_t(w)] = dot(m.centroids.row(w), sig);
      const float top   = *std::max_element(s.begin(), s.end());
      const float other = s[size_t(rng.below(uint64_t(k)))];
      for (double tau : {0.0, 0.1, 1.0, double(top - other), double(top - other) + 1e-7, double(top - other) - 1e-7,
                         double(top - other) + 3e-4}) {
        for (bool min_two : {false, true}) {
          EldrSpec sp = spec(tau, min_two);
          EldrRouter r(m, sp);
          const auto [want, best] = reference_choice(m.centroids, sig, load, tau, min_two);
          CAPTURE(round);
          CAPTURE(trial);
          CAPTURE(tau);
          REQUIRE(r.choose_signature(sig, load) == want);
          CHECK(r.stats()[2].second == double(best));
          exact_ties += std::count(s.begin(), s.end(), top) > 1;
          // The cases must exercise the band, not only the nearest worker.
          // (A negative tau, top - other - 1e-7 with other the top itself, leaves no band: -1 from both.)
          away += want >= 0 && s[size_t(want)] < top;
        }
      }
    }
  }
  MESSAGE(away << " decisions left the nearest worker, " << exact_ties << " with exact ties");
  CHECK(away > 1000);
  CHECK(exact_ties > 0);
}

namespace {

// Routes `n` requests at 50/s; request i's prompt leans on expert i % 4 (until `shift_at`), after it
// on the pair (i % 2, 2 + i % 2) evenly: signatures no centroid matches well.
EldrRouter route(const std::string& refit, int n, int shift_at = 1 << 30)
{
  EldrSpec s = default_eldr_spec();
  s.tau      = 0;
  s.refit    = refit;
  EldrRouter r(axes_model(), s);
  std::vector<int> load(4, 0);
  for (int i = 0; i < n; ++i) {
    PromptProfile p;
    p.layers  = 1;
    p.experts = 4;
    p.counts  = {1, 1, 1, 1};
    if (i < shift_at)
      p.counts[size_t(i % 4)] = 10;
    else
      p.counts[size_t(i % 2)] = p.counts[size_t(2 + i % 2)] = 10;
    Request q;
    q.id = uint32_t(i);
    r.observe_prompt(q, p);
    r.choose(q, DecodeLoadView{load, i * 0.02});
  }
  return r;
}

double stat(const EldrRouter& r, const std::string& key)
{
  for (const auto& [k, v] : r.stats())
    if (k == key)
      return v;
  FAIL("no stat " << key);
  return 0;
}

}  // namespace

TEST_CASE("refit policies: static never refits, periodic every interval, online is periodic")
{
  const int n = 1500;  // 30 s at 50/s
  CHECK(route("static", n, 700).refit_times().empty());
  CHECK(stat(route("static", n, 700), "refits") == 0);
  EldrRouter p  = route("periodic", n, 700);
  const auto& t = p.refit_times();
  // One refit each second from the first (t = 1 s) on: 29 or 30 (the decision grid is 20 ms).
  CHECK(t.size() >= 29);
  CHECK(t.size() <= 30);
  for (size_t i = 1; i < t.size(); ++i)
    CHECK(t[i] - t[i - 1] == doctest::Approx(1.0).epsilon(0.03));
  CHECK(route("online", n, 700).refit_times() == t);
  CHECK(stat(p, "refits") == double(t.size()));
  // The new policies add detector stats; static and online report what they always did.
  CHECK(route("online", 10).stats().size() == 3);
  CHECK(route("static", 10).stats().size() == 3);
}

TEST_CASE("refit policies: triggered refits after a shift, and not without one")
{
  EldrRouter quiet = route("triggered", 1500);
  CHECK(quiet.refit_times().empty());
  CHECK(stat(quiet, "drift_fires") == 0);
  EldrRouter shifted = route("triggered", 1500, 700);  // the shift at 14 s
  REQUIRE(!shifted.refit_times().empty());
  CHECK(shifted.refit_times().front() >= 14);
  CHECK(shifted.refit_times().front() < 24);
  // Each fire: a refit, then one each interval until the refit window has renewed (5 s): 5 or 6 in
  // all (the last falls on whichever decision comes first after the interval).
  const double fires = stat(shifted, "drift_fires");
  CHECK(fires >= 1);
  CHECK(double(shifted.refit_times().size()) >= 5 * fires);
  CHECK(double(shifted.refit_times().size()) <= 6 * fires);
}

TEST_CASE("eldr: the eldr composition (band filter, queue scorer, lowest-index picker) decides as EldrRouter")
{
  // Runs use the composition; EldrRouter::choose (the band, then the least loaded, ties to the lowest
  // index) is the other implementation of the same decision. One model fitted on generated routing,
  // the composition reading it from its file, static (no refit), both fed the same prompt profiles and
  // random loads: every decision must agree.
  const std::vector<Override> small = {{"workload.measured_requests", "300"},
                                       {"workload.warmup_requests", "0"},
                                       {"workload.calibration_requests", "300"},
                                       {"eldr.mask_pairs", "3000"},
                                       {"eldr.refit", "static"}};
  const Experiment base             = load_experiment("configs/default.json", small);
  const Workload w                  = make_workload(base);
  auto routing                      = make_gating_source(base, w);
  const EldrModel m                 = fit_eldr_for(base, w, *routing);
  namespace fs                      = std::filesystem;
  const std::string dir = (fs::temp_directory_path() / ("eldr-composition-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  std::ofstream(dir + "/model.json") << eldr_model_json(m);
  auto gates = make_gate_source(*routing);
  int away = 0, decisions = 0;
  for (const char* tau : {"0", "0.1", "0.3"})
    for (const char* min_two : {"true", "false"}) {
      CAPTURE(tau);
      CAPTURE(min_two);
      std::vector<Override> o = small;
      o.push_back({"eldr.tau", tau});
      o.push_back({"eldr.min_two_candidates", min_two});
      o.push_back({"eldr.model_file", dir + "/model.json"});
      const Experiment x = load_experiment("configs/default.json", o);
      const RouterSetup setup{16, x.seed, &w, routing.get(), &x};
      auto composed = make_decode_router("eldr", setup);
      EldrRouter direct(m, eldr_spec(x));
      Rng rng(9, "test.eldr.composition");
      std::vector<int> load(16);
      for (size_t i = 0; i < w.requests.size(); ++i) {
        const Request& q = w.requests[i];
        for (int& l : load)
          l = int(rng.below(6));
        const PromptProfile p =
            count_prompt(*routing, q, composed->prompt_fields(), gates.get(), composed->prompt_layers());
        composed->observe_prompt(q, p);
        direct.observe_prompt(q, p);
        const DecodeLoadView view{load, double(i) * 0.01};
        const int want = direct.choose(q, view);
        REQUIRE(composed->choose(q, view) == want);
        ++decisions;
        // How often the load moved the decision (the band's work; with tau 0, only exact ties).
        away += direct.choose_signature(m.signature(p), std::vector<int>(16, 0)) != want;
      }
    }
  fs::remove_all(dir);
  MESSAGE(decisions << " decisions agree, " << away << " of them moved by the load");
  CHECK(away > 100);
}
