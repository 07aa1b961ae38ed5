#include "sim/cost/cost_model.hpp"

#include "sim/config/experiment.hpp"
#include "sim/cost/moe_kernel.hpp"

#include <algorithm>
#include <stdexcept>
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
  expert_flops_     = model.expert_flops_per_token();
  // A layer costs a + D*e (e = one expert's read time). The measured ratio r between D = hi and D = lo
  // fixes a: (a + hi*e) = r (a + lo*e)  =>  a = e (hi - r lo) / (r - 1). A calibration may give a in
  // seconds instead, for models whose experts are unlike the measured model's (calibration.md 2.5).
  moe_overhead_s_ =
      cal.moe_layer_overhead_s >= 0
          ? cal.moe_layer_overhead_s
          : expert_read_s_ * (hw.moe_distinct_hi - hw.moe_time_ratio * hw.moe_distinct_lo) / (hw.moe_time_ratio - 1.0);
}

double CostModel::always_active_s(int tokens, double split) const
{
  // Shared experts on every MoE layer and the dense layers: weights read once per step or batch,
  // FLOPs on every token; each a roofline of its own. Zero for models without them. On a multi-GPU
  // instance they are tensor-split: each GPU reads and computes 1/split of them.
  double t = 0;
  if (model_.shared_experts > 0)
    t += model_.layers * std::max(model_.shared_expert_bytes / bw_ / split,
                                  tokens * model_.shared_expert_flops_per_token() / flops_ / split);
  if (model_.dense_layers > 0)
    t += model_.dense_layers * std::max(model_.dense_layer_bytes / bw_ / split,
                                        tokens * model_.dense_layer_flops_per_token() / flops_ / split);
  return t;
}

double CostModel::kv_capacity_bytes(double memory_fraction, int gpus) const
{
  return instance_kv_capacity_bytes(hw_, model_, gpus, memory_fraction);
}

double CostModel::attention_read_bytes(const AttentionLoad& a) const
{
  const double f = model_.sliding_kv_fraction;
  return model_.kv_bytes_per_token * ((1.0 - f) * a.context_tokens + f * a.windowed_tokens);
}

namespace {

std::vector<double> as_doubles(std::span<const uint16_t> counts)
{
  return {counts.begin(), counts.end()};
}

}  // namespace

double CostModel::expert_read_s(double tokens) const
{
  if (model_.moe_kernel != MoeKernel::fused_moe)
    return expert_read_s_;
  return expert_read_s_ * cal_.moe_config_time[size_t(fused_moe_config(tokens))];
}

double CostModel::moe_layer_s(int batch_tokens, double distinct, double split) const
{
  return moe_layer_s(expert_read_s(batch_tokens), moe_compute_s(batch_tokens, split), distinct, split);
}

double CostModel::moe_layer_s(double expert_s, double compute_s, double distinct, double split) const
{
  // Roofline per layer: stream each distinct expert once, or compute the routed tokens, whichever is
  // slower; tensor-split experts share both over `split` GPUs.
  double memory = distinct * expert_s / split;
  return moe_overhead_s_ + std::max(memory, compute_s);
}

double CostModel::moe_compute_s(int batch_tokens, double split) const
{
  return batch_tokens * expert_flops_ / flops_ / split;
}

double CostModel::moe_rank_s(double picks, int distinct, int batch_tokens) const
{
  // The same roofline on one rank: its resident experts that the batch activates, and its picks
  // (each a 1/top_k share of a token's expert FLOPs).
  double memory  = distinct * expert_read_s(batch_tokens);
  double compute = picks * (expert_flops_ / model_.top_k) / flops_;
  return moe_overhead_s_ + std::max(memory, compute);
}

double CostModel::decode_step_s(int batch, const AttentionLoad& attention, std::span<const double> distinct) const
{
  return decode_step(InstanceLayout{}, batch, attention, distinct).seconds;
}

double CostModel::decode_step_s(int batch, const AttentionLoad& attention, std::span<const uint16_t> distinct) const
{
  return decode_step_s(batch, attention, as_doubles(distinct));
}

DecodeStepCost CostModel::decode_step(const InstanceLayout& layout, int batch, const AttentionLoad& attention,
                                      std::span<const uint16_t> distinct, const RankLoads* ranks, int verified) const
{
  return decode_step(layout, batch, attention, as_doubles(distinct), ranks, verified);
}

double CostModel::draft_pass_s(const InstanceLayout& layout, int layers, int tokens, const AttentionLoad& attention,
                               double distinct) const
{
  const double g = layout.gpus;
  double layer =
      std::max(model_.non_expert_bytes_per_layer / bw_ / g, tokens * model_.non_expert_flops_per_token() / flops_ / g) +
      attention_read_bytes(attention) / model_.attention_layers() / bw_ / g +
      moe_layer_s(expert_read_s(decode_graph_tokens(tokens)), moe_compute_s(tokens, g), distinct, g) +
      2 * all_reduce_s(layout.links, layout.gpus, tokens * model_.hidden * kActivationBytes);
  if (model_.shared_experts > 0)
    layer +=
        std::max(model_.shared_expert_bytes / bw_ / g, tokens * model_.shared_expert_flops_per_token() / flops_ / g);
  return layers * layer + model_.lm_head_bytes / bw_ / g;
}

double CostModel::draft_model_pass_s(const InstanceLayout& layout, const ModelSpec& draft, int tokens, int logits,
                                     double context_tokens) const
{
  const double g = layout.gpus;
  const double layer =
      std::max(draft.non_expert_bytes_per_layer / bw_ / g, tokens * draft.non_expert_flops_per_token() / flops_ / g) +
      2 * all_reduce_s(layout.links, layout.gpus, tokens * draft.hidden * kActivationBytes);
  // LM head: vocab x hidden weights, 2 FLOPs a weight for each position that is sampled.
  const double head = std::max(draft.lm_head_bytes / bw_ / g,
                               logits * 2.0 * draft.lm_head_bytes / draft.weight_bytes_per_param / flops_ / g);
  return draft.layers * layer + draft.kv_bytes_per_token * context_tokens / bw_ / g + head;
}

double CostModel::prefill_s(const InstanceLayout& layout, std::span<const PrefillPrompt> prompts,
                            std::span<const uint16_t> distinct) const
{
  return prefill_s(layout, prompts, as_doubles(distinct));
}

DecodeStepCost CostModel::decode_step(const InstanceLayout& layout, int batch, const AttentionLoad& attention,
                                      std::span<const double> distinct, const RankLoads* ranks, int verified) const
{
  // FLOPs, kernel shapes and activations scale with the verified tokens; per-sequence work with the batch.
  const int tokens = batch * verified;
  // Tensor parallel over g GPUs: each reads 1/g of the dense weights, LM head and KV and does 1/g of
  // their FLOPs. (g = 1 divides by one: exactly the single-GPU step.)
  const double g             = layout.gpus;
  const double dense_memory  = model_.non_expert_bytes_per_layer / bw_ / g;
  const double dense_compute = tokens * model_.non_expert_flops_per_token() / flops_ / g;
  double t = cal_.step_overhead_s + batch * cal_.step_per_sequence_s + model_.lm_head_bytes / bw_ / g +
             attention_read_bytes(attention) / bw_ / g;
  if (cal_.step_jump_batch > 0 && batch > cal_.step_jump_batch)
    t += cal_.step_jump_s;
  t += model_.layers * std::max(dense_memory, dense_compute);
  DecodeStepCost c;
  if (layout.ep <= 1) {
    // The kernel's configuration is the captured graph's (its padded size); the FLOPs are the batch's.
    // moe_layer_s per layer with its distinct-independent terms once: every step pays this loop.
    const double expert_s = expert_read_s(decode_graph_tokens(tokens));
    const double compute  = moe_compute_s(tokens, g);
    for (double d : distinct)
      t += moe_layer_s(expert_s, compute, d, g);
  } else {
    if (ranks == nullptr || ranks->ranks != layout.ep)
      throw std::invalid_argument("decode_step: an expert-parallel layout needs its per-rank loads");
    // Each MoE layer waits for its slowest rank, then for the dispatch and combine all-to-alls (the
    // same messages both ways) of the largest GPU pair's hidden states.
    const int R      = ranks->ranks;
    double imbalance = 0;
    const double msg = model_.hidden * kActivationBytes;
    const int padded = decode_graph_tokens(tokens);  // the kernels' padded token count, once
    for (int l = 0; l < model_.layers; ++l) {
      double worst = 0, sum = 0;
      for (int r = 0; r < R; ++r) {
        const size_t i = size_t(l) * size_t(R) + size_t(r);
        const double x = moe_rank_s(ranks->picks[i], ranks->distinct[i], padded);
        worst          = std::max(worst, x);
        sum += x;
      }
      const double a2a = 2 * all_to_all_s(layout.links, ranks->max_pair_tokens[size_t(l)] * msg);
      t += worst + a2a;
      c.all_to_all_s += a2a;
      imbalance += worst / (sum / R);
    }
    c.imbalance = model_.layers > 0 ? imbalance / model_.layers : 1;
  }
  // All-reduces of the batch's hidden states: after every layer's attention, and after every MoE
  // layer whose experts are tensor-split (expert parallel combines with the all-to-all instead).
  const int reduces = model_.attention_layers() + (layout.ep > 1 ? 0 : model_.layers);
  t += reduces * all_reduce_s(layout.links, layout.gpus, tokens * model_.hidden * kActivationBytes);
  c.seconds = t + always_active_s(tokens, g);
  return c;
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
  return prefill_s(InstanceLayout{}, prompts, distinct);
}

double CostModel::prefill_s(const InstanceLayout& layout, std::span<const PrefillPrompt> prompts,
                            std::span<const double> distinct) const
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
  // g GPUs: g x the compute and the bandwidth (every time below but the fixed overheads divided by g;
  // g = 1 is exact).
  const double g                    = layout.gpus;
  const double attn_flops_per_layer = 2.0 * 2.0 * model_.q_heads * model_.head_dim * pairs;
  const double dense_flops          = tokens * model_.non_expert_flops_per_token() + attn_flops_per_layer;
  // KV written and cached KV read, spread over every layer that holds KV (dense layers too).
  const double kv_per_layer = kv_bytes(tokens + cached) / model_.attention_layers();
  const double dense_memory = model_.non_expert_bytes_per_layer / bw_ / g + kv_per_layer / bw_ / g;
  // Only each prompt's last position goes through the LM head: a memory-bound read of its weights.
  double t = cal_.prefill_overhead_s + model_.lm_head_bytes / bw_ / g;
  for (double d : distinct) {
    double experts = std::max(d * expert_read_s(tokens) / g, tokens * model_.expert_flops_per_token() / flops_ / g);
    t += moe_overhead_s_ + experts + std::max(dense_memory, dense_flops / flops_ / g);
  }
  if (model_.dense_layers > 0)  // their attention and KV traffic; their weights are in always_active_s
    t += model_.dense_layers * std::max(kv_per_layer / bw_ / g, attn_flops_per_layer / flops_ / g);
  // One all-reduce of the batch's hidden states per layer (0 on one GPU).
  t += model_.attention_layers() * all_reduce_s(layout.links, layout.gpus, tokens * model_.hidden * kActivationBytes);
  return t + always_active_s(int(tokens), g);
}

}  // namespace eldr
