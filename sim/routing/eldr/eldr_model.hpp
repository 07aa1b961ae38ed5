#pragma once
// ELDR's fitted state (docs/design.md section 1): the signature variant, the greedy layer mask, the IDF
// table and one centroid per decode worker, fitted offline on the calibration split. Saved as a router
// model file by `eldrsim fit`, read back by `eldrsim run` (eldr.model_file).
#include "sim/gating/gating_source.hpp"
#include "sim/routing/eldr/balanced_kmeans.hpp"
#include "sim/routing/eldr/layer_mask.hpp"
#include "sim/routing/eldr/signature.hpp"
#include "sim/workload/request.hpp"

#include <span>
#include <string>
#include <vector>

namespace eldr {

struct EldrModel {
  std::string model;  // the MoE model the signatures come from
  int layers               = 0;
  int experts              = 0;
  SignatureVariant variant = kDefaultSignatureVariant;
  KMeansVariant kmeans     = KMeansVariant::balanced;
  std::vector<int> mask;     // layers, in the order signatures concatenate them
  double mask_spearman = 0;  // the mask's Spearman on the calibration pairs
  IdfTable idf;              // over the calibration prompts (used by counts_idf)
  DenseMatrix centroids;     // K x (|mask| x experts), unit rows; row k is decode worker k's profile
  uint64_t seed            = 1;
  int calibration_requests = 0;
  int kmeans_iterations    = 0;

  int dimension() const { return int(mask.size()) * experts; }
  Signature signature(const PromptProfile& p) const;
};

struct EldrFitOptions {
  SignatureVariant variant = kDefaultSignatureVariant;
  KMeansVariant kmeans     = KMeansVariant::balanced;
  int clusters             = 16;
  int mask_pairs           = 30000;
  double mask_min_gain     = 0.001;
  int kmeans_iterations    = 50;
  uint64_t seed            = 1;
};

// Fits IDF, the layer mask and the K centroids on `calibration`, reading its routing from `routing`
// (and gate values from `gates` for the gate variants). Throws std::invalid_argument when the split is
// too small (fewer requests than clusters) or the variant needs gates the source lacks.
EldrModel fit_eldr(std::span<const Request> calibration, const GatingSource& routing, const GateSource* gates,
                   const std::string& model_name, const EldrFitOptions& opt);

std::string eldr_model_json(const EldrModel& m);
// Reads and validates a router model file; InputError naming the file and field on any problem.
EldrModel read_eldr_model(const std::string& path);

}  // namespace eldr
