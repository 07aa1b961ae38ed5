// Expert-parallel load balancing (sim/cost/eplb.hpp): DeepSeek's published example (github.com/deepseek-ai/EPLB,
// README at commit d52c72d) must give its printed placement exactly, and a small global case by hand.
#include "sim/cost/eplb.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using namespace eldr;

TEST_CASE("eplb: DeepSeek's README example (12 experts, 2 layers, 16 replicas, 4 groups, 2 nodes, 8 GPUs)")
{
  const std::vector<float> weight = {90, 132, 40,  61, 104, 165, 39,  4,   73,  56, 183, 86,   // layer 0
                                     20, 107, 104, 64, 19,  197, 187, 157, 172, 86, 16,  27};  // layer 1
  const EplbPlan plan             = rebalance_experts(weight, 2, 12, 16, 4, 2, 8);
  // The README's printed phy2log.
  const std::vector<int> expected = {5, 6,  5, 7, 8, 4,  3, 4, 10, 9, 10, 2, 0, 1, 11, 1,
                                     7, 10, 6, 8, 6, 11, 8, 9, 2,  4, 5,  1, 5, 0, 3,  1};
  CHECK(plan.phy2log == expected);
  // Replica counts follow: layer 0 replicates experts 1, 4, 5 and 10; layer 1 experts 1, 5, 6 and 8.
  CHECK(plan.count == std::vector<int>{1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1, 1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1});
  // Every slot's (expert, replica) pair is found back by slot_of.
  for (int l = 0; l < 2; ++l)
    for (int p = 0; p < 16; ++p)
      CHECK(plan.slot_of(l, plan.logical_of(l, p), plan.replica[size_t(l * 16 + p)]) == p);
  // The automatic choice is hierarchical here (4 groups over 2 nodes); forcing it gives the same.
  CHECK(rebalance_experts(weight, 2, 12, 16, 4, 2, 8, EplbPolicy::hierarchical).phy2log == expected);
}

TEST_CASE("eplb: a global case by hand (4 experts 6 3 2 1, 6 slots, 2 GPUs)")
{
  // Replication: slot 4 to expert 0 (share 6), slot 5 to expert 0 again (shares 3 3 2 1: the first of the
  // equal maxima). Packing the replicas' loads 2 3 2 1 2 2 into two GPUs of three, heaviest first, each to
  // the first lightest GPU with room: 3 -> GPU 0, then the 2s (stable order: slots 0 2 4 5) to GPU 1, 1,
  // 0, 1, and the 1 to GPU 0: loads 6 and 6.
  const Replication r = replicate_experts(std::vector<float>{6, 3, 2, 1}, 6);
  CHECK(r.phy2log == std::vector<int>{0, 1, 2, 3, 0, 0});
  CHECK(r.replica == std::vector<int>{0, 0, 0, 0, 1, 2});
  CHECK(r.count == std::vector<int>{3, 1, 1, 1});
  const Packing p = balanced_packing(std::vector<float>{2, 3, 2, 1, 2, 2}, 2);
  CHECK(p.pack == std::vector<int>{1, 0, 1, 0, 0, 1});
  CHECK(p.rank_in_pack == std::vector<int>{0, 0, 1, 2, 1, 2});
  for (EplbPolicy policy : {EplbPolicy::automatic, EplbPolicy::global}) {
    const EplbPlan plan = rebalance_experts(std::vector<float>{6, 3, 2, 1}, 1, 4, 6, 1, 1, 2, policy);
    // GPU 0 holds slots 0-2: expert 1, a copy of 0, expert 3; GPU 1 expert 0, expert 2, a copy of 0.
    CHECK(plan.phy2log == std::vector<int>{1, 0, 3, 0, 2, 0});
    CHECK(plan.replica == std::vector<int>{0, 1, 0, 0, 0, 2});
    CHECK(plan.count == std::vector<int>{3, 1, 1, 1});
  }
}

TEST_CASE("eplb: one item per pack keeps the order, and vLLM's initial placement")
{
  const Packing p = balanced_packing(std::vector<float>{1, 5, 3}, 3);
  CHECK(p.pack == std::vector<int>{0, 1, 2});
  CHECK(p.rank_in_pack == std::vector<int>{0, 0, 0});
  // Redundant slot i holds expert i mod E.
  const EplbPlan init = initial_eplb_plan(2, 4, 6);
  CHECK(init.phy2log == std::vector<int>{0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 0, 1});
  CHECK(init.replica == std::vector<int>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1});
  CHECK(init.count == std::vector<int>{2, 2, 1, 1, 2, 2, 1, 1});
}

TEST_CASE("eplb: shapes the reference rejects")
{
  const std::vector<float> w(12, 1.0f);
  CHECK_THROWS_AS(rebalance_experts(w, 1, 12, 14, 1, 1, 4), std::invalid_argument);  // 14 slots over 4 GPUs
  CHECK_THROWS_AS(rebalance_experts(w, 1, 12, 8, 1, 1, 4), std::invalid_argument);   // fewer slots than experts
  CHECK_THROWS_AS(rebalance_experts(w, 1, 12, 16, 3, 2, 8, EplbPolicy::hierarchical), std::invalid_argument);
  // automatic with 3 groups on 2 nodes falls back to global
  CHECK(rebalance_experts(w, 1, 12, 16, 3, 2, 8).count.size() == 12);
  EplbPolicy policy;
  CHECK(parse_eplb_policy("global", policy));
  CHECK(policy == EplbPolicy::global);
  CHECK_FALSE(parse_eplb_policy("greedy", policy));
}
