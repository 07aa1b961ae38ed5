#include "sim/cost/eplb.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace eldr {

namespace {

void require(bool ok, const std::string& what)
{
  if (!ok)
    throw std::invalid_argument("eplb: " + what);
}

std::vector<int> inverse(const std::vector<int>& perm)
{
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[size_t(perm[i])] = int(i);
  return inv;
}

EplbPlan empty_plan(int layers, int logical, int physical)
{
  EplbPlan plan;
  plan.layers   = layers;
  plan.logical  = logical;
  plan.physical = physical;
  plan.phy2log.assign(size_t(layers) * size_t(physical), 0);
  plan.replica.assign(plan.phy2log.size(), 0);
  plan.count.assign(size_t(layers) * size_t(logical), 0);
  return plan;
}

// One layer of rebalance_experts_hierarchical (eplb.py): slots [physical] with their logical expert and
// replica index, and the logical experts' replica counts.
void hierarchical_layer(std::span<const float> w, int physical, int groups, int nodes, int gpus, int* phy2log,
                        int* replica, int* count)
{
  const int logical = int(w.size()), group_size = logical / groups, groups_per_node = groups / nodes;
  const int per_gpu = physical / gpus, log_per_node = logical / nodes, phy_per_node = physical / nodes;
  // Step 1: expert groups onto nodes by their summed load.
  std::vector<float> group_load(size_t(groups), 0.0f);
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < group_size; ++i)
      group_load[size_t(g)] += w[size_t(g * group_size + i)];
  const Packing gp = balanced_packing(group_load, nodes);
  std::vector<int> log2mlog(static_cast<size_t>(logical));
  for (int e = 0; e < logical; ++e) {
    const int g = e / group_size;
    log2mlog[size_t(e)] =
        (gp.pack[size_t(g)] * groups_per_node + gp.rank_in_pack[size_t(g)]) * group_size + e % group_size;
  }
  const std::vector<int> mlog2log = inverse(log2mlog);
  std::vector<int> mlog_count(static_cast<size_t>(logical));
  for (int n = 0; n < nodes; ++n) {
    // Step 2: replicas within the node.
    std::vector<float> node_w(static_cast<size_t>(log_per_node));
    for (int i = 0; i < log_per_node; ++i)
      node_w[size_t(i)] = w[size_t(mlog2log[size_t(n * log_per_node + i)])];
    const Replication rep = replicate_experts(node_w, phy_per_node);
    std::copy(rep.count.begin(), rep.count.end(), mlog_count.begin() + long(n * log_per_node));
    // Step 3: the node's replicas onto its GPUs, each carrying its expert's load / replica count.
    std::vector<float> phy_w(static_cast<size_t>(phy_per_node));
    for (int p = 0; p < phy_per_node; ++p) {
      const int m      = rep.phy2log[size_t(p)];
      phy_w[size_t(p)] = node_w[size_t(m)] / float(rep.count[size_t(m)]);
    }
    const Packing pk = balanced_packing(phy_w, gpus / nodes);
    std::vector<int> phy2pphy(static_cast<size_t>(phy_per_node));
    for (int p = 0; p < phy_per_node; ++p)
      phy2pphy[size_t(p)] = pk.pack[size_t(p)] * per_gpu + pk.rank_in_pack[size_t(p)];
    const std::vector<int> pphy2phy = inverse(phy2pphy);
    for (int j = 0; j < phy_per_node; ++j) {
      const int p                   = pphy2phy[size_t(j)];
      phy2log[n * phy_per_node + j] = mlog2log[size_t(rep.phy2log[size_t(p)] + n * log_per_node)];
      replica[n * phy_per_node + j] = rep.replica[size_t(p)];
    }
  }
  for (int e = 0; e < logical; ++e)
    count[e] = mlog_count[size_t(log2mlog[size_t(e)])];
}

}  // namespace

Packing balanced_packing(std::span<const float> w, int packs)
{
  const int n = int(w.size());
  require(packs >= 1 && n % packs == 0, std::to_string(n) + " items do not pack evenly into " + std::to_string(packs));
  const int per_pack = n / packs;
  Packing out{std::vector<int>(size_t(n)), std::vector<int>(size_t(n), 0)};
  if (per_pack == 1) {
    std::iota(out.pack.begin(), out.pack.end(), 0);
    return out;
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return w[size_t(a)] > w[size_t(b)]; });
  std::vector<float> load(size_t(packs), 0.0f);
  std::vector<int> items(size_t(packs), 0);
  for (int i : order) {
    int best = -1;  // the first lightest pack with room (Python's min keeps the first of equals)
    for (int p = 0; p < packs; ++p)
      if (items[size_t(p)] < per_pack && (best < 0 || load[size_t(p)] < load[size_t(best)]))
        best = p;
    out.pack[size_t(i)]         = best;
    out.rank_in_pack[size_t(i)] = items[size_t(best)]++;
    load[size_t(best)] += w[size_t(i)];
  }
  return out;
}

Replication replicate_experts(std::span<const float> w, int physical)
{
  const int logical = int(w.size());
  require(physical >= logical, "fewer physical than logical experts");
  Replication r{std::vector<int>(size_t(physical)), std::vector<int>(size_t(physical), 0),
                std::vector<int>(size_t(logical), 1)};
  std::iota(r.phy2log.begin(), r.phy2log.begin() + logical, 0);
  for (int p = logical; p < physical; ++p) {
    int best         = 0;  // torch's max gives the first of equal maxima
    float best_share = w[0] / float(r.count[0]);
    for (int e = 1; e < logical; ++e) {
      const float share = w[size_t(e)] / float(r.count[size_t(e)]);
      if (share > best_share)
        best = e, best_share = share;
    }
    r.phy2log[size_t(p)] = best;
    r.replica[size_t(p)] = r.count[size_t(best)]++;
  }
  return r;
}

int EplbPlan::slot_of(int layer, int expert, int r) const
{
  const int* row = &phy2log[size_t(layer) * size_t(physical)];
  const int* rep = &replica[size_t(layer) * size_t(physical)];
  for (int p = 0; p < physical; ++p)
    if (row[p] == expert && rep[p] == r)
      return p;
  return -1;
}

EplbPlan rebalance_experts(std::span<const float> weight, int layers, int logical, int physical, int groups, int nodes,
                           int gpus, EplbPolicy policy)
{
  require(layers >= 0 && logical >= 1 && weight.size() == size_t(layers) * size_t(logical),
          "weights must be layers x logical experts");
  require(groups >= 1 && nodes >= 1 && gpus >= 1, "groups, nodes and GPUs must be positive");
  const bool hierarchical =
      policy == EplbPolicy::hierarchical || (policy == EplbPolicy::automatic && groups % nodes == 0);
  if (!hierarchical)
    groups = nodes = 1;
  require(logical % groups == 0,
          std::to_string(logical) + " experts do not split into " + std::to_string(groups) + " groups");
  require(groups % nodes == 0,
          std::to_string(groups) + " groups do not split over " + std::to_string(nodes) + " nodes");
  require(gpus % nodes == 0, std::to_string(gpus) + " GPUs do not split over " + std::to_string(nodes) + " nodes");
  require(physical >= logical && physical % gpus == 0,
          std::to_string(physical) + " physical experts do not split over " + std::to_string(gpus) + " GPUs");
  EplbPlan plan = empty_plan(layers, logical, physical);
  for (int l = 0; l < layers; ++l) {
    const size_t p0 = size_t(l) * size_t(physical), e0 = size_t(l) * size_t(logical);
    hierarchical_layer(weight.subspan(e0, size_t(logical)), physical, groups, nodes, gpus, &plan.phy2log[p0],
                       &plan.replica[p0], &plan.count[e0]);
  }
  return plan;
}

EplbPlan initial_eplb_plan(int layers, int logical, int physical)
{
  EplbPlan plan = empty_plan(layers, logical, physical);
  for (int l = 0; l < layers; ++l)
    for (int p = 0; p < physical; ++p) {
      const size_t i  = size_t(l) * size_t(physical) + size_t(p);
      const int e     = p % logical;
      plan.phy2log[i] = e;
      plan.replica[i] = plan.count[size_t(l) * size_t(logical) + size_t(e)]++;
    }
  return plan;
}

bool parse_eplb_policy(const std::string& name, EplbPolicy& out)
{
  if (name == "default")
    out = EplbPolicy::automatic;
  else if (name == "hierarchical")
    out = EplbPolicy::hierarchical;
  else if (name == "global")
    out = EplbPolicy::global;
  else
    return false;
  return true;
}

}  // namespace eldr
