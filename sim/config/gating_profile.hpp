#pragma once
// Parameters of the generative MoE routing model for one model (models/routing/<model>.json). What
// they mean and how they were calibrated: docs/routing-model.md.
#include <map>
#include <string>

namespace eldr {

class JsonReader;

struct LabelLocality {
  double label_strength    = 1.0;  // scale of the label's own expert preferences
  double subtopic_strength = 0.8;  // scale of a sub-topic's preferences within its label
  // The profile's values of these three unless the kind sets its own.
  double popularity_sigma = 1.0;
  double phase_drift      = 0.3;
  double request_mix_max  = 0.5;
  // The sub-topics are topics every label shares: sub-topic k has the same preferences in every
  // label (a coding question in any language), where otherwise each label has sub-topics of its own.
  bool shared_subtopics = false;
  // How unequal a label's sub-topics are in traffic: sub-topic k (0-based) is the primary one of a
  // request with weight (k+1)^-subtopic_zipf, Zipf's law of topic frequencies (0: all equal).
  double subtopic_zipf = 0;
};

// What the generated routing should reproduce (docs/design.md section 5), printed by `eldrsim trace stats`
// beside the measured values and checked by the calibration tests.
struct GatingTargets {
  std::map<std::string, std::pair<double, double>> distinct_reduction;  // by workload kind: [lo, hi]
  double pearson_prefill_decode = 0;
  double spearman_counts_idf    = 0;
  double spearman_binary        = 0;
  double spearman_gate_prob     = 0;  // 0: no target
  std::pair<double, double> top_expert_share{0, 1};
  // by workload kind: [P5, P95] of a (label, layer, expert) cell's mean gate value per pick
  std::map<std::string, std::pair<double, double>> gate_per_pick;
};

struct GatingProfile {
  std::string model;
  int subtopics_per_label = 8;
  int palette_records     = 512;  // pre-sampled tokens per (label, sub-topic, phase)
  double popularity_sigma = 1.0;  // scale of the shared (generalist) expert preferences: popularity skew
  double phase_drift      = 0.3;  // decode preferences drift from prefill by this much
  double request_mix_max  = 0.5;  // a request draws up to this share of tokens from a second sub-topic
                                  // (a kind may set its own of these three: LabelLocality)
  // Label discriminativeness by depth x = l/(L-1): floor + (1-floor) exp(-((x-peak)/width)^2).
  double layer_floor = 0.3;
  double layer_peak  = 0.55;
  double layer_width = 0.3;
  std::map<std::string, LabelLocality> kinds;  // by workload kind: task, language
  // Optional real per-language expert counts (language kind): label preferences are taken from them.
  std::string language_counts_file;
  GatingTargets targets;

  const LabelLocality& locality(const std::string& kind, const std::string& file) const;
};

GatingProfile load_routing_profile(const std::string& path, const std::string& project_root);

}  // namespace eldr
