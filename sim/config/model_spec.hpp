#pragma once
// An MoE model's structure and sizes, from a file under models/. Bytes are in the served dtype.
#include <map>
#include <string>

namespace eldr {

class JsonReader;

// Coefficients fitted for one (model, hardware) pair; see docs/calibration.md.
struct Calibration {
  double decode_bw_efficiency = 0;  // achieved fraction of peak HBM bandwidth in decode steps
  double step_overhead_s      = 0;  // per decode step: scheduling, sampling, graph launch
  double prefill_overhead_s   = 0;  // per prefill batch: eager kernel launches, front end, first-token sampling
};

struct ModelSpec {
  std::string name;
  int layers     = 0;
  int hidden     = 0;
  int experts    = 0;
  int top_k      = 0;
  int expert_ffn = 0;
  int q_heads    = 0;
  int kv_heads   = 0;
  int head_dim   = 0;
  double expert_bytes               = 0;  // one routed expert of one layer
  double non_expert_bytes_per_layer = 0;  // attention, dense MLP, norms, gate: read every step
  double embedding_bytes            = 0;  // embeddings + LM head, resident
  double lm_head_bytes              = 0;  // read once per step (and per prefill)
  double kv_bytes_per_token         = 0;  // all layers
  int kv_block_tokens               = 16;
  // Sliding-window attention: the share of per-token KV bytes held by sliding layers, and their
  // window. Decode reads at most `sliding_window` tokens of context on those layers.
  int sliding_window         = 0;
  double sliding_kv_fraction = 0;
  double weight_bytes_per_param = 2;  // dtype of non-expert weights (FLOPs from bytes)
  std::map<std::string, Calibration> calibration;  // by hardware name

  double weight_bytes() const;
  // KV memory a sequence of `tokens` occupies: whole blocks of kv_block_tokens.
  double kv_reserved_bytes(int tokens) const;
  double expert_flops_per_token() const;      // one layer, all top-k experts
  double non_expert_flops_per_token() const;  // one layer, without attention scores
  const Calibration& calibration_for(const std::string& hardware, const std::string& file) const;
};

ModelSpec read_model(JsonReader& r);
ModelSpec load_model(const std::string& path);

}  // namespace eldr
