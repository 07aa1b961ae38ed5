#pragma once
// Step and transfer times of one GPU instance, from the model's sizes, the hardware's peaks and the
// fitted calibration (DESIGN.md section 6, docs/calibration.md). Pure functions of their inputs.
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"

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

class CostModel {
public:
  CostModel(const ModelSpec& model, const Hardware& hw, const Calibration& cal);

  // One decode step of `batch` sequences; distinct[l] = distinct experts the batch's tokens pick at layer l.
  double decode_step_s(int batch, const AttentionLoad& attention, std::span<const uint16_t> distinct) const;
  // One MoE layer of a decode step (the quantity whose 16 -> 128 expert scaling was measured).
  double moe_layer_s(int batch_tokens, int distinct) const;
  // Prefill of a batch of prompts of the given lengths; distinct[l] = experts touched at layer l by
  // all of the batch's tokens.
  double prefill_s(std::span<const int> prompt_tokens, std::span<const uint16_t> distinct) const;
  // The same with prefix caching: only uncached tokens are computed; `distinct` counts their experts.
  double prefill_s(std::span<const PrefillPrompt> prompts, std::span<const uint16_t> distinct) const;
  // Query-key pairs of causal attention over n tokens, each token seeing at most `window` (0: all).
  static double causal_pairs(double n, double window);

  double kv_bytes(double tokens) const { return tokens * model_.kv_bytes_per_token; }
  // KV memory left on one GPU next to the weights.
  double kv_capacity_bytes(double memory_fraction) const;

  double effective_bandwidth() const { return bw_; }
  double moe_overhead_s() const { return moe_overhead_s_; }

private:
  double attention_read_bytes(const AttentionLoad& a) const;
  double always_active_s(int tokens) const;  // shared experts and dense layers
  ModelSpec model_;
  Hardware hw_;
  Calibration cal_;
  double bw_;              // achieved bytes/s in decode
  double flops_;           // achieved FLOP/s in large GEMMs
  double expert_read_s_;   // streaming one expert's weights
  double moe_overhead_s_;  // per MoE layer, independent of the expert count
};

}  // namespace eldr
