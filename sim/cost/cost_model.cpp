#include "sim/cost/cost_model.hpp"

#include <algorithm>
#include <vector>

namespace eldr {

CostModel::CostModel(const ModelSpec& model, const Hardware& hw, const Calibration& cal)
    : model_(model), hw_(hw), cal_(cal)
{
  bw_ = hw.hbm_bandwidth_Bps * cal.decode_bw_efficiency;
  // FP8 models run their GEMMs at the hardware's FP8 peak (load_experiment rejects hardware without one).
  const double peak = model.gemm_dtype == "fp8" && hw.dense_fp8_flops > 0 ? hw.dense_fp8_flops : hw.dense_flops;
  flops_            = peak * hw.gemm_efficiency;
  expert_read_s_    = model.expert_bytes / bw_;
  // A layer costs a + D*e (e = one expert's read time). The measured ratio r between D = hi and D = lo
  // fixes a: (a + hi*e) = r (a + lo*e)  =>  a = e (hi - r lo) / (r - 1). A calibration may give a in
  // seconds instead, for models whose experts are unlike the measured model's (calibration.md 2.5).
  moe_overhead_s_ =
      cal.moe_layer_overhead_s >= 0
          ? cal.moe_layer_overhead_s
          : expert_read_s_ * (hw.moe_distinct_hi - hw.moe_time_ratio * hw.moe_distinct_lo) / (hw.moe_time_ratio - 1.0);
}

double CostModel::always_active_s(int tokens) const
{
  // Shared experts on every MoE layer and the dense layers: weights read once per step or batch,
  // FLOPs on every token; each a roofline of its own. Zero for models without them.
  double t = 0;
  if (model_.shared_experts > 0)
    t += model_.layers * std::max(model_.shared_expert_bytes / bw_,
                                  tokens * model_.shared_expert_flops_per_token() / flops_);
  if (model_.dense_layers > 0)
    t += model_.dense_layers * std::max(model_.dense_layer_bytes / bw_,
                                        tokens * model_.dense_layer_flops_per_token() / flops_);
  return t;
}

double CostModel::kv_capacity_bytes(double memory_fraction) const
{
  return hw_.hbm_bytes * memory_fraction - model_.weight_bytes();
}

double CostModel::attention_read_bytes(const AttentionLoad& a) const
{
  const double f = model_.sliding_kv_fraction;
  return model_.kv_bytes_per_token * ((1.0 - f) * a.context_tokens + f * a.windowed_tokens);
}

double CostModel::moe_layer_s(int batch_tokens, int distinct) const
{
  // Roofline per layer: stream each distinct expert once, or compute the routed tokens, whichever is slower.
  double memory  = distinct * expert_read_s_;
  double compute = batch_tokens * model_.expert_flops_per_token() / flops_;
  return moe_overhead_s_ + std::max(memory, compute);
}

double CostModel::decode_step_s(int batch, const AttentionLoad& attention, std::span<const uint16_t> distinct) const
{
  const double dense_memory  = model_.non_expert_bytes_per_layer / bw_;
  const double dense_compute = batch * model_.non_expert_flops_per_token() / flops_;
  double t = cal_.step_overhead_s + model_.lm_head_bytes / bw_ + attention_read_bytes(attention) / bw_;
  t += model_.layers * std::max(dense_memory, dense_compute);
  for (uint16_t d : distinct)
    t += moe_layer_s(batch, d);
  return t + always_active_s(batch);
}

double CostModel::causal_pairs(double n, double window)
{
  if (window <= 0 || n <= window)
    return n * (n + 1) / 2;
  return window * (window + 1) / 2 + (n - window) * window;
}

double CostModel::prefill_s(std::span<const int> prompt_tokens, std::span<const uint16_t> distinct) const
{
  std::vector<PrefillPrompt> prompts;
  for (int n : prompt_tokens)
    prompts.push_back({n, 0});
  return prefill_s(prompts, distinct);
}

double CostModel::prefill_s(std::span<const PrefillPrompt> prompts, std::span<const uint16_t> distinct) const
{
  // Causal attention: QK^T and AV, 2 FLOPs a multiply-add each, per query-key pair. Sliding layers are
  // weighted by their share of the KV bytes. A computed token attends to the cached prefix too: the
  // pairs of positions c..n-1, and the cached KV is read once.
  double tokens = 0, pairs = 0, cached = 0;
  const double f = model_.sliding_kv_fraction;
  for (const PrefillPrompt& p : prompts) {
    tokens += p.tokens - p.cached;
    cached += p.cached;
    pairs += (1 - f) * (causal_pairs(p.tokens, 0) - causal_pairs(p.cached, 0)) +
             f * (causal_pairs(p.tokens, model_.sliding_window) - causal_pairs(p.cached, model_.sliding_window));
  }
  const double attn_flops_per_layer = 2.0 * 2.0 * model_.q_heads * model_.head_dim * pairs;
  const double dense_flops          = tokens * model_.non_expert_flops_per_token() + attn_flops_per_layer;
  // KV written and cached KV read, spread over every layer that holds KV (dense layers too).
  const double kv_per_layer = kv_bytes(tokens + cached) / model_.attention_layers();
  const double dense_memory = model_.non_expert_bytes_per_layer / bw_ + kv_per_layer / bw_;
  // Only each prompt's last position goes through the LM head: a memory-bound read of its weights.
  double t = cal_.prefill_overhead_s + model_.lm_head_bytes / bw_;
  for (uint16_t d : distinct) {
    double experts = std::max(d * expert_read_s_, tokens * model_.expert_flops_per_token() / flops_);
    t += moe_overhead_s_ + experts + std::max(dense_memory, dense_flops / flops_);
  }
  if (model_.dense_layers > 0)  // their attention and KV traffic; their weights are in always_active_s
    t += model_.dense_layers * std::max(kv_per_layer / bw_, attn_flops_per_layer / flops_);
  return t + always_active_s(int(tokens));
}

}  // namespace eldr
