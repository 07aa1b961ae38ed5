#pragma once
// Measures the locality properties of an expert-routing source over a workload's requests: the
// statistics docs/design.md section 5 sets as targets for the generator, computed the same way for
// generated and replayed (real) routing. Monte-Carlo over sampled requests, batches and pairs;
// deterministic for a seed.
#include "sim/gating/gating_source.hpp"
#include "sim/workload/request.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace eldr {

struct GatingStatsOptions {
  int requests                 = 400;  // requests sampled for per-request statistics and as batch members
  int batches                  = 200;  // batches per size and kind
  std::vector<int> batch_sizes = {8, 16, 32, 64, 80};
  int pairs                    = 4000;  // request pairs for the signature correlations
  // Tokens per tile of the fused-MoE kernel (its BLOCK_M): an expert's weights are read once per tile
  // of the tokens routed to it, so a batch streams sum over experts of ceil(tokens / tile) expert
  // reads per layer, not its distinct experts (BatchLocality::tiles_same; docs/calibration.md
  // section 4). 16, the smallest tile of the MI300X's matrix instructions.
  int tile_tokens = 16;
  uint64_t seed   = 1;
  // The gate probabilities of a token's picks (layer-major, each layer's in ascending expert order,
  // as GateSource::token_gates gives them); when set, the gate-probability signature's Spearman is
  // measured too. A function rather than a gate source: the gates live in sim/routing.
  std::function<std::span<const float>(const Request&, int token)> token_gates;
  // A request's primary sub-topic within its label (generated routing); when set and the source has
  // token laws, batches of one (label, primary sub-topic) are measured against batches of one label:
  // how much locality lies below the labels (BatchLocality::subtopic_reduction).
  std::function<int(const Request&)> subtopic;
};

struct BatchLocality {
  int batch             = 0;
  double distinct_same  = 0;  // mean distinct experts per layer, batches of one label
  double distinct_mixed = 0;  // same, batches drawn from the whole mix
  double reduction() const { return distinct_mixed > 0 ? 1.0 - distinct_same / distinct_mixed : 0.0; }
  // The same batches counted in fused-MoE tiles (GatingStatsOptions::tile_tokens), mean per layer.
  double tiles_same = 0, tiles_mixed = 0;
  double tile_reduction() const { return tiles_mixed > 0 ? 1.0 - tiles_same / tiles_mixed : 0.0; }
  // With GatingStatsOptions::subtopic on a source with token laws: the exact expected distinct
  // experts per layer (expected_union.hpp) of batches of one label and of one (label, primary
  // sub-topic), i.e. what the simulator's expected unions see, without the Monte-Carlo noise of
  // sampled tokens. 0: not measured.
  double expected_same = 0, expected_subtopic = 0;
  double subtopic_reduction() const
  {
    return expected_same > 0 && expected_subtopic > 0 ? 1.0 - expected_subtopic / expected_same : 0.0;
  }
};

struct GatingStats {
  int sampled_requests = 0;
  // One random output token per sequence (as a decode step sees it), same-label vs mixed batches.
  std::vector<BatchLocality> locality;
  // Per request, Pearson correlation of prefill and decode per-(layer, expert) activation counts.
  double pearson_prefill_decode = 0;
  // Over random request pairs, Spearman correlation between prompt-signature cosine similarity and
  // decode-profile cosine similarity, per signature variant.
  double spearman_counts = 0, spearman_counts_idf = 0, spearman_sqrt = 0, spearman_binary = 0;
  double spearman_gate_prob = 0;  // summed gate probabilities of the prompt's picks (0 without token_gates)
  bool has_gate_prob        = false;
  // The mean gate value per pick of each (label, layer, expert) cell with at least
  // kMinGateCellPicks prompt picks: its 5th, 50th and 95th percentile over the cells (what the
  // real MGSM gate sums over counts give for Qwen3-30B-A3B, docs/routing-model.md). 0 without gates.
  static constexpr double kMinGateCellPicks = 100;
  double gate_per_pick_p5 = 0, gate_per_pick_p50 = 0, gate_per_pick_p95 = 0;
  // Share of a layer's picks taken by its most popular expert (mean, min, max over layers), and uniform.
  double top_share_mean = 0, top_share_min = 0, top_share_max = 0, top_share_uniform = 0;
  // Divergence between labels: Jensen-Shannon divergence (bits, 0..1) of two labels' per-layer expert
  // distributions (prompt + output picks of the sampled requests), averaged over layers and label
  // pairs; and the same per layer averaged over pairs, at the least and most divergent layer.
  double label_js_mean = 0, label_js_min_layer = 0, label_js_max_layer = 0;
  int label_js_max_at = -1;  // the most divergent layer
};

// Jensen-Shannon divergence in bits of two count vectors (normalised here); 0 when either is empty.
double js_divergence(std::span<const double> a, std::span<const double> b);

// `pool`: requests to sample from (served ones); `calibration`: the IDF set (the pool when empty).
GatingStats measure_routing(const std::vector<Request>& pool, const std::vector<Request>& calibration,
                            const GatingSource& source, const GatingStatsOptions& opt);

// Rank correlation with average ranks for ties.
double spearman(const std::vector<double>& x, const std::vector<double>& y);
double pearson(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace eldr
