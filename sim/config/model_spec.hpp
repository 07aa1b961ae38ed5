#pragma once
// An MoE model's structure and sizes, from a file under models/ (experts 0: a dense model, which
// serves only as a speculative draft). Bytes are in the served dtype.
#include <array>
#include <map>
#include <string>
#include <string_view>

namespace eldr {

class JsonReader;

// The grouped-GEMM path a model's experts run in vLLM on the testbed (ROCm, AITER off): fused_moe is
// vLLM's Triton fused_moe_kernel (bf16 experts), matmul_ogs triton_kernels' matmul_ogs (MXFP4 experts,
// GPT-OSS). sim/cost/moe_kernel.hpp says which configuration a layer runs.
enum class MoeKernel { fused_moe, matmul_ogs };

// The fused-MoE kernel's default bf16 configurations, in order of token count (BLOCK_SIZE_M, _N, _K).
inline constexpr int kFusedMoeConfigs                                                = 4;
inline constexpr std::array<std::string_view, kFusedMoeConfigs> kFusedMoeConfigNames = {"m16_n64_k128", "m32_n64_k128",
                                                                                        "m32_n128_k64", "m64_n128_k64"};

// Coefficients fitted for one (model, hardware) pair; see docs/calibration.md.
struct Calibration {
  double decode_bw_efficiency = 0;  // achieved fraction of peak HBM bandwidth in decode steps
  double step_overhead_s      = 0;  // per decode step: scheduling, sampling, graph launch
  // Per sequence of a decode step: work that grows with the batch outside the weights and the KV
  // (the engine's per-request scheduling, input preparation, sampling and output processing). The
  // round-robin curves fit it at 0-30 us, none in the committed models (docs/calibration.md
  // section 4); 0: none.
  double step_per_sequence_s = 0;
  double prefill_overhead_s  = 0;  // per prefill batch: eager kernel launches, front end, first-token sampling
  // Per-MoE-layer fixed cost (router, gating, permutation, launches). < 0: derived from the hardware's
  // measured MoE-layer scaling as a multiple of one expert's read time (the measured models). Models
  // whose experts are far larger or fewer than the measured one give it in seconds instead, since that
  // fixed cost does not grow with the expert's size (docs/calibration.md section 2.5).
  double moe_layer_overhead_s = -1;
  // Decode steps of more than step_jump_batch sequences cost step_jump_s more: engine behaviour that
  // changes with the batch size outside the MoE layers, not identified in vLLM's source (decode graphs
  // are captured up to 512 sequences; docs/calibration.md section 4). 0: no jump.
  int step_jump_batch = 0;
  double step_jump_s  = 0;
  // Each fused-MoE configuration's expert-streaming time, relative to the first one's (BLOCK_SIZE_M
  // 16), whose speed decode_bw_efficiency sets: the kernel streams an active expert's weights at
  // another fraction of peak under other tile shapes (docs/calibration.md, "Kernel configurations").
  // Calibration keys moe_time_<configuration name>, for models on the fused_moe kernel.
  std::array<double, kFusedMoeConfigs> moe_config_time = {1, 1, 1, 1};
  // Set when this block is another hardware's, reused through the hardware file's calibration_from.
  std::string transferred_from;
};

struct ModelSpec {
  std::string name;
  int layers                        = 0;
  int hidden                        = 0;
  int experts                       = 0;
  int top_k                         = 0;
  int expert_ffn                    = 0;
  int intermediate_size             = 0;  // a dense model's (experts 0) MLP width; MoE models: 0
  int q_heads                       = 0;
  int kv_heads                      = 0;
  int head_dim                      = 0;
  double expert_bytes               = 0;  // one routed expert of one layer
  double non_expert_bytes_per_layer = 0;  // attention, dense MLP, norms, gate: read every step
  double embedding_bytes            = 0;  // embeddings + LM head, resident
  double lm_head_bytes              = 0;  // read once per step (and per prefill)
  double kv_bytes_per_token         = 0;  // all layers
  int kv_block_tokens               = 16;
  // Sliding-window attention: the share of per-token KV bytes held by sliding layers, and their
  // window. Decode reads at most `sliding_window` tokens of context on those layers.
  int sliding_window            = 0;
  double sliding_kv_fraction    = 0;
  double weight_bytes_per_param = 2;  // dtype of non-expert weights (FLOPs from bytes)
  // Optional structure of DeepSeek-style models (docs/model.md section 5); the defaults describe a
  // model without them, so existing files keep their numbers. `layers` stays the MoE layers (the ones
  // the routing has); dense layers are extra layers that have attention and a dense MLP but no
  // routed experts, so no MoE term.
  int shared_experts         = 0;  // per MoE layer, always active: read every step, computed on every token
  int shared_expert_ffn      = 0;  // width of one shared expert
  double shared_expert_bytes = 0;  // all shared experts of one MoE layer
  int dense_layers           = 0;
  double dense_layer_bytes   = 0;                     // one dense layer: attention, dense MLP, norms; read every step
  std::string gemm_dtype     = "bf16";                // which peak of the hardware the GEMMs run at: bf16 | fp8
  MoeKernel moe_kernel       = MoeKernel::fused_moe;  // "moe_kernel" in the model file
  // The gate weights the engine applies (and reports) are the softmax renormalized over the token's
  // top k (true: the Hugging Face config's norm_topk_prob, or a softmax over the top-k logits), or
  // the softmax over every expert taken at the picks (false).
  bool norm_topk_prob = false;
  // The chat template the engine wraps a single user message in (models/<name>.json "chat_template",
  // from the model's published template): the tokens before the message, identical in every prompt
  // and therefore routed identically (a causal model's token depends only on the tokens before it),
  // and the tokens after it. Prompt lengths of the generated workloads are raw message lengths.
  int template_prefix_tokens = 0;
  int template_suffix_tokens = 0;
  std::map<std::string, Calibration> calibration;  // by hardware name

  double weight_bytes() const;
  // KV memory a sequence of `tokens` occupies: whole blocks of kv_block_tokens.
  double kv_reserved_bytes(int tokens) const;
  double expert_flops_per_token() const;                          // one layer, all top-k experts
  double non_expert_flops_per_token() const;                      // one layer, without attention scores
  double shared_expert_flops_per_token() const;                   // one MoE layer, all shared experts
  double dense_layer_flops_per_token() const;                     // one dense layer, without attention scores
  int attention_layers() const { return layers + dense_layers; }  // layers that hold KV
  // The calibration for `hardware`; if the model has none and `fallback` (the hardware file's
  // calibration_from) is set, the fallback hardware's block, marked as transferred.
  Calibration calibration_for(const std::string& hardware, const std::string& file,
                              const std::string& fallback = "") const;
};

ModelSpec read_model(JsonReader& r);
ModelSpec load_model(const std::string& path);

}  // namespace eldr
