#pragma once
// The generative model of MoE routing (docs/routing-model.md). Every (label, sub-topic, phase) has
// expert preferences per layer: logits = shared popularity + label preferences (strongest in the
// middle layers) + sub-topic preferences + for decode a drift from prefill. A token picks top_k
// distinct experts per layer from the softmax of its palette's logits (Plackett-Luce, i.e. sampling
// without replacement). A request has a primary and a secondary sub-topic of its label and draws a
// random share of its tokens from the secondary one, a share drawn separately for its prompt and its
// output: requests of a kind are alike, not identical, and a prompt predicts its output imperfectly.
// A kind may make its sub-topics topics that every label shares (LabelLocality::shared_subtopics).
// The chat template's tokens (a request of label kTemplateLabel) have a palette of their own: the
// shared popularity and preferences of their own, no label's.
//
// Speed: tokens are not sampled one by one. Each (label, sub-topic, phase) holds a palette of
// pre-sampled whole-token records, and a token picks a record by a hash of (request, position), as
// UniformGating does; the batch union then costs a few ORs per token.
#include "sim/common/huge_page_buffer.hpp"
#include "sim/config/gating_profile.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/gating/gating_source.hpp"

#include <limits>
#include <string>
#include <vector>

namespace eldr {

// Reads the routing cache files in `cache_dir` not read yet, whole and checked, into this process's
// memory (at most kPreloadBytes in all): a GeneratedGating of this process, or of a child forked
// from it (a sweep's points), then takes a file's contents from memory instead of reading it again.
// A file that does not check out is left to the run that needs it (which notes it and rebuilds).
void preload_routing_cache(const std::string& cache_dir);
inline constexpr size_t kPreloadBytes = size_t(1) << 30;

class GeneratedGating : public GatingSource {
 public:
  // novel_after_s: measured requests arriving at or after it draw their sub-topics from a second set
  // per label that no calibration or warm-up request uses (workload.new_subtopics_after_s; drift).
  // cache_dir: where built sources are kept for other processes with the same inputs (a sweep's
  // points; see build_key); empty: always built here.
  GeneratedGating(const ModelSpec& model, const GatingProfile& profile, const std::string& kind,
                  const std::vector<std::string>& labels, uint64_t seed, const std::string& profile_file = "",
                  double novel_after_s = std::numeric_limits<double>::infinity(), const std::string& cache_dir = "");

  const GatingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request& r, int token) const override;
  void accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const override;
  bool distinct_masks(const Request& r, int begin, int end, std::vector<MaskCount>& out) const override;
  bool distinct_layer_masks(const Request& r, int begin, int end, std::span<const int> layers,
                            std::vector<MaskCount>& out) const override;
  bool has_token_laws() const override { return true; }
  // The palettes' record frequencies mixed by the request's secondary share: the law of the records
  // the sampled mode draws.
  TokenLaw token_law(const Request& r, int phase) const override;

  struct Traits {
    int primary        = 0;  // sub-topic indices within the request's label
    int secondary      = 0;
    double prefill_mix = 0;  // share of prompt tokens drawn from the secondary sub-topic
    double decode_mix  = 0;  // share of output tokens drawn from it
  };
  Traits traits(const Request& r) const;
  bool has_subtopics() const override { return true; }
  int primary_subtopic(const Request& r) const override { return traits(r).primary; }
  // The palette token `token` of `r` draws from, and its logits (layers x experts): the gate scores a
  // router would see; their softmax per layer are the gate probabilities.
  int palette_of(const Request& r, int token) const;
  std::span<const float> palette_logits(int palette) const;
  int palettes() const { return template_palette_ + 1; }
  // The palette of the chat template's tokens (a request of label kTemplateLabel), after every
  // (label, sub-topic, phase) palette: their count.
  int template_palette() const { return template_palette_; }
  // The record token `token` of `r` is, as palette x records_per_palette() + its index in the palette:
  // what a token's own gate values (gate_source.hpp) are kept by.
  size_t record_of(const Request& r, int token) const;
  std::span<const uint64_t> record_experts(size_t record) const;
  int records_per_palette() const { return records_; }
  // The routing seed: further streams derived from the generator (its gates) start from it.
  uint64_t seed() const { return seed_; }
  // Whether the model's gate weights are renormalized over the top k (ModelSpec::norm_topk_prob).
  bool norm_topk_prob() const { return norm_topk_prob_; }

 private:
  // What a token's record depends on besides its position, computed once per request: the per-token
  // work is then one hash and a compare (traits() needs two more hashes and an integer division).
  struct RequestKey {
    uint64_t routing_seed = 0;
    int prompt_tokens     = -1;  // -1: not computed yet
    uint16_t label        = 0;
    int first             = 0;  // first_palette(): 0, or the novel sub-topics' offset
    uint32_t palette[2][2]{};   // [phase][0 primary, 1 secondary] palette index
    uint32_t threshold[2]{};    // [phase] the secondary is drawn iff (hash & 0xffffff) < threshold
  };
  const RequestKey& key(const Request& r) const;
  int first_palette(const Request& r) const;
  size_t record_of(const RequestKey& k, int token) const;
  void build_logits(const GatingProfile& profile, const std::string& kind, const std::vector<std::string>& labels,
                    uint64_t seed, const std::string& profile_file);
  // Samples the palettes' records and counts their frequencies.
  void sample_palettes(uint64_t seed);
  // Everything the logits and palettes are built from, as text (numbers exact, files by content).
  std::string build_key(const GatingProfile& profile, const std::string& kind, const std::vector<std::string>& labels,
                        uint64_t seed, const std::string& profile_file) const;
  // The built arrays from/to a cache file of that key; load_built is false (nothing changed) unless
  // the file holds exactly this key and arrays of the sizes this build makes.
  bool load_built(const std::string& file, const std::string& key);
  void save_built(const std::string& file, const std::string& key) const;

  GatingShape shape_;
  int labels_          = 0;
  int subtopics_       = 0;
  int records_         = 0;
  uint64_t seed_       = 0;
  bool norm_topk_prob_ = false;
  double mix_max_      = 0;
  // Cumulative primary sub-topic shares in 2^32 units (LabelLocality::subtopic_zipf); empty: all equal.
  std::vector<uint64_t> subtopic_cdf_;
  double novel_after_s_ = std::numeric_limits<double>::infinity();
  int novel_offset_     = 0;  // palette index of the first novel sub-topic's palette (none: 0)
  int template_palette_ = 0;
  std::vector<float> logits_;     // [palette][layer][expert]
  HugePageBuffer pool_;           // [palette][record][words]
  std::vector<float> frequency_;  // [palette][layer][expert]: share of the palette's records that pick the expert
  // Keys by request id, filled lazily; an entry is checked against the request's fields, so requests
  // built on the fly that reuse an id (tests, trace statistics) get their own key.
  mutable std::vector<RequestKey> keys_;
  mutable RequestKey uncached_;
  mutable RequestKey template_key_;
  // accumulate_tokens' scratch: record offsets, and for prompt tokens the records already ORed
  // (a bit per palette record) into `seen_union_`, the union as the last prompt call left it.
  mutable std::vector<size_t> offsets_;
  mutable std::vector<uint64_t> seen_;
  mutable std::vector<uint64_t> seen_union_;
  // distinct_masks' scratch: tokens per record (all zero between calls), the records hit in order.
  mutable std::vector<uint32_t> hits_;
  mutable std::vector<uint32_t> hit_order_;
  // distinct_layer_masks' copy of the records, only compact_layers_' words ([record][layer][word]),
  // made at its first call: a router's mask is a few of the layers, spread over a record's cache lines.
  mutable std::vector<int> compact_layers_;
  mutable HugePageBuffer compact_;
  // Appends the distinct records of r's tokens [begin, end), record `rec` as base + rec * stride.
  void distinct_records(const Request& r, int begin, int end, const uint64_t* base, size_t stride,
                        std::vector<MaskCount>& out) const;
};

// Per-layer label discriminativeness at depth x = l / (layers - 1).
double layer_weight(const GatingProfile& p, int layer, int layers);

}  // namespace eldr
