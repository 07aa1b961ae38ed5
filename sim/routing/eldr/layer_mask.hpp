#pragma once
// The ELDR layer mask (docs/design.md section 1, issue 4 item 2): which layers a signature keeps, chosen by
// forward-greedy selection on a calibration set. Over sampled request pairs, the target is the cosine
// distance of the two requests' decode profiles (all layers); a mask is scored by the Spearman rank
// correlation between the masked signatures' cosine distance and the target. Starting empty, add the
// layer that raises the score most; keep the order; stop at the peak (no layer raises it). Ranking
// distances or similarities gives the same Spearman, so similarities are ranked throughout.
//
// Speed (1000 requests, 30,000 pairs, 48 x 128 experts; bench/bm_signature.cpp): the pairs and their
// target take ~28 ms (make_mask_pairs, shared by all variants). Per variant, the per-layer pair dot
// products and per-request squared norms are computed once (~25 ms), so a candidate mask's cosine for
// every pair is an incremental sum; the target's ranks are fixed; a candidate's ranks come from a
// radix sort of its similarities: ~0.2 ms a candidate. The plain greedy scores every remaining layer
// at every step (~800 candidates for counts_idf's 20 layers: ~185 ms); by default a step first
// screens the candidates on a sixth of the pairs (LayerMaskOptions::screen_pairs): ~95 ms.
#include "sim/routing/eldr/signature.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace eldr {

// The request pairs of a calibration set and their target: shared by the masks of all variants.
struct MaskPairs {
  int requests = 0;
  std::vector<uint32_t> a, b;       // pair members, indices into the calibration set (a != b), sorted by (a, b)
  std::vector<double> target;       // cosine similarity of their decode profiles (0 if either is empty)
  std::vector<double> target_rank;  // average ranks (1-based, ties averaged) of `target`
  size_t size() const { return a.size(); }
};

// Draws `pairs` ordered pairs of distinct requests uniformly with replacement from Rng(seed,
// "mask.pairs") and computes the target. `decode[i]` is request i's decode profile (count_decode).
// std::invalid_argument for fewer than two requests, profiles of different sizes, or pairs outside
// [1, 2^21].
MaskPairs make_mask_pairs(std::span<const std::vector<uint16_t>> decode, int pairs, uint64_t seed);

struct LayerMaskOptions {
  int pairs       = 30000;  // for the convenience overload of fit_layer_mask
  uint64_t seed   = 1;      // likewise: the pairs stream is Rng(seed, "mask.pairs")
  int max_layers  = 0;      // stop after this many layers; 0 = only at the peak
  double min_gain = 0;      // a layer is added only if it raises the Spearman by more than this
  // Screening: each step scores every candidate on about `screen_pairs` of the pairs (an even stride)
  // and only the `screen_keep` best on all of them; the stop stays exact (before stopping, every
  // remaining layer is scored on all pairs). 0 = off: every candidate on all pairs, the plain greedy.
  // On the generated Qwen3-30B-A3B and GPT-OSS-120B calibration sets (1000 requests, six variants)
  // the default reached the plain greedy's score within 0.001, mostly with the same layers, in about
  // half the time.
  int screen_pairs = 5000;
  int screen_keep  = 8;
};

struct LayerMask {
  SignatureVariant variant = kDefaultSignatureVariant;
  std::vector<int> layers;       // in selection order: the order signatures concatenate them in
  std::vector<double> spearman;  // spearman[k]: the score of layers[0..k]
  double score() const { return spearman.empty() ? 0.0 : spearman.back(); }
};

// The greedy mask of variant `v` on calibration prompt profiles `prompts` (indexed like the decode
// profiles the pairs were drawn from). `idf` is needed for counts_idf; gate variants need the gate sums
// in the profiles. The first layer is always taken (the empty mask has no score).
LayerMask fit_layer_mask(std::span<const PromptProfile> prompts, const MaskPairs& pairs, SignatureVariant v,
                         const IdfTable* idf, const LayerMaskOptions& opt = {});
// Same, drawing opt.pairs pairs with opt.seed.
LayerMask fit_layer_mask(std::span<const PromptProfile> prompts, std::span<const std::vector<uint16_t>> decode,
                         SignatureVariant v, const IdfTable* idf, const LayerMaskOptions& opt = {});

// The score of a given mask: Spearman between the signatures' cosine similarity (variant `v` on
// `layers`) and the pairs' target.
double mask_spearman(std::span<const PromptProfile> prompts, const MaskPairs& pairs, SignatureVariant v,
                     const IdfTable* idf, std::span<const int> layers);

// Spearman correlation of `x` with a fixed ranking (`y_rank`: average ranks 1..n of y, as
// average_ranks gives them), ties in x averaged. x is ranked as floats, to 2^-24 of its spread (a
// radix sort of 24-bit keys): equals spearman(x, y) of sim/gating/gating_stats.hpp except that x
// values closer than that count as ties (the unit test: within 1e-6). At most 2^21 values.
double spearman_with_ranks(std::span<const double> x, std::span<const double> y_rank);

// Average ranks (1-based, ties averaged) of v.
std::vector<double> average_ranks(std::span<const double> v);

}  // namespace eldr
