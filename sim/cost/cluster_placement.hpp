#pragma once
// Expert placement of each expert-parallel decode instance (docs/model.md section 3b):
//   contiguous        experts 0..E/R-1 on rank 0, and so on, on every instance;
//   random            a seeded permutation per layer, a different one per instance;
//   cluster_balanced  per instance, a balanced partition (expert_placement.hpp) of the expected load
//                     of the calibration requests the decode router would send it: an expert that a
//                     token picks with probability p (its decode activations over the requests' decode
//                     tokens, per layer) weighs 1 - (1 - p)^B, B = placement_batch. The router says where
//                     a request goes (DecodeRouter::home_workers: ELDR the nearest centroid, domain
//                     every worker of the label's pool); requests it would send anywhere count for the
//                     global frequencies, which instances without requests of their own (and every
//                     instance under routers without a hook) are balanced for.
// Plain C++ (no SimGrid).
#include "sim/config/experiment.hpp"
#include "sim/cost/expert_placement.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/workload/request.hpp"

#include <vector>

namespace eldr {

struct ClusterPlacements {
  std::vector<ExpertPlacement> placements;  // per decode instance; empty when expert_parallel = 1
  std::vector<long> calibration_requests;   // cluster_balanced: calibration requests homed on each instance
};

ClusterPlacements decode_placements(const Experiment& x, const Workload& w, const GatingSource& routing,
                                    const DecodeRouter& router, const GateSource* gates);

// Expected-activation weights [layer][expert] from decode counts summed over `tokens` decode tokens.
std::vector<double> activation_weights(std::span<const double> counts, double tokens, double batch);

}  // namespace eldr
