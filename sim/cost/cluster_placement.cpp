#include "sim/cost/cluster_placement.hpp"
#include "sim/gating/prompt_profile.hpp"

#include <stdexcept>

namespace eldr {

std::vector<double> activation_weights(std::span<const double> counts, double tokens, double batch)
{
  std::vector<double> w(counts.size(), 0);
  if (tokens <= 0)
    return w;
  for (size_t i = 0; i < counts.size(); ++i)
    w[i] = expected_activation(counts[i] / tokens, batch);  // p: picks of the expert per decode token
  return w;
}

ClusterPlacements decode_placements(const Experiment& x, const Workload& w, const GatingSource& routing,
                                    const DecodeRouter& router, const GateSource* gates)
{
  const InstanceGroup& g = x.topology.decode;
  ClusterPlacements out;
  if (g.expert_parallel <= 1)
    return out;
  const GatingShape& shape = routing.shape();
  const int L = shape.layers, E = shape.experts, R = g.expert_parallel, K = g.instances;
  if (g.placement == Placement::contiguous) {
    out.placements.assign(size_t(K), contiguous_placement(L, E, R));
    return out;
  }
  if (g.placement == Placement::random) {
    for (int i = 0; i < K; ++i)
      out.placements.push_back(random_placement(L, E, R, x.seed * 1000003 + uint64_t(i)));
    return out;
  }
  if (w.calibration.empty())
    throw std::invalid_argument("cluster_balanced placement needs the workload's calibration split "
                                "(workload.calibration_requests > 0)");
  const size_t cells = size_t(L) * size_t(E);
  std::vector<std::vector<double>> counts(size_t(K), std::vector<double>(cells, 0));
  std::vector<double> global(cells, 0), tokens(size_t(K), 0);
  double global_tokens = 0;
  out.calibration_requests.assign(size_t(K), 0);
  for (const Request& r : w.calibration) {
    PromptProfile prompt;
    if (router.uses_prompt_profile())
      prompt = count_prompt(routing, r, router.prompt_fields(), gates, router.prompt_layers());
    const std::vector<int> homes       = router.home_workers(r, prompt);
    const std::vector<uint16_t> decode = count_decode(routing, r);
    const double n                     = r.output_tokens - 1;  // the decode tokens count_decode covers
    for (size_t c = 0; c < cells; ++c)
      global[c] += decode[c];
    global_tokens += n;
    for (int h : homes) {
      if (h < 0 || h >= K)
        throw std::invalid_argument("decode router named worker " + std::to_string(h) + " of " + std::to_string(K));
      for (size_t c = 0; c < cells; ++c)
        counts[size_t(h)][c] += decode[c];
      tokens[size_t(h)] += n;
      ++out.calibration_requests[size_t(h)];
    }
  }
  const ExpertPlacement everyone =
      balanced_placement(activation_weights(global, global_tokens, g.placement_batch), L, E, R);
  for (int i = 0; i < K; ++i)
    out.placements.push_back(
        tokens[size_t(i)] > 0
            ? balanced_placement(activation_weights(counts[size_t(i)], tokens[size_t(i)], g.placement_batch), L, E, R)
            : everyone);
  return out;
}

}  // namespace eldr
