// ELDR's drift detector (sim/routing/eldr/drift_detector.hpp): it fires on a shift and not on a stationary
// stream of the same length; bad values of the new eldr and output keys are one-line errors naming the
// file and key. The refit policies on the router are in eldr_router_test.cpp.
#include "input_error_util.hpp"
#include "sim/common/rng.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/eldr/drift_detector.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace eldr;

namespace {

// A synthetic stream of routed requests at `rate` per second for `duration_s`: nearest centroid drawn
// from `shares` (before `shift_s`) or `shares_after`, similarity ~ N(mean, 0.06) (mean drops by
// `sim_drop` after the shift). Returns the times the detector fired (it resets on each, as ELDR does).
std::vector<double> run_stream(uint64_t seed, double shift_s, std::vector<double> shares,
                               std::vector<double> shares_after, double sim_drop, double duration_s = 120,
                               double rate = 60)
{
  std::mt19937_64 g(seed);
  std::exponential_distribution<double> gap(rate);
  std::normal_distribution<double> noise(0, 0.06);
  DriftDetector d(int(shares.size()), DriftDetectorOptions{});
  std::vector<double> fired;
  for (double t = gap(g); t < duration_s; t += gap(g)) {
    const bool after = t >= shift_s;
    auto& sh         = after ? shares_after : shares;
    std::discrete_distribution<int> pick(sh.begin(), sh.end());
    const int k = pick(g);
    double s    = 0.8 - (after ? sim_drop : 0) + noise(g);
    if (d.observe(t, k, std::min(1.0, s))) {
      fired.push_back(t);
      d.reset(t);
    }
  }
  return fired;
}

const std::vector<double> kUniform(16, 1.0);

std::vector<double> heavy(int k, double share)
{
  std::vector<double> v(16, (1 - share) / 15);
  v[size_t(k)] = share;
  return v;
}

}  // namespace

TEST_CASE("drift detector: statistics by hand")
{
  // Same shares: PSI 0. Shares moved: PSI / its stationary expectation, computed here by hand.
  CHECK(psi_ratio({10, 10, 10, 10}, {10, 10, 10, 10}) == doctest::Approx(0));
  const double q[] = {10.5 / 42, 10.5 / 42, 10.5 / 42, 10.5 / 42};
  const double p[] = {30.5 / 42, 0.5 / 42, 5.5 / 42, 5.5 / 42};
  double psi       = 0;
  for (int i = 0; i < 4; ++i)
    psi += (p[i] - q[i]) * std::log(p[i] / q[i]);
  CHECK(psi_ratio({10, 10, 10, 10}, {30, 0, 5, 5}) == doctest::Approx(psi / (3 * (1.0 / 40 + 1.0 / 40))));
  // z of a mean drop of 0.02 with sd 0.1 and 100 samples each: -0.02 / (0.1 * sqrt(0.02)).
  CHECK(similarity_drop_z(100, 0.8, 0.1, 100, 0.78) == doctest::Approx(-0.02 / (0.1 * std::sqrt(0.02))));
}

TEST_CASE("drift detector: silent on stationary streams, fires on a similarity drop and on a mix shift")
{
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    CAPTURE(seed);
    // Stationary, 120 s at 60/s (the drift configs' length and rate): never fires.
    CHECK(run_stream(seed, 1e9, kUniform, kUniform, 0).empty());
    // New sub-topics: similarity to the nearest centroid drops by 0.05 (under one sd of a request)
    // at 60 s: fires within two windows of the shift (the monitoring window must fill with new traffic).
    auto f = run_stream(seed, 60, kUniform, kUniform, 0.05);
    REQUIRE(!f.empty());
    CHECK(f.front() >= 60);
    CHECK(f.front() < 70);
    // A burst: cluster 3 takes 40% of the traffic at 60 s, similarities unchanged: PSI fires.
    auto b = run_stream(seed, 60, kUniform, heavy(3, 0.4), 0);
    REQUIRE(!b.empty());
    CHECK(b.front() >= 60);
    CHECK(b.front() < 70);
  }
}

TEST_CASE("drift detector: no decision before the reference and one monitoring window (the cooldown)")
{
  DriftDetector d(4, DriftDetectorOptions{});
  // A huge change right away: nothing fires before 2 x window_s after the reset.
  int i = 0;
  for (double t = 0; t < 10; t += 0.01, ++i)
    CHECK_FALSE(d.observe(t, t < 5 ? i % 4 : 0, t < 5 ? 0.9 : 0.1));
  CHECK(d.observe(10.0, 0, 0.1));
}

TEST_CASE("refit policies: bad eldr keys are one-line errors naming the file and key")
{
  using test::contains;
  using test::input_error_of;
  auto e = input_error_of([] { load_experiment("configs/default.json", {{"eldr.refit", "\"sometimes\""}}); });
  CHECK(contains(e, "configs/default.json"));
  CHECK(contains(e, "eldr.refit"));
  CHECK(e.find('\n') == std::string::npos);
  for (const char* key : {"eldr.drift_window_s", "eldr.drift_similarity_z", "eldr.drift_psi_ratio"}) {
    CAPTURE(key);
    auto m = input_error_of([&] { load_experiment("configs/default.json", {{key, "-1"}}); });
    CHECK(contains(m, key));
    CHECK(e.find('\n') == std::string::npos);
  }
  auto o = input_error_of([] { load_experiment("configs/default.json", {{"output.decision_log", "\"yes\""}}); });
  CHECK(contains(o, "output.decision_log"));
  CHECK_NOTHROW(load_experiment("configs/default.json", {{"eldr.refit", "\"triggered\""}}));
  CHECK_NOTHROW(load_experiment("configs/default.json", {{"eldr.refit", "\"periodic\""}}));
}
