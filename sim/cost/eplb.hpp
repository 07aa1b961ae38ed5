#pragma once
// Expert-parallel load balancing (EPLB, docs/eplb.md): redundant copies of heavily used experts and
// their packing onto the ranks of an expert-parallel instance, recomputed from observed loads.
//
// The algorithm is DeepSeek's published one (github.com/deepseek-ai/EPLB, eplb.py at commit d52c72d),
// which vLLM runs as its default policy (vllm-project/vllm, vllm/distributed/eplb/rebalance_algo.py at
// 07fb932a, the same steps but for ties: numpy's unstable argsort and double pack sums):
//   replicate_experts   give each redundant slot to the expert with the largest load per replica;
//   balanced_packing    items heaviest first, each to the lightest pack that has room (equal counts);
//   hierarchical        pack expert groups onto nodes, replicate within each node, pack the node's
//                       replicas onto its GPUs; used when the groups divide over the nodes;
//   global              the same with one group and one node (replicate globally, pack onto GPUs).
// Loads are float32 and ties go as in the reference (a stable descending sort, the first of equal
// minima and maxima), so the placements are the reference's, bit for bit.
//
// Plain C++ (no SimGrid).
#include "sim/config/experiment.hpp"
#include "sim/metrics/run_recorder.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace eldr {

// One layer's packing: the pack of each item and its place within the pack.
struct Packing {
  std::vector<int> pack;
  std::vector<int> rank_in_pack;
};
// n = weight.size() items into `packs` packs of n / packs items each (n divisible by packs).
Packing balanced_packing(std::span<const float> weight, int packs);

// One layer's replication of weight.size() logical experts into `physical` slots: the logical expert
// of each slot (the first weight.size() are the experts themselves), the replica index of each slot,
// and each expert's replica count.
struct Replication {
  std::vector<int> phy2log;
  std::vector<int> replica;
  std::vector<int> count;
};
Replication replicate_experts(std::span<const float> weight, int physical);

// A placement of `physical` experts per layer: slot p of a layer sits on GPU p / (physical / gpus).
struct EplbPlan {
  int layers   = 0;
  int logical  = 0;
  int physical = 0;
  std::vector<int> phy2log;  // [layer][physical]
  std::vector<int> replica;  // [layer][physical]: which replica of its logical expert the slot is
  std::vector<int> count;    // [layer][logical]: replicas of each logical expert
  int logical_of(int layer, int slot) const { return phy2log[size_t(layer) * size_t(physical) + size_t(slot)]; }
  int replicas(int layer, int expert) const { return count[size_t(layer) * size_t(logical) + size_t(expert)]; }
  // The slot holding replica r of `expert` (the reference's logical_to_physical_map), -1 if none.
  int slot_of(int layer, int expert, int r) const;
};

// DeepSeek's rebalance_experts: weight is [layers][logical]; `physical` a multiple of `gpus`, `gpus` of
// `nodes`. automatic: hierarchical when groups % nodes == 0, else global. Throws std::invalid_argument
// on shapes the reference asserts against.
EplbPlan rebalance_experts(std::span<const float> weight, int layers, int logical, int physical, int groups, int nodes,
                           int gpus, EplbPolicy policy = EplbPolicy::automatic);

// vLLM's placement before the first rearrangement (EplbState.build_initial_global_physical_to_logical_map):
// experts 0..E-1 in order, then redundant slot i holds expert i mod E; the same on every layer.
EplbPlan initial_eplb_plan(int layers, int logical, int physical);

// One decode instance's EPLB state (vLLM's EplbState, vllm/distributed/eplb/eplb_state.py at 0014ec6c):
// the placement in force, the loads of the last window_size steps, the step counter (the first
// rearrangement after step_interval / 4 steps, then every step_interval), and, per planned step (a
// ring of `slots` like the decode worker's), each token's picks on the replicas it is sent to.
class EplbInstance {
 public:
  // Rearrangements, moves and balance are added to `totals`.
  EplbInstance(const EplbSpec& spec, int layers, int experts, int ranks, int slots, EplbCounters& totals);

  const EplbPlan& plan() const { return plan_; }
  int ranks() const { return ranks_; }
  // Steps that may run before a rearrangement is due (at least 1).
  long steps_until_rearrangement() const { return std::max<long>(1, spec_.step_interval - counter_); }
  bool transfer_pending() const { return pending_.layers > 0; }

  // Planned step `slot`: empties its counts.
  void clear(size_t slot);
  // One token of planned step `slot`: mask is its experts [layer][word]; its picks go to the
  // replicas vLLM's rule picks (the pick's running index modulo the expert's replica count; `key`
  // stands for the index, the same for a token however the worker splits its planning). Adds to
  // acc [layer][R + R * R]: picks per rank, then tokens the owner rank dispatches to each rank.
  void add_token(size_t slot, std::span<const uint64_t> mask, int words_per_layer, uint64_t key, int owner,
                 uint32_t* acc);
  // Distinct active replicas of each rank at planned step `slot`, [layer][rank].
  void rank_distinct(size_t slot, std::span<uint16_t> out) const;
  // A step ran: its loads enter the window and its balance the totals (picks: [layer][R + R * R]).
  // True when a rearrangement is due after it.
  bool commit(size_t slot, std::span<const uint32_t> acc);
  // Computes the next placement from the window (it takes effect at finish_rearrangement); returns
  // the bytes each rank sends each other rank, [from][to], for experts of `expert_bytes` bytes: a slot
  // whose expert changes is filled from a rank that held it (a copy within the rank costs nothing).
  std::vector<double> start_rearrangement(double expert_bytes);
  void finish_rearrangement();

 private:
  EplbSpec spec_;
  EplbCounters& totals_;
  bool rearranged_ = false;                          // a new placement has taken effect
  int layers_, experts_, ranks_, physical_, words_;  // words: of a [layer] mask of physical slots
  EplbPlan plan_, pending_;
  std::vector<int> log2phy_;  // [layer][expert][replica] slots of plan_, max_replicas_ per expert
  int max_replicas_ = 1;
  // add_token works a word at a time on experts with one replica (most of them): their slots are
  // fixed, so a token's picks per rank are popcounts. [layer][rank][word] of logical experts: the
  // single-replica ones on each rank; [layer][word]: those with several replicas, picked one by one.
  int logical_words_ = 0;
  std::vector<uint64_t> single_on_rank_;
  std::vector<uint64_t> replicated_;
  std::vector<uint16_t> rank_of_;  // [physical slot]
  // The slots of replicated experts packed: expert (l, e)'s from replica_start_[l * E + e], in replica order.
  std::vector<uint32_t> replica_start_;
  std::vector<uint16_t> replica_slots_;
  // Per replica count n, the constant of an exact x mod n without a division.
  std::vector<unsigned __int128> mod_constant_;
  long counter_ = 0;                     // vLLM's expert_rearrangement_step
  std::vector<uint32_t> counts_;         // [slot][layer][expert] picks of each planned step
  std::vector<uint64_t> active_;         // [slot][layer][word] physical slots of replicated experts with picks
  std::vector<uint64_t> active_single_;  // [slot][layer][logical word] single-replica experts with picks
  std::vector<uint16_t> distinct_;       // [slot][layer][rank] of replicated experts
  std::vector<uint64_t> window_sum_;     // [layer][expert] over the window
  std::vector<uint32_t> ring_;           // window_size > step_interval: the window's steps, [step][layer][expert]
  long recorded_ = 0;
  void index_plan();
};

}  // namespace eldr
