#pragma once
// Expert-parallel load balancing (EPLB, docs/eplb.md): redundant copies of heavily used experts and
// their packing onto the ranks of an expert-parallel instance, recomputed from observed loads.
//
// The algorithm is DeepSeek's published one (github.com/deepseek-ai/EPLB, eplb.py at commit d52c72d),
// which vLLM runs as its default policy (vllm-project/vllm, vllm/distributed/eplb/rebalance_algo.py):
//   replicate_experts   give each redundant slot to the expert with the largest load per replica;
//   balanced_packing    items heaviest first, each to the lightest pack that has room (equal counts);
//   hierarchical        pack expert groups onto nodes, replicate within each node, pack the node's
//                       replicas onto its GPUs; used when the groups divide over the nodes;
//   global              the same with one group and one node (replicate globally, pack onto GPUs).
// Loads are float32 and ties go as in the reference (a stable descending sort, the first of equal
// minima and maxima), so the placements are the reference's, bit for bit.
//
// Plain C++ (no SimGrid).
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

enum class EplbPolicy : uint8_t { automatic, hierarchical, global };

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

// "default" (vLLM's name for the automatic choice), "hierarchical", "global".
bool parse_eplb_policy(const std::string& name, EplbPolicy& out);

}  // namespace eldr
