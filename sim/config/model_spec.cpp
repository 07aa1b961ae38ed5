#include "sim/config/model_spec.hpp"
#include "sim/common/json_reader.hpp"

namespace eldr {

double ModelSpec::weight_bytes() const
{
  const double base = layers * (experts * expert_bytes + non_expert_bytes_per_layer) + embedding_bytes;
  if (shared_experts == 0 && dense_layers == 0)
    return base;  // the models without them: the same arithmetic as before they existed
  return base + layers * shared_expert_bytes + dense_layers * dense_layer_bytes;
}

double ModelSpec::kv_reserved_bytes(int tokens) const
{
  const long blocks = (long(tokens) + kv_block_tokens - 1) / kv_block_tokens;
  return double(blocks) * kv_block_tokens * kv_bytes_per_token;
}

double ModelSpec::expert_flops_per_token() const
{
  return 2.0 * 3.0 * hidden * double(expert_ffn) * top_k;  // gate, up and down projections
}

double ModelSpec::non_expert_flops_per_token() const
{
  return 2.0 * non_expert_bytes_per_layer / weight_bytes_per_param;
}

double ModelSpec::shared_expert_flops_per_token() const
{
  return 2.0 * 3.0 * hidden * double(shared_expert_ffn) * shared_experts;  // gate, up, down
}

double ModelSpec::dense_layer_flops_per_token() const
{
  return 2.0 * dense_layer_bytes / weight_bytes_per_param;
}

Calibration ModelSpec::calibration_for(const std::string& hardware, const std::string& file,
                                       const std::string& fallback) const
{
  if (auto it = calibration.find(hardware); it != calibration.end())
    return it->second;
  if (!fallback.empty())
    if (auto it = calibration.find(fallback); it != calibration.end()) {
      Calibration c      = it->second;
      c.transferred_from = fallback;
      return c;
    }
  throw InputError(file, "calibration." + hardware,
                   "model '" + name + "' has no calibration for hardware '" + hardware + "'" +
                       (fallback.empty() ? "" : " nor for its calibration_from '" + fallback + "'") +
                       " (run analysis/fit_cost.py to fit one)");
}

ModelSpec load_model(const std::string& path)
{
  Json j = load_json_file(path);
  JsonReader r(j, path);
  return read_model(r);
}

ModelSpec read_model(JsonReader& r)
{
  ModelSpec m;
  m.name   = r.require_string("name");
  m.layers = int(r.require_integer("layers", 1, 1000));
  m.hidden = int(r.require_integer("hidden", 1, 1 << 20));
  // A dense model (experts 0 or absent: a speculative draft) has a dense MLP of intermediate_size in
  // every layer, counted in non_expert_MB_per_layer, and no expert keys.
  m.experts = int(r.integer("experts", 0, 0, 4096));
  if (m.experts > 0) {
    m.top_k        = int(r.require_integer("top_k", 1, m.experts));
    m.expert_ffn   = int(r.require_integer("expert_ffn", 1, 1 << 20));
    m.expert_bytes = r.require_number("expert_MB", 1e-6, 1e6) * 1e6;
  } else {
    for (const char* key : {"top_k", "expert_ffn", "expert_MB", "shared_experts", "moe_kernel", "norm_topk_prob"})
      if (r.has(key))
        r.fail(key, "is for MoE models; this one is dense (experts 0): remove it, or give experts");
    m.intermediate_size = int(r.require_integer("intermediate_size", 1, 1 << 24));
  }
  m.q_heads                    = int(r.require_integer("q_heads", 1, 4096));
  m.kv_heads                   = int(r.require_integer("kv_heads", 1, m.q_heads));
  m.head_dim                   = int(r.require_integer("head_dim", 1, 4096));
  m.non_expert_bytes_per_layer = r.require_number("non_expert_MB_per_layer", 0, 1e6) * 1e6;
  m.embedding_bytes            = r.require_number("embedding_GB", 0, 1e4) * 1e9;
  m.lm_head_bytes              = r.require_number("lm_head_GB", 0, m.embedding_bytes / 1e9) * 1e9;
  m.kv_bytes_per_token         = r.require_number("kv_bytes_per_token", 1, 1e9);
  m.kv_block_tokens            = int(r.require_integer("kv_block_tokens", 1, 4096));
  m.sliding_window             = int(r.integer("sliding_window", 0, 0, 1 << 24));
  m.sliding_kv_fraction        = r.number("sliding_kv_fraction", 0, 0, 1);
  if (m.sliding_kv_fraction > 0 && m.sliding_window == 0)
    r.fail("sliding_window", "is required when sliding_kv_fraction > 0");
  m.weight_bytes_per_param = r.number("non_expert_bytes_per_param", 2, 0.125, 8);
  // The dense MLP (gate, up and down projections) alone must fit in a dense layer's bytes.
  if (m.experts == 0 && m.non_expert_bytes_per_layer < 3.0 * m.hidden * m.intermediate_size * m.weight_bytes_per_param)
    r.fail("non_expert_MB_per_layer", "is less than the dense MLP alone (3 x hidden x intermediate_size weights "
                                      "of non_expert_bytes_per_param): a dense model's layer holds its attention "
                                      "and its MLP");
  m.shared_experts      = int(r.integer("shared_experts", 0, 0, 1024));
  m.shared_expert_ffn   = int(r.integer("shared_expert_ffn", m.expert_ffn, 1, 1 << 20));
  m.shared_expert_bytes = r.number("shared_expert_MB", 0, 0, 1e6) * 1e6;
  if ((m.shared_experts > 0) != (m.shared_expert_bytes > 0))
    r.fail(m.shared_experts > 0 ? "shared_expert_MB" : "shared_experts",
           "a shared expert needs both a count (shared_experts) and a size (shared_expert_MB) above 0");
  m.dense_layers      = int(r.integer("dense_layers", 0, 0, 1000));
  m.dense_layer_bytes = r.number("dense_layer_MB", 0, 0, 1e6) * 1e6;
  if ((m.dense_layers > 0) != (m.dense_layer_bytes > 0))
    r.fail(m.dense_layers > 0 ? "dense_layer_MB" : "dense_layers",
           "dense layers need both a count (dense_layers) and a size (dense_layer_MB) above 0");
  m.gemm_dtype     = r.choice("gemm_dtype", "bf16", {"bf16", "fp8"});
  m.norm_topk_prob = r.boolean("norm_topk_prob", false);
  m.moe_kernel     = r.choice("moe_kernel", "fused_moe", {"fused_moe", "matmul_ogs"}) == "matmul_ogs"
                         ? MoeKernel::matmul_ogs
                         : MoeKernel::fused_moe;
  if (r.has("chat_template")) {
    auto t                   = r.object("chat_template");
    m.template_prefix_tokens = int(t.require_integer("prefix_tokens", 0, 1 << 16));
    m.template_suffix_tokens = int(t.require_integer("suffix_tokens", 0, 1 << 16));
    t.ignore("source");
    t.finish();
  }
  auto cal = r.object("calibration");  // a dense draft has none: it runs at its target's
  for (const auto& hw : cal.keys()) {
    auto c = cal.object(hw);
    Calibration k;
    k.decode_bw_efficiency = c.require_number("decode_bw_efficiency", 0.01, 1.0);
    k.step_overhead_s      = c.require_number("step_overhead_ms", 0, 1e4) * 1e-3;
    k.prefill_overhead_s   = c.require_number("prefill_overhead_ms", 0, 1e5) * 1e-3;
    k.step_per_sequence_s  = c.number("step_per_sequence_us", 0, 0, 1e5) * 1e-6;
    if (c.has("moe_layer_overhead_us"))
      k.moe_layer_overhead_s = c.require_number("moe_layer_overhead_us", 0, 1e6) * 1e-6;
    k.step_jump_batch = int(c.integer("step_jump_batch", 0, 1, 1 << 20));
    k.step_jump_s     = c.number("step_jump_ms", 0, 0, 1e4) * 1e-3;
    if (c.has("step_jump_ms") != c.has("step_jump_batch"))
      c.fail(c.has("step_jump_ms") ? "step_jump_ms" : "step_jump_batch",
             "a step-cost jump needs both the batch size above which it applies (step_jump_batch) and its size "
             "(step_jump_ms)");
    // The first configuration is the reference (decode_bw_efficiency); the others' times are relative.
    for (int i = 1; i < kFusedMoeConfigs; ++i) {
      const std::string key = "moe_time_" + std::string(kFusedMoeConfigNames[size_t(i)]);
      if (c.has(key) && m.moe_kernel != MoeKernel::fused_moe)
        c.fail(key, "only the fused_moe kernel has configurations by token count (this model's moe_kernel is "
                    "matmul_ogs, one configuration in the decode range); remove the key");
      k.moe_config_time[size_t(i)] = c.number(key, 1, 0.2, 5);
    }
    c.ignore("source");
    c.finish();
    m.calibration[hw] = k;
  }
  cal.finish();
  r.ignore("source");
  r.ignore("notes");
  r.ignore("dtype");
  r.finish();
  return m;
}

}  // namespace eldr
