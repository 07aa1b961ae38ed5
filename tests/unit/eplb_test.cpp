// Expert-parallel load balancing (sim/cost/eplb.hpp): DeepSeek's published example (github.com/deepseek-ai/EPLB,
// README at commit d52c72d) must give its printed placement exactly, and a small global case by hand.
#include "sim/common/fast_mod.hpp"
#include "sim/common/rng.hpp"
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
}

namespace {

// Adds `n` tokens picking exactly `experts` (one layer, four experts) to planned step 0, owner rank 0.
void add_tokens(EplbInstance& s, std::vector<uint32_t>& acc, std::initializer_list<int> experts, int n, uint64_t& key)
{
  uint64_t mask = 0;
  for (int e : experts)
    mask |= uint64_t(1) << e;
  for (int i = 0; i < n; ++i)
    s.add_token(0, std::span<const uint64_t>(&mask, 1), 1, key++, 0, acc.data());
}

EplbSpec small_spec(int window, int interval)
{
  EplbSpec spec;
  spec.enabled       = true;
  spec.redundant     = 2;
  spec.window_size   = window;
  spec.step_interval = interval;
  return spec;
}

}  // namespace

TEST_CASE("eplb instance: picks on the replicas, a rearrangement and the weights it moves, by hand")
{
  // One layer of 4 experts, 2 ranks, 2 redundant: vLLM's initial slots 0 1 2 | 3 0 1.
  EplbCounters totals;
  EplbInstance s(small_spec(2, 4), 1, 4, 2, 1, totals);
  CHECK(s.plan().phy2log == std::vector<int>{0, 1, 2, 3, 0, 1});
  CHECK(s.steps_until_rearrangement() == 1);  // the counter starts at 4 - 4 / 4 = 3
  std::vector<uint32_t> acc(2 + 4, 0);        // [rank picks][owner][rank tokens]
  uint64_t key = 0;
  s.clear(0);
  add_tokens(s, acc, {2, 3}, 1, key);  // expert 2 on rank 0 (slot 2), expert 3 on rank 1 (slot 3)
  CHECK(acc == std::vector<uint32_t>{1, 1, 0, 1, 0, 0});
  std::vector<uint16_t> distinct(2);
  s.rank_distinct(0, distinct);
  CHECK(distinct == std::vector<uint16_t>{1, 1});
  // Loads 6 3 2 1 in all (the global hand case above): the new slots are 1 0 3 | 0 2 0.
  add_tokens(s, acc, {0, 1, 2}, 1, key);
  add_tokens(s, acc, {0, 1}, 2, key);
  add_tokens(s, acc, {0}, 3, key);
  CHECK(acc[0] + acc[1] == 12);
  CHECK(s.commit(0, acc));  // the rearrangement is due after this step
  CHECK(totals.steps[0] == 1);
  CHECK(totals.max_picks[0] == std::max(acc[0], acc[1]));
  CHECK(totals.mean_picks[0] == 6);
  // Rank 0 gets expert 3 from rank 1, rank 1 expert 2 from rank 0; the copies of 0 and 1 stay local.
  const std::vector<double> bytes = s.start_rearrangement(10.0);
  CHECK(bytes == std::vector<double>{0, 10, 10, 0});
  CHECK(totals.experts_moved == 2);
  CHECK(totals.bytes_moved == 20);
  CHECK(totals.rearrangements == 1);
  CHECK(s.transfer_pending());
  CHECK(s.plan().phy2log == std::vector<int>{0, 1, 2, 3, 0, 1});  // the old placement serves until the end
  s.finish_rearrangement();
  CHECK(s.plan().phy2log == std::vector<int>{1, 0, 3, 0, 2, 0});
  CHECK(s.steps_until_rearrangement() == 4);
  // Expert 0's three replicas sit on both ranks: its picks spread over them.
  std::fill(acc.begin(), acc.end(), 0);
  s.clear(0);
  add_tokens(s, acc, {0}, 900, key);
  CHECK(acc[0] > 200);  // slot 1 on rank 0: a third in expectation
  CHECK(acc[1] > 500);  // slots 3 and 5 on rank 1
  CHECK(acc[0] + acc[1] == 900);
  s.rank_distinct(0, distinct);
  CHECK(distinct == std::vector<uint16_t>{1, 2});
  CHECK_FALSE(s.commit(0, acc));
  CHECK(totals.steps[1] == 1);
  CHECK(totals.max_picks[1] == std::max(acc[0], acc[1]));
}

// One step of `n` tokens picking `expert` alone; `due`: the rearrangement it must trigger, run at once.
static void one_step(EplbInstance& s, std::vector<uint32_t>& acc, uint64_t& key, int expert, int n, bool due)
{
  s.clear(0);
  add_tokens(s, acc, {expert}, n, key);
  CHECK(s.commit(0, acc) == due);
  if (due) {
    s.start_rearrangement(1.0);
    s.finish_rearrangement();
  }
}

TEST_CASE("eplb instance: only the last window_size steps before a rearrangement count")
{
  EplbCounters totals;
  EplbInstance s(small_spec(2, 4), 1, 4, 2, 1, totals);
  std::vector<uint32_t> acc(6, 0);
  uint64_t key = 0;
  one_step(s, acc, key, 0, 0, true);  // the first, early rearrangement, with no load yet
  // Steps 1 and 2 load expert 3, outside the window of 2; steps 3 and 4 load expert 0 only.
  for (int step = 1; step <= 4; ++step)
    one_step(s, acc, key, step <= 2 ? 3 : 0, 5, step == 4);
  CHECK(s.plan().count == std::vector<int>{3, 1, 1, 1});  // both redundant slots to expert 0
}

TEST_CASE("eplb instance: a window longer than the interval keeps earlier steps")
{
  EplbCounters totals;
  EplbInstance s(small_spec(8, 4), 1, 4, 2, 1, totals);
  std::vector<uint32_t> acc(6, 0);
  uint64_t key = 0;
  one_step(s, acc, key, 3, 40, true);  // step 1, in the window of the next two rearrangements
  for (int step = 2; step <= 5; ++step)
    one_step(s, acc, key, 0, 5, step == 5);
  // Loads 20 0 0 40 over steps 1-5: slot 4 to expert 3 (share 40), slot 5 to expert 0 (shares 20 and 20:
  // the first of equal maxima).
  CHECK(s.plan().count == std::vector<int>{2, 1, 1, 2});
}

TEST_CASE("fast_mod: x mod n without a division, against the % operator")
{
  // Edges of the 64-bit range and a pseudo-random sample, for the replica counts EPLB sees and beyond.
  std::vector<uint64_t> xs = {0,
                              1,
                              2,
                              3,
                              63,
                              64,
                              65,
                              ~uint64_t(0),
                              ~uint64_t(0) - 1,
                              uint64_t(1) << 63,
                              (uint64_t(1) << 63) - 1,
                              uint64_t(1) << 32,
                              (uint64_t(1) << 32) - 1};
  uint64_t s               = 12345;
  for (int i = 0; i < 20000; ++i)
    xs.push_back(s = splitmix64(s));
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 6ull, 7ull, 8ull, 9ull, 31ull, 1000ull, (1ull << 32) + 15, ~0ull}) {
    const auto c = fast_mod_constant(n);
    for (uint64_t x : xs)
      if (fast_mod(x, c, n) != x % n)
        FAIL("fast_mod(" << x << ", " << n << ") = " << fast_mod(x, c, n) << ", % gives " << x % n);
  }
}
