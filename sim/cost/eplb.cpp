#include "sim/cost/eplb.hpp"

#include "sim/common/fast_mod.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <bit>
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

EplbInstance::EplbInstance(const EplbSpec& spec, int layers, int experts, int ranks, int slots, EplbCounters& totals)
    : spec_(spec), totals_(totals), layers_(layers), experts_(experts), ranks_(ranks),
      physical_(experts + spec.redundant), words_((experts + spec.redundant + 63) / 64),
      plan_(initial_eplb_plan(layers, experts, experts + spec.redundant))
{
  // vLLM sets the counter to 3/4 of the interval at start: the first rearrangement comes early.
  counter_ = std::max(0, spec.step_interval - spec.step_interval / 4);
  rank_of_.resize(size_t(physical_));
  for (int p = 0; p < physical_; ++p)
    rank_of_[size_t(p)] = uint16_t(p / (physical_ / ranks));
  counts_.assign(size_t(slots) * size_t(layers) * size_t(experts), 0);
  active_.assign(size_t(slots) * size_t(layers) * size_t(words_), 0);
  logical_words_ = (experts + 63) / 64;
  active_single_.assign(size_t(slots) * size_t(layers) * size_t(logical_words_), 0);
  distinct_.assign(size_t(slots) * size_t(layers) * size_t(ranks), 0);
  window_sum_.assign(size_t(layers) * size_t(experts), 0);
  if (spec.window_size > spec.step_interval)
    ring_.assign(size_t(spec.window_size) * window_sum_.size(), 0);
  index_plan();
}

void EplbInstance::index_plan()
{
  max_replicas_ = *std::max_element(plan_.count.begin(), plan_.count.end());
  log2phy_.assign(size_t(layers_) * size_t(experts_) * size_t(max_replicas_), -1);
  for (int l = 0; l < layers_; ++l)
    for (int p = 0; p < physical_; ++p) {
      const size_t i                     = size_t(l) * size_t(physical_) + size_t(p);
      log2phy_[(size_t(l) * size_t(experts_) + size_t(plan_.phy2log[i])) * size_t(max_replicas_) +
               size_t(plan_.replica[i])] = p;
    }
  const int LW = logical_words_;
  single_on_rank_.assign(size_t(layers_) * size_t(ranks_) * size_t(LW), 0);
  replicated_.assign(size_t(layers_) * size_t(LW), 0);
  replica_start_.assign(size_t(layers_) * size_t(experts_), 0);
  replica_slots_.clear();
  for (int l = 0; l < layers_; ++l)
    for (int e = 0; e < experts_; ++e) {
      const uint64_t bit  = uint64_t(1) << (e % 64);
      const int n         = plan_.replicas(l, e);
      const size_t row    = size_t(l) * size_t(experts_) + size_t(e);
      replica_start_[row] = uint32_t(replica_slots_.size());
      if (n > 1) {
        replicated_[size_t(l * LW + e / 64)] |= bit;
        for (int r = 0; r < n; ++r)
          replica_slots_.push_back(uint16_t(log2phy_[row * size_t(max_replicas_) + size_t(r)]));
      } else
        single_on_rank_[size_t(
            (l * ranks_ +
             rank_of_[size_t(log2phy_[(size_t(l) * size_t(experts_) + size_t(e)) * size_t(max_replicas_)])]) *
                LW +
            e / 64)] |= bit;
    }
  mod_constant_.assign(size_t(max_replicas_) + 1, 0);
  for (int n = 2; n <= max_replicas_; ++n)
    mod_constant_[size_t(n)] = fast_mod_constant(uint64_t(n));
}

void EplbInstance::clear(size_t slot)
{
  const size_t c = size_t(layers_) * size_t(experts_), a = size_t(layers_) * size_t(words_),
               d = size_t(layers_) * size_t(ranks_);
  std::fill_n(&counts_[slot * c], c, 0);
  std::fill_n(&active_[slot * a], a, 0);
  const size_t s = size_t(layers_) * size_t(logical_words_);
  std::fill_n(&active_single_[slot * s], s, 0);
  std::fill_n(&distinct_[slot * d], d, 0);
}

void EplbInstance::add_token(size_t slot, std::span<const uint64_t> mask, int W, uint64_t key, int owner, uint32_t* acc)
{
  // Members in locals: the stores below are uint32_t and uint16_t, which may alias them otherwise.
  const int R = ranks_, E = experts_, words = words_;
  if (W != logical_words_)
    throw std::logic_error("EplbInstance::add_token: a mask of " + std::to_string(W) + " words per layer for " +
                           std::to_string(E) + " experts");
  uint32_t* counts                      = &counts_[slot * size_t(layers_) * size_t(E)];
  uint64_t* active                      = &active_[slot * size_t(layers_) * size_t(words)];
  uint64_t* active_single               = &active_single_[slot * size_t(layers_) * size_t(W)];
  uint16_t* ranks_d                     = &distinct_[slot * size_t(layers_) * size_t(R)];
  const uint64_t* single                = single_on_rank_.data();
  const uint64_t* replicated            = replicated_.data();
  const int* replicas                   = plan_.count.data();
  const uint16_t* rank_of               = rank_of_.data();
  const uint32_t* replica_start         = replica_start_.data();
  const uint16_t* replica_slots         = replica_slots_.data();
  const unsigned __int128* mod_constant = mod_constant_.data();
  for (int l = 0; l < layers_; ++l, counts += E, active += words, active_single += W, ranks_d += R,
           single += size_t(R) * size_t(W), replicated += W, replicas += E, replica_start += E) {
    uint32_t* a       = &acc[size_t(l) * size_t(R + R * R)];
    const uint64_t* m = &mask[size_t(l) * size_t(W)];
    uint64_t hit      = 0;  // the ranks the token reaches (R <= 64 checked at construction)
    for (int w = 0; w < W; ++w) {
      for (uint64_t bits = m[w]; bits != 0; bits &= bits - 1)
        ++counts[w * 64 + std::countr_zero(bits)];
      active_single[w] |= m[w] & ~replicated[w];
      for (uint64_t bits = m[w] & replicated[w]; bits != 0; bits &= bits - 1) {
        // vLLM sends the pick with flat index i to replica i mod n, a pseudo-random spread over the
        // batch; a hash of the token and the expert spreads the same way here.
        const int e      = w * 64 + std::countr_zero(bits);
        const uint64_t n = uint64_t(replicas[e]);
        const uint64_t h = splitmix64(key ^ (uint64_t(l) << 48) ^ (uint64_t(e) << 32));
        const int p      = replica_slots[replica_start[e] + fast_mod(h, mod_constant[n], n)];
        const int rank   = rank_of[p];
        uint64_t& word   = active[p / 64];
        if (!(word & (uint64_t(1) << (p % 64)))) {
          word |= uint64_t(1) << (p % 64);
          ++ranks_d[rank];
        }
        ++a[rank];
        hit |= uint64_t(1) << rank;
      }
    }
    for (int r = 0; r < R; ++r) {
      int c = 0;
      for (int w = 0; w < W; ++w)
        c += std::popcount(m[w] & single[r * W + w]);
      a[r] += uint32_t(c);
      hit |= uint64_t(c > 0) << r;
    }
    for (hit &= ~(uint64_t(1) << owner); hit != 0; hit &= hit - 1)
      ++a[R + owner * R + std::countr_zero(hit)];
  }
}

void EplbInstance::rank_distinct(size_t slot, std::span<uint16_t> out) const
{
  const int R = ranks_, W = logical_words_;
  const size_t d                = size_t(layers_) * size_t(R);
  const uint64_t* active_single = &active_single_[slot * size_t(layers_) * size_t(W)];
  for (int l = 0; l < layers_; ++l)
    for (int r = 0; r < R; ++r) {
      int c = distinct_[slot * d + size_t(l * R + r)];
      for (int w = 0; w < W; ++w)
        c += std::popcount(active_single[l * W + w] & single_on_rank_[size_t((l * R + r) * W + w)]);
      out[size_t(l * R + r)] = uint16_t(c);
    }
}

bool EplbInstance::commit(size_t slot, std::span<const uint32_t> acc)
{
  const int R = ranks_;
  const int b = rearranged_ ? 1 : 0;
  for (int l = 0; l < layers_; ++l) {
    const uint32_t* a = &acc[size_t(l) * size_t(R + R * R)];
    totals_.max_picks[b] += *std::max_element(a, a + R);
    totals_.mean_picks[b] += double(std::accumulate(a, a + R, uint64_t(0))) / R;
  }
  ++totals_.steps[b];
  // The window: every step's loads (a ring) when it outlasts the interval, else just the steps in the
  // last window_size before the next rearrangement.
  const uint32_t* c = &counts_[slot * window_sum_.size()];
  ++counter_;
  if (!ring_.empty()) {
    uint32_t* old = &ring_[size_t(recorded_ % spec_.window_size) * window_sum_.size()];
    for (size_t i = 0; i < window_sum_.size(); ++i) {
      window_sum_[i] += c[i];
      window_sum_[i] -= old[i];
      old[i] = c[i];
    }
  } else if (spec_.step_interval - counter_ < spec_.window_size) {
    for (size_t i = 0; i < window_sum_.size(); ++i)
      window_sum_[i] += c[i];
  }
  ++recorded_;
  if (counter_ < spec_.step_interval)
    return false;
  counter_ = 0;
  // A rearrangement still moving weights is not interrupted: this one is skipped.
  return !transfer_pending();
}

std::vector<double> EplbInstance::start_rearrangement(double expert_bytes)
{
  std::vector<float> load(window_sum_.begin(), window_sum_.end());
  if (ring_.empty())
    std::fill(window_sum_.begin(), window_sum_.end(), 0);
  // One node: the instance's GPUs share a node, so the automatic policy is hierarchical over one node.
  pending_ = rebalance_experts(load, layers_, experts_, physical_, spec_.expert_groups, 1, ranks_, spec_.policy);
  ++totals_.rearrangements;
  const int R = ranks_, per_rank = physical_ / R;
  std::vector<double> bytes(size_t(R) * size_t(R), 0);
  std::vector<int> holders, sent(static_cast<size_t>(experts_));
  for (int l = 0; l < layers_; ++l) {
    std::fill(sent.begin(), sent.end(), 0);
    for (int p = 0; p < physical_; ++p) {
      const int e = pending_.logical_of(l, p), to = p / per_rank;
      holders.clear();
      bool local = false;
      for (int q = 0; q < physical_; ++q)
        if (plan_.logical_of(l, q) == e) {
          local = local || q / per_rank == to;
          if (holders.empty() || holders.back() != q / per_rank)
            holders.push_back(q / per_rank);
        }
      if (local)
        continue;
      // Receivers of one expert take turns over the ranks that held it.
      const int from = holders[size_t(sent[size_t(e)]++) % holders.size()];
      bytes[size_t(from * R + to)] += expert_bytes;
      ++totals_.experts_moved;
      totals_.bytes_moved += expert_bytes;
    }
  }
  return bytes;
}

void EplbInstance::finish_rearrangement()
{
  rearranged_ = true;
  plan_       = std::move(pending_);
  pending_    = EplbPlan{};
  index_plan();
}

}  // namespace eldr
