// The decision log (output.decision_log, decisions.csv): one row per routed request, its choice equal to
// requests.csv's decode_worker, the loads the router saw; for ELDR the chosen worker is in the logged
// band and the least loaded of its candidates (lowest index on ties). Also the TPOT windows and the
// recovery after a shift (result_writer.hpp).
#include "sim/metrics/result_writer.hpp"
#include "sim/routing/eldr/eldr_spec.hpp"
#include "sim_fixture.hpp"

#include <algorithm>
#include <sstream>

using namespace eldr;
using namespace eldr::test;

namespace {

void check_common(const SmallRun& s)
{
  const auto& d = s.r().decisions;
  REQUIRE(d.size() == s.w.requests.size());
  std::vector<int> seen(s.w.requests.size(), 0);
  for (const DecisionRecord& row : d) {
    ++seen[row.id];
    CHECK(row.chosen == s.r().requests()[row.id].decode_worker);
    CHECK(row.time_s == s.r().requests()[row.id].kv_start_s);
    CHECK(int(row.in_flight.size()) == s.x.topology.decode.instances);
    // The loads the router saw: the requests routed before it and not finished yet.
    CHECK(row.in_flight == loads_before(s, s.w.requests[row.id]));
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  // The CSV: a header and a row per decision, the choice in column 4.
  std::istringstream csv(decisions_csv(s.w, s.r()));
  std::string line;
  std::getline(csv, line);
  CHECK(line.rfind("id,label,time_s,chosen,in_flight", 0) == 0);
  size_t rows = 0;
  while (std::getline(csv, line)) {
    std::istringstream f(line);
    std::string id, label, t, chosen;
    std::getline(f, id, ',');
    std::getline(f, label, ',');
    std::getline(f, t, ',');
    std::getline(f, chosen, ',');
    CHECK(std::stoi(chosen) == s.r().requests()[size_t(std::stoul(id))].decode_worker);
    ++rows;
  }
  CHECK(rows == d.size());
}

}  // namespace

TEST_CASE("decision log: ELDR rows explain the choice")
{
  SmallRun s = run_small({{"router", "\"eldr\""}, {"output.decision_log", "true"}});
  check_common(s);
  for (const DecisionRecord& row : s.r().decisions) {
    CAPTURE(row.id);
    REQUIRE(int(row.sims.size()) == s.x.topology.decode.instances);
    CHECK(*std::max_element(row.sims.begin(), row.sims.end()) == row.best);
    CHECK(row.floor == doctest::Approx(row.best - eldr_spec(s.x).tau));
    REQUIRE(!row.candidates.empty());
    CHECK(std::find(row.candidates.begin(), row.candidates.end(), row.chosen) != row.candidates.end());
    for (int c : row.candidates) {
      // Band members reach the floor; at most one runner-up below it (min_two).
      const int load_c = row.in_flight[size_t(c)], load_w = row.in_flight[size_t(row.chosen)];
      CHECK((load_w < load_c || (load_w == load_c && row.chosen <= c)));
    }
    long below = std::count_if(row.candidates.begin(), row.candidates.end(),
                               [&](int c) { return row.sims[size_t(c)] < row.floor; });
    CHECK(below <= 1);
  }
}

TEST_CASE("decision log: other routers log the loads they saw, off by default")
{
  SmallRun s = run_small({{"router", "\"jsq\""}, {"output.decision_log", "true"}});
  check_common(s);
  for (const DecisionRecord& row : s.r().decisions) {
    CHECK(row.sims.empty());
    CHECK(row.candidates.empty());
    // JSQ: the chosen worker had the fewest in flight.
    CHECK(row.in_flight[size_t(row.chosen)] == *std::min_element(row.in_flight.begin(), row.in_flight.end()));
  }
}

TEST_CASE("decision log: nothing recorded without the option")
{
  SmallRun s = run_small({{"router", "\"eldr\""}});
  CHECK(s.r().decisions.empty());
  CHECK_FALSE(s.r().decision_detail.valid);
}

TEST_CASE("tpot windows and the recovery after a shift")
{
  SmallRun s = run_small({{"router", "\"round_robin\""}});
  auto win   = tpot_windows(s.w, s.r(), 1.0);
  long total = 0;
  for (const TpotWindow& v : win)
    total += v.requests;
  CHECK(total == 300);
  // Recovery by hand on made-up windows: pre-shift P50 20 ms (window 20-30), shift at 30 s, 24 ms and
  // 21.5 ms (> 5% above), then 20.9 and 20.5 (within): recovered 20 s after the shift, peak 24.
  Experiment x            = s.x;
  x.workload.mix_schedule = {{0, {}}, {30, {}}};
  std::vector<TpotWindow> w;
  for (double p50 : {19.0, 19.5, 20.0, 24.0, 21.5, 20.9, 20.5})
    w.push_back({double(w.size()) * 10, double(w.size() + 1) * 10, 100, p50, p50 + 1, 0});
  auto r = shift_recoveries(x, w);
  REQUIRE(r.size() == 1);
  CHECK(r[0].at_s == 30);
  CHECK(r[0].pre_p50_ms == 20.0);
  CHECK(r[0].peak_p50_ms == 24.0);
  CHECK(r[0].recovery_s == 20.0);
  // Never back within 5% before the end: NaN.
  w.back().p50_ms = 22;
  CHECK(std::isnan(shift_recoveries(x, w)[0].recovery_s));
  // Windows after the last arrival (draining) do not count: back within 5% only in 60-70, which
  // counts when arrivals last until 70 s and not when they stop at 65 s.
  w[5].p50_ms     = 22;
  w.back().p50_ms = 20.5;
  CHECK(std::isnan(shift_recoveries(x, w, 65)[0].recovery_s));
  CHECK(shift_recoveries(x, w, 70)[0].recovery_s == 30.0);
}
