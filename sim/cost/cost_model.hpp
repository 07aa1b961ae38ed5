#pragma once
// Step and transfer times of one GPU instance, from the model's sizes, the hardware's peaks and the
// fitted calibration (docs/design.md section 6, docs/calibration.md). Pure functions of their inputs.
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/cost/collectives.hpp"

#include <cstdint>
#include <span>

namespace eldr {

// Context a decode step's attention reads, summed over the batch's sequences.
struct AttentionLoad {
  double context_tokens  = 0;  // sum of context lengths
  double windowed_tokens = 0;  // sum of min(context, sliding window)
};

// A prompt in a prefill batch: its length and how many leading tokens' KV is reused from the prefix
// cache (those are not computed; the others attend to them).
struct PrefillPrompt {
  int tokens = 0;
  int cached = 0;
};

// An instance's GPUs (docs/model.md section 3b): attention and dense weights split over all `gpus`
// (tensor parallel); routed experts over `ep` ranks (ep = gpus: whole experts per GPU, placed) or
// tensor-split (ep = 1). Collectives run over the node's xGMI links. The default is one GPU.
struct InstanceLayout {
  int gpus = 1;
  int ep   = 1;
  IntraNodeLinks links;
};

// Activations cross GPUs in bf16 (the served dtype of every model here; FP8 models keep bf16
// activations between layers): bytes per hidden-state element in all-reduces and all-to-alls.
inline constexpr double kActivationBytes = 2;

// An expert-parallel decode step's per-rank work, [layer][rank] with `ranks` ranks per layer:
// distinct experts resident on the rank that the batch activates, and (token, expert) picks on it;
// per layer, the tokens of the largest message between two ranks in the dispatch all-to-all.
struct RankLoads {
  int ranks = 1;
  std::span<const uint16_t> distinct;
  std::span<const uint32_t> picks;
  std::span<const uint32_t> max_pair_tokens;
};

struct DecodeStepCost {
  double seconds      = 0;
  double all_to_all_s = 0;  // dispatch + combine, all layers
  double imbalance    = 1;  // max over mean of the ranks' MoE time, averaged over layers (1: balanced or ep = 1)
};

class CostModel {
 public:
  CostModel(const ModelSpec& model, const Hardware& hw, const Calibration& cal);

  // One decode step of `batch` sequences; distinct[l] = distinct experts the batch's tokens pick at
  // layer l: a count of a sampled union, or an expected (fractional) count. Counts as uint16 are
  // converted.
  double decode_step_s(int batch, const AttentionLoad& attention, std::span<const double> distinct) const;
  double decode_step_s(int batch, const AttentionLoad& attention, std::span<const uint16_t> distinct) const;
  // The same on an instance of several GPUs; `ranks` (expert parallel, layout.ep > 1) gives each
  // rank's experts and picks, else `distinct` is used. One formula: a one-GPU layout gives exactly
  // decode_step_s. `verified` tokens per sequence (speculative decoding: k + 1) go through the layers.
  DecodeStepCost decode_step(const InstanceLayout& layout, int batch, const AttentionLoad& attention,
                             std::span<const double> distinct, const RankLoads* ranks = nullptr,
                             int verified = 1) const;
  DecodeStepCost decode_step(const InstanceLayout& layout, int batch, const AttentionLoad& attention,
                             std::span<const uint16_t> distinct, const RankLoads* ranks = nullptr,
                             int verified = 1) const;
  // One pass of a multi-token-prediction draft module of `layers` decoder layers over `tokens`
  // tokens (vLLM's proposer runs k of them per step: docs/speculative.md): per layer the dense
  // weights, one layer's share of the batch's attention read, a MoE layer activating `distinct`
  // experts (tensor-split over the instance) and the shared experts; then the LM head.
  double draft_pass_s(const InstanceLayout& layout, int layers, int tokens, const AttentionLoad& attention,
                      double distinct) const;
  // One pass of a dense draft model (speculative method draft) over `tokens` tokens, `logits` of them
  // through its LM head, on the target's GPUs at the target's tensor parallelism (vLLM requires
  // draft_tensor_parallel_size = the target's): per layer a roofline of its weights against the
  // tokens' FLOPs and two all-reduces, its own KV read for `context_tokens`, then its LM head.
  double draft_model_pass_s(const InstanceLayout& layout, const ModelSpec& draft, int tokens, int logits,
                            double context_tokens) const;
  // One MoE layer of a decode step (the quantity whose 16 -> 128 expert scaling was measured); with
  // `split` GPUs sharing each expert's weights and the tokens' FLOPs (tensor-parallel experts).
  double moe_layer_s(int batch_tokens, double distinct, double split = 1) const;
  // One rank of an expert-parallel MoE layer: its resident active experts and its (token, expert) picks.
  double moe_rank_s(double picks, int distinct, int batch_tokens) const;
  // Prefill of a batch of prompts of the given lengths; distinct[l] = experts touched at layer l by
  // all of the batch's tokens.
  double prefill_s(std::span<const int> prompt_tokens, std::span<const uint16_t> distinct) const;
  // The same with prefix caching: only uncached tokens are computed; `distinct` counts their experts.
  double prefill_s(std::span<const PrefillPrompt> prompts, std::span<const uint16_t> distinct) const;
  // On an instance of layout.gpus GPUs: compute and bandwidth x gpus, plus an all-reduce of the
  // batch's hidden states per layer.
  double prefill_s(const InstanceLayout& layout, std::span<const PrefillPrompt> prompts,
                   std::span<const double> distinct) const;
  double prefill_s(const InstanceLayout& layout, std::span<const PrefillPrompt> prompts,
                   std::span<const uint16_t> distinct) const;
  // Query-key pairs of causal attention over n tokens, each token seeing at most `window` (0: all).
  static double causal_pairs(double n, double window);

  double kv_bytes(double tokens) const { return tokens * model_.kv_bytes_per_token; }
  // KV memory left on an instance of `gpus` GPUs next to one copy of the weights.
  double kv_capacity_bytes(double memory_fraction, int gpus = 1) const;

  double effective_bandwidth() const { return bw_; }
  double moe_overhead_s() const { return moe_overhead_s_; }

 private:
  double attention_read_bytes(const AttentionLoad& a) const;
  double always_active_s(int tokens, double split = 1) const;  // shared experts and dense layers
  double expert_read_s(double tokens) const;  // one expert's stream under the kernel configuration for `tokens`
  double moe_layer_s(double expert_s, double compute_s, double distinct, double split) const;
  double moe_compute_s(int batch_tokens, double split) const;  // the routed tokens' expert FLOPs, per GPU
  ModelSpec model_;
  Hardware hw_;
  Calibration cal_;
  double bw_;              // achieved bytes/s in decode
  double flops_;           // achieved FLOP/s in large GEMMs
  double expert_read_s_;   // streaming one expert's weights
  double expert_flops_;    // model_.expert_flops_per_token(), once (it is in every MoE layer's roofline)
  double moe_overhead_s_;  // per MoE layer, independent of the expert count
};

}  // namespace eldr
