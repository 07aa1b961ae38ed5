// Multi-GPU decode instances end to end (configs/tpep.json, docs/model.md section 3b): Qwen3-235B-A22B
// on 2P8D of 4-GPU instances. One engine per TEST_CASE.
#include "sim/metrics/result_writer.hpp"
#include "sim_fixture.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace eldr;
using namespace eldr::test;

namespace {

SmallRun run_tpep(const std::vector<Override>& extra)
{
  std::vector<Override> o{{"workload.rate_rps", "20"}, {"workload.warmup_rate_rps", "20"}};
  o.insert(o.end(), extra.begin(), extra.end());
  return run_small(o, "configs/tpep.json");
}

void check_ep_steps(const SmallRun& s)
{
  long bad = 0;
  for (const StepRecord& st : s.r().steps())
    bad += !(st.rank_imbalance >= 1 - 1e-6 && st.rank_imbalance <= 4 + 1e-6 && st.all_to_all_s > 0 &&
             st.all_to_all_s < st.duration_s);
  CHECK(bad == 0);
  CHECK(s.r().decode_expert_parallel == 4);
}

}  // namespace

TEST_CASE("tpep: TP4 + EP4 decode instances with contiguous placement - invariants hold, per-step EP metrics")
{
  SmallRun s = run_tpep({{"router", "round_robin"}});
  check_invariants(s);
  check_ep_steps(s);
  const RunSummary sum = summarize_run(s.x, s.w, s.r());
  CHECK(sum.rank_imbalance_mean > 1);
  CHECK(sum.all_to_all_ms_mean > 0);
  CHECK(s.r().placement_calibration_requests.empty());
  // KV memory of a 4-GPU instance: 4 x 192 GB x 0.9 - the weights.
  CHECK(s.r().decode_workers()[0].kv_capacity_bytes ==
        doctest::Approx(4 * s.x.hardware.hbm_bytes * 0.9 - s.x.model.weight_bytes()));
}

TEST_CASE("tpep: cluster_balanced placement under ELDR homes every calibration request on one instance")
{
  SmallRun s = run_tpep({{"router", "eldr"},
                         {"topology.decode.placement", "cluster_balanced"},
                         {"workload.calibration_requests", "200"}});
  check_invariants(s);
  check_ep_steps(s);
  const auto& homed = s.r().placement_calibration_requests;
  REQUIRE(homed.size() == 8);
  CHECK(std::accumulate(homed.begin(), homed.end(), 0L) <= 200);
  CHECK(std::accumulate(homed.begin(), homed.end(), 0L) > 150);
}
