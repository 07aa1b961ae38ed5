// CostModel (sim/cost/cost_model.hpp). Expected values are worked out by hand in the comments from
// the physical meaning of each term (docs/design.md section 6), not by re-running the implementation.
#include "sim/config/experiment.hpp"
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/expert_placement.hpp"
#include "sim/cost/moe_kernel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using namespace eldr;

namespace {

// A toy accelerator with round numbers.
//   peak HBM 1e12 B/s, decode efficiency 0.5  -> achieved bw = 5e11 B/s
//   dense 1e15 FLOP/s, GEMM efficiency 0.5    -> achieved     = 5e14 FLOP/s
//   MoE layer at 10 distinct experts is 3x the time at 2.
Hardware toy_hardware()
{
  Hardware h;
  h.name              = "toy";
  h.hbm_bytes         = 100e9;
  h.hbm_bandwidth_Bps = 1e12;
  h.dense_flops       = 1e15;
  h.gemm_efficiency   = 0.5;
  h.moe_distinct_lo   = 2;
  h.moe_distinct_hi   = 10;
  h.moe_time_ratio    = 3;
  return h;
}

Calibration toy_calibration()
{
  Calibration c;
  c.decode_bw_efficiency = 0.5;
  c.step_overhead_s      = 1e-3;
  c.prefill_overhead_s   = 2e-3;
  return c;
}

// Two layers, 4 experts of 1 GB (reading one takes 1e9 / 5e11 = 2 ms), top-2.
//   expert FLOPs per token per layer = 2 (FMA) * 3 (gate, up, down) * hidden 1000 * ffn 100 * top_k 2 = 1.2e6
//   non-expert bytes 5e8 per layer (1 ms to read); bf16 -> 2.5e8 params -> 5e8 FLOPs per token per layer
//   LM head 1e8 bytes (0.2 ms to read); KV 1e6 bytes per token.
ModelSpec toy_model()
{
  ModelSpec m;
  m.name                       = "toy";
  m.layers                     = 2;
  m.hidden                     = 1000;
  m.experts                    = 4;
  m.top_k                      = 2;
  m.expert_ffn                 = 100;
  m.q_heads                    = 4;
  m.kv_heads                   = 2;
  m.head_dim                   = 100;
  m.expert_bytes               = 1e9;
  m.non_expert_bytes_per_layer = 5e8;
  m.embedding_bytes            = 2e8;
  m.lm_head_bytes              = 1e8;
  m.kv_bytes_per_token         = 1e6;
  m.kv_block_tokens            = 16;
  m.weight_bytes_per_param     = 2;
  return m;
}

}  // namespace

TEST_CASE("cost: MoE overhead follows from the measured 16->128 ratio (toy model by hand)")
{
  CostModel c(toy_model(), toy_hardware(), toy_calibration());
  // e = 2 ms per expert. A layer costs a + D e; a + 10 e = 3 (a + 2 e)  =>  2 a = 4 e  =>  a = 4 ms.
  CHECK(c.effective_bandwidth() == doctest::Approx(5e11));
  CHECK(c.moe_overhead_s() == doctest::Approx(4e-3).epsilon(1e-12));
  // Memory bound (batch 4: 4 * 1.2e6 / 5e14 = 9.6e-9 s of compute << 2 ms per expert).
  CHECK(c.moe_layer_s(4, 2) == doctest::Approx(4e-3 + 2 * 2e-3).epsilon(1e-12));
  CHECK(c.moe_layer_s(4, 10) == doctest::Approx(4e-3 + 10 * 2e-3).epsilon(1e-12));
  CHECK(c.moe_layer_s(4, 10) / c.moe_layer_s(4, 2) == doctest::Approx(3.0).epsilon(1e-12));
}

TEST_CASE("cost: MoE layer becomes compute bound for huge batches (toy model by hand)")
{
  ModelSpec m    = toy_model();
  m.expert_bytes = 1e3;  // e = 1e3 / 5e11 = 2e-9 s, a = 2 e = 4e-9 s
  CostModel c(m, toy_hardware(), toy_calibration());
  // 1000 tokens * 1.2e6 FLOPs / 5e14 FLOP/s = 2.4e-6 s of compute > 2 experts * 2e-9 s of reads.
  CHECK(c.moe_layer_s(1000, 2) == doctest::Approx(4e-9 + 2.4e-6).epsilon(1e-9));
  // 1 token: 2.4e-9 s compute < 4e-9 s of reads -> memory bound.
  CHECK(c.moe_layer_s(1, 2) == doctest::Approx(4e-9 + 4e-9).epsilon(1e-9));
}

TEST_CASE("cost: decode step time of a toy model computed by hand")
{
  CostModel c(toy_model(), toy_hardware(), toy_calibration());
  const std::vector<uint16_t> distinct = {3, 5};

  // Batch 4, 1000 context tokens in all, no sliding window.
  //   step overhead                         1.0 ms
  //   LM head 1e8 / 5e11                     0.2 ms
  //   attention: 1000 tok * 1e6 B / 5e11     2.0 ms
  //   dense: 2 layers * max(1 ms read, 4 * 5e8 / 5e14 = 4 us)  = 2.0 ms
  //   MoE layer 0: 4 ms + 3 * 2 ms = 10 ms; layer 1: 4 ms + 5 * 2 ms = 14 ms
  //   total = 1 + 0.2 + 2 + 2 + 10 + 14 = 29.2 ms
  AttentionLoad a;
  a.context_tokens  = 1000;
  a.windowed_tokens = 1000;
  CHECK(c.decode_step_s(4, a, distinct) == doctest::Approx(29.2e-3).epsilon(1e-12));

  // Batch 5000, no context: the dense part is compute bound, 5000 * 5e8 / 5e14 = 5 ms per layer (> 1 ms read);
  // MoE compute 5000 * 1.2e6 / 5e14 = 12 us << reads, still memory bound.
  //   total = 1 + 0.2 + 0 + 2 * 5 + 10 + 14 = 35.2 ms
  AttentionLoad none;
  CHECK(c.decode_step_s(5000, none, distinct) == doctest::Approx(35.2e-3).epsilon(1e-12));
}

namespace {

// The hand-computed 29.2 ms step of the test above: two MoE layers of 3 and 5 distinct experts, a
// context of 1000 tokens; and eight 100-token prompts.
const std::vector<uint16_t> kHandDistinct = {3, 5};

AttentionLoad hand_context()
{
  AttentionLoad a;
  a.context_tokens  = 1000;
  a.windowed_tokens = 1000;
  return a;
}

std::vector<PrefillPrompt> hand_prompts()
{
  std::vector<PrefillPrompt> prompts(8);
  for (auto& p : prompts)
    p.tokens = 100;
  return prompts;
}

}  // namespace

TEST_CASE(
    "cost: step_per_sequence adds its cost once per sequence of a decode step, not to prefill (toy model by hand)")
{
  Calibration cal         = toy_calibration();
  cal.step_per_sequence_s = 30e-6;
  CostModel plain(toy_model(), toy_hardware(), toy_calibration());
  CostModel per_seq(toy_model(), toy_hardware(), cal);
  // Batch 4: 29.2 ms plus 4 x 30 us = 29.32 ms.
  CHECK(per_seq.decode_step_s(4, hand_context(), kHandDistinct) == doctest::Approx(29.32e-3).epsilon(1e-12));
  CHECK(plain.decode_step_s(4, hand_context(), kHandDistinct) == doctest::Approx(29.2e-3).epsilon(1e-12));
  CHECK(per_seq.prefill_s(InstanceLayout{}, hand_prompts(), kHandDistinct) ==
        plain.prefill_s(InstanceLayout{}, hand_prompts(), kHandDistinct));
}

TEST_CASE("cost: a decode step of more than step_jump_batch sequences costs step_jump more (toy model by hand)")
{
  Calibration cal     = toy_calibration();
  cal.step_jump_batch = 4;
  cal.step_jump_s     = 7e-3;
  CostModel plain(toy_model(), toy_hardware(), toy_calibration());
  CostModel jump(toy_model(), toy_hardware(), cal);
  const AttentionLoad a = hand_context();
  // Batch 4: the 29.2 ms of the hand-computed step above. Batch 5: 29.2 + 7 ms
  // (its dense compute, 5 x 5e8 / 5e14 = 5 us a layer, stays under the 1 ms read).
  CHECK(jump.decode_step_s(4, a, kHandDistinct) == doctest::Approx(29.2e-3).epsilon(1e-12));
  CHECK(jump.decode_step_s(5, a, kHandDistinct) == doctest::Approx(36.2e-3).epsilon(1e-12));
  CHECK(plain.decode_step_s(5, a, kHandDistinct) == doctest::Approx(29.2e-3).epsilon(1e-12));
  // Prefill batches do not see it (their fixed cost is prefill_overhead).
  CHECK(jump.prefill_s(InstanceLayout{}, hand_prompts(), kHandDistinct) ==
        plain.prefill_s(InstanceLayout{}, hand_prompts(), kHandDistinct));
}

TEST_CASE("cost: decode batches run at vLLM's captured graph sizes (by hand)")
{
  // 1, 2, 4, then multiples of 8 up to 256, multiples of 16 up to 512, unpadded beyond.
  const std::vector<std::pair<int, int>> cases = {{1, 1},   {2, 2},     {3, 4},     {4, 4},     {5, 8},
                                                  {8, 8},   {9, 16},    {32, 32},   {33, 40},   {64, 64},
                                                  {65, 72}, {256, 256}, {257, 272}, {512, 512}, {513, 513}};
  for (auto [batch, graph] : cases) {
    CAPTURE(batch);
    CHECK(decode_graph_tokens(batch) == graph);
  }
}

TEST_CASE("cost: the fused-MoE kernel's default configuration by token count (vLLM's rule, by hand)")
{
  // BLOCK_SIZE_M 16 up to 32 tokens, 32 up to 96 (N 64 / K 128 up to 64, N 128 / K 64 beyond), 64 beyond.
  const std::vector<std::pair<double, int>> cases = {{1, 0},  {32, 0}, {33, 1}, {40, 1},  {64, 1},
                                                     {65, 2}, {96, 2}, {97, 3}, {512, 3}, {8192, 3}};
  for (auto [tokens, config] : cases) {
    CAPTURE(tokens);
    CHECK(fused_moe_config(tokens) == config);
  }
  CHECK(kFusedMoeConfigNames[1] == "m32_n64_k128");
}

TEST_CASE("cost: each fused-MoE configuration streams the experts at its own speed (toy model by hand)")
{
  Calibration cal     = toy_calibration();
  cal.moe_config_time = {1, 0.5, 1, 1.5};
  CostModel plain(toy_model(), toy_hardware(), toy_calibration());
  CostModel timed(toy_model(), toy_hardware(), cal);
  const std::vector<uint16_t> distinct = {3, 5};
  AttentionLoad a;
  a.context_tokens  = 1000;
  a.windowed_tokens = 1000;
  // Batch 32 runs the graph of 32 (BLOCK_SIZE_M 16): the reference speed. Batch 33 runs the graph of 40
  // (BLOCK_SIZE_M 32, N 64): its 3 + 5 experts stream in 0.5 x 2 ms = 1 ms each, 8 ms less; the layer
  // overhead (4 ms a layer) is unchanged. Batch 65 (graph 72, N 128): time 1 again.
  CHECK(timed.decode_step_s(32, a, distinct) == plain.decode_step_s(32, a, distinct));
  CHECK(plain.decode_step_s(33, a, distinct) - timed.decode_step_s(33, a, distinct) ==
        doctest::Approx(8e-3).epsilon(1e-9));
  CHECK(timed.decode_step_s(65, a, distinct) == plain.decode_step_s(65, a, distinct));
  CHECK(timed.moe_layer_s(40, 10) == doctest::Approx(4e-3 + 10 * 1e-3).epsilon(1e-12));
  // Prefill batches are not padded: 8 x 100 tokens run BLOCK_SIZE_M 64, 1.5 x 2 ms an expert (their
  // compute, 800 x 1.2e6 / 5e14 = 1.9 us, stays under), 8 ms more; a 40-token prompt 8 ms less.
  std::vector<PrefillPrompt> prompts(8);
  for (auto& p : prompts)
    p.tokens = 100;
  CHECK(timed.prefill_s(InstanceLayout{}, prompts, distinct) - plain.prefill_s(InstanceLayout{}, prompts, distinct) ==
        doctest::Approx(8e-3).epsilon(1e-9));
  std::vector<PrefillPrompt> short_prompt = {{40, 0}};
  CHECK(plain.prefill_s(InstanceLayout{}, short_prompt, distinct) -
            timed.prefill_s(InstanceLayout{}, short_prompt, distinct) ==
        doctest::Approx(8e-3).epsilon(1e-9));
  // A model on the matmul_ogs path (GPT-OSS's MXFP4 experts) has one configuration in this range.
  ModelSpec ogs  = toy_model();
  ogs.moe_kernel = MoeKernel::matmul_ogs;
  CHECK(CostModel(ogs, toy_hardware(), cal).decode_step_s(33, a, distinct) ==
        CostModel(ogs, toy_hardware(), toy_calibration()).decode_step_s(33, a, distinct));
}

TEST_CASE("cost: sliding-window layers read at most the window")
{
  ModelSpec m           = toy_model();
  m.sliding_window      = 100;
  m.sliding_kv_fraction = 0.5;
  CostModel c(m, toy_hardware(), toy_calibration());
  const std::vector<uint16_t> distinct = {2, 2};
  AttentionLoad none;
  const double base = c.decode_step_s(4, none, distinct);

  // Half the KV bytes live on full-attention layers (all 1000 tokens), half on sliding layers
  // (100 tokens): 1e6 * (0.5 * 1000 + 0.5 * 100) = 5.5e8 bytes -> 1.1 ms at 5e11 B/s.
  AttentionLoad a;
  a.context_tokens  = 1000;
  a.windowed_tokens = 100;
  CHECK(c.decode_step_s(4, a, distinct) - base == doctest::Approx(1.1e-3).epsilon(1e-9));

  // Doubling the context while the window stays full only adds the full-attention half:
  // 1e6 * 0.5 * 1000 more bytes -> +1 ms.
  AttentionLoad b  = a;
  b.context_tokens = 2000;
  CHECK(c.decode_step_s(4, b, distinct) - c.decode_step_s(4, a, distinct) == doctest::Approx(1e-3).epsilon(1e-9));

  // Without sliding layers, the whole context is read: 1000 * 1e6 / 5e11 = 2 ms.
  CostModel full(toy_model(), toy_hardware(), toy_calibration());
  CHECK(full.decode_step_s(4, a, distinct) - full.decode_step_s(4, none, distinct) ==
        doctest::Approx(2e-3).epsilon(1e-9));
}

TEST_CASE("cost: causal attention pairs with and without a sliding window (by hand)")
{
  // Token i (0-based) attends to itself and the i before it: 1 + 2 + ... + n = n (n + 1) / 2.
  CHECK(CostModel::causal_pairs(1, 0) == 1);
  CHECK(CostModel::causal_pairs(4, 0) == 10);
  CHECK(CostModel::causal_pairs(1000, 0) == 500500);
  // A window of w keys: token i sees min(i + 1, w). n = 5, w = 2: 1 + 2 + 2 + 2 + 2 = 9.
  CHECK(CostModel::causal_pairs(5, 2) == 9);
  // A window longer than the prompt changes nothing.
  CHECK(CostModel::causal_pairs(4, 10) == 10);
  CHECK(CostModel::causal_pairs(4, 4) == 10);
  // n = 1000, w = 100: 1 + ... + 100 = 5050, then 900 tokens x 100 = 90000.
  CHECK(CostModel::causal_pairs(1000, 100) == 95050);
}

TEST_CASE("cost: prefill attention is quadratic in prompt length (compute bound by hand)")
{
  ModelSpec m          = toy_model();
  m.kv_bytes_per_token = 1e3;
  CostModel c(m, toy_hardware(), toy_calibration());
  const std::vector<uint16_t> distinct = {4, 4};

  // One prompt of n = 10000 tokens. Causal attention, per layer: each of q_heads = 4 heads computes
  // n (n + 1) / 2 = 50,005,000 query-key dot products and as many weighted value sums, each
  // head_dim = 100 multiply-adds of 2 FLOPs: 4 * 4 * 100 * 50,005,000 = 8.0008e10 FLOPs.
  // Dense FLOPs per layer = 1e4 tokens * 5e8 + 8.0008e10 = 5.080008e12 -> / 5e14 = 10.160016 ms, more
  // than the dense reads (5e8 weights + 1e4 * 1e3 B of KV written over 2 layers = 5.05e8 B -> 1.01 ms).
  // MoE per layer: a = 4 ms + max(4 experts * 2 ms, 1e4 * 1.2e6 / 5e14 = 24 us) = 12 ms.
  // Total = prefill overhead 2 ms + LM head 0.2 ms + 2 * (12 + 10.160016) ms = 46.520032 ms.
  const std::vector<int> one_prompt = {10000};
  const double one_long             = c.prefill_s(one_prompt, distinct);
  CHECK(one_long == doctest::Approx(46.520032e-3).epsilon(1e-12));

  // Ten prompts of 1000 tokens: same token count, 10 * 500,500 pairs -> 8.008e9 FLOPs per layer,
  // dense 5.008008e12 / 5e14 = 10.016016 ms: 2 * (10.160016 - 10.016016) = 0.288 ms less.
  const std::vector<int> ten_prompts(10, 1000);
  const double ten_short = c.prefill_s(ten_prompts, distinct);
  CHECK(one_long - ten_short == doctest::Approx(0.288e-3).epsilon(1e-9));

  // Attention-dominated layers (huge heads: 4 * 4000 * 1000 = 1.6e7 FLOPs per pair). Isolate attention
  // by comparing one prompt of n tokens with n one-token prompts (same tokens, n pairs in all):
  // the difference is 1.6e7 * (n (n + 1) / 2 - n) = 1.6e7 * n (n - 1) / 2 FLOPs per layer.
  ModelSpec big          = m;
  big.q_heads            = 4000;
  big.head_dim           = 1000;
  big.kv_bytes_per_token = 1;
  CostModel cb(big, toy_hardware(), toy_calibration());
  const std::vector<uint16_t> one = {1, 1};
  auto attention                  = [&](int n) {
    return cb.prefill_s(std::vector<int>{n}, one) - cb.prefill_s(std::vector<int>(size_t(n), 1), one);
  };
  // n = 1e4: 1.6e7 * 49,995,000 = 7.9992e14 FLOPs -> 1.59984 s per layer, 3.19968 s for both.
  CHECK(attention(10000) == doctest::Approx(3.19968).epsilon(1e-9));
  // Doubling n: 2n (2n - 1) / (n (n - 1)) = 2 * 19999 / 9999 = 4.0002x.
  CHECK(attention(20000) / attention(10000) == doctest::Approx(2.0 * 19999 / 9999).epsilon(1e-9));
}

TEST_CASE("cost: prefill attention on sliding layers sees at most the window")
{
  // Same attention-dominated toy, half the KV (and so half the layers' attention) sliding with a
  // window of 100. One prompt of 1000: pairs = 0.5 * 500,500 + 0.5 * 95,050 = 297,775.
  // 1000 one-token prompts: 1000 pairs. Difference per layer: 1.6e7 * 296,775 / 5e14 = 9.4968 ms;
  // both cases are compute bound (1000-token layer: 5e11 + 1.6e10 FLOPs = 1.032 ms > 1.0 ms of reads).
  ModelSpec big           = toy_model();
  big.q_heads             = 4000;
  big.head_dim            = 1000;
  big.kv_bytes_per_token  = 1;
  big.sliding_window      = 100;
  big.sliding_kv_fraction = 0.5;
  CostModel cb(big, toy_hardware(), toy_calibration());
  const std::vector<uint16_t> one = {1, 1};
  const double diff = cb.prefill_s(std::vector<int>{1000}, one) - cb.prefill_s(std::vector<int>(1000, 1), one);
  CHECK(diff == doctest::Approx(2 * 9.4968e-3).epsilon(1e-9));

  // A prompt within the window costs the same as without sliding layers.
  ModelSpec full           = big;
  full.sliding_window      = 0;
  full.sliding_kv_fraction = 0;
  CostModel cf(full, toy_hardware(), toy_calibration());
  CHECK(cb.prefill_s(std::vector<int>{80}, one) ==
        doctest::Approx(cf.prefill_s(std::vector<int>{80}, one)).epsilon(1e-12));
  CHECK(cb.prefill_s(std::vector<int>{1000}, one) < cf.prefill_s(std::vector<int>{1000}, one));
}

TEST_CASE("cost: KV capacity is HBM share minus weights (by hand)")
{
  CostModel c(toy_model(), toy_hardware(), toy_calibration());
  // weights = 2 layers * (4 experts * 1e9 + 5e8) + 2e8 embedding = 9.2e9 B; 0.9 * 100e9 - 9.2e9 = 80.8e9.
  CHECK(c.kv_capacity_bytes(0.9) == doctest::Approx(80.8e9).epsilon(1e-12));
  CHECK(c.kv_bytes(16) == doctest::Approx(16e6));

  // Qwen3-30B-A3B on MI300X: weights = 48 * (128 * 9.44 MB + 38.3 MB) + 1.24 GB
  //   = 48 * 1246.62 MB + 1.24 GB = 59.83776 GB + 1.24 GB = 61.07776 GB; 0.9 * 192 GB = 172.8 GB
  //   -> 111.72224 GB of KV cache.
  ModelSpec q = load_model("models/qwen3-30b-a3b.json");
  Hardware h  = load_hardware("models/hardware/mi300x.json");
  CostModel cq(q, h, q.calibration_for(h.name, "models/qwen3-30b-a3b.json"));
  CHECK(q.weight_bytes() == doctest::Approx(61.07776e9).epsilon(1e-12));
  CHECK(cq.kv_capacity_bytes(0.9) == doctest::Approx(111.72224e9).epsilon(1e-12));
}

TEST_CASE("cost: shared experts and dense layers in a toy decode step and prefill by hand")
{
  // The toy above: 2 MoE layers, 4 experts of 1 GB, BW 5e11 B/s, 5e14 FLOP/s, a = 4 ms.
  const Hardware h    = toy_hardware();
  const Calibration c = toy_calibration();
  ModelSpec m         = toy_model();
  // Plus one shared expert of 1 GB (2 ms to read, 2 x 3 x 1000 x 100 = 6e5 FLOPs a token) on each MoE
  // layer and one dense layer of 5e8 bytes (1 ms; 5e8 FLOPs a token).
  m.shared_experts      = 1;
  m.shared_expert_ffn   = 100;
  m.shared_expert_bytes = 1e9;
  m.dense_layers        = 1;
  m.dense_layer_bytes   = 5e8;
  CostModel cost(m, h, c);
  // Decode, batch 4, 1000 context tokens, D = {3, 5}: the toy's 29.2 ms + 2 x 2 ms shared + 1 ms dense.
  AttentionLoad a;
  a.context_tokens = a.windowed_tokens = 1000;
  CHECK(cost.decode_step_s(4, a, std::vector<uint16_t>{3, 5}) == doctest::Approx(34.2e-3).epsilon(1e-12));
  // Weights: 2 x (4e9 + 5e8 + 1e9) + 5e8 + 2e8 = 11.7e9.
  CHECK(m.weight_bytes() == doctest::Approx(11.7e9));

  // Prefill of one 10,000-token prompt with kv 1e3 B a token, D = {4, 4}. The toy's MoE layers give
  // 46.520032 ms (their KV share, now 1e7 B / 3 attention layers, stays under their compute). On top:
  //   the dense layer's attention: max(KV 3.33e6 B / 5e11 = 6.7 us, 8.0008e10 FLOPs / 5e14 = 0.160016 ms)
  //   shared experts: 2 x max(2 ms, 1e4 x 6e5 / 5e14 = 12 us) = 4 ms
  //   dense layer weights: max(1 ms, 1e4 x 5e8 / 5e14 = 10 ms) = 10 ms
  //   total 60.680048 ms
  m.kv_bytes_per_token = 1e3;
  CostModel cp(m, h, c);
  CHECK(cp.prefill_s(std::vector<int>{10000}, std::vector<uint16_t>{4, 4}) ==
        doctest::Approx(60.680048e-3).epsilon(1e-12));
}

namespace {
struct Real {
  ModelSpec model   = load_model("models/qwen3-30b-a3b.json");
  Hardware hardware = load_hardware("models/hardware/mi300x.json");
  CostModel cost{model, hardware, model.calibration_for(hardware.name, "models/qwen3-30b-a3b.json")};
};
}  // namespace

TEST_CASE("cost: qwen3-30b MoE layer is 4.7x slower at 128 than at 16 distinct experts")
{
  Real r;
  REQUIRE(r.hardware.moe_time_ratio == doctest::Approx(4.7));
  // At the measurement's batches (32 and 128: the kernel's BLOCK_SIZE_M 16 and 64 configurations, both
  // at the reference speed); the BLOCK_SIZE_M 32 window streams at its own fitted speed.
  for (int batch : {16, 32, 128, 256})
    CHECK(r.cost.moe_layer_s(batch, 128) / r.cost.moe_layer_s(batch, 16) ==
          doctest::Approx(r.hardware.moe_time_ratio).epsilon(1e-9));
}

TEST_CASE("cost: qwen3-30b MoE layer is nearly flat in batch 32 -> 128 at a fixed expert count")
{
  Real r;
  for (int d : {16, 32, 64, 96, 128}) {
    const double t32  = r.cost.moe_layer_s(32, d);
    const double t128 = r.cost.moe_layer_s(128, d);
    CAPTURE(d);
    CHECK(t128 >= t32);
    CHECK(t128 / t32 < 1.02);
  }
}

TEST_CASE("cost: qwen3-30b decode step is strictly increasing in distinct experts")
{
  Real r;
  AttentionLoad a;
  a.context_tokens  = 64 * 600;
  a.windowed_tokens = a.context_tokens;
  double prev       = 0;
  for (int d = r.model.top_k; d <= r.model.experts; ++d) {
    std::vector<uint16_t> distinct(size_t(r.model.layers), uint16_t(d));
    const double t = r.cost.decode_step_s(64, a, distinct);
    CAPTURE(d);
    CHECK(t > prev);
    prev = t;
  }
  // One more distinct expert on a single layer also costs more.
  std::vector<uint16_t> distinct(size_t(r.model.layers), uint16_t(40));
  const double base = r.cost.decode_step_s(64, a, distinct);
  distinct[7]       = 41;
  CHECK(r.cost.decode_step_s(64, a, distinct) > base);
  // And each extra expert costs one expert read: 9.44e6 B at 5.3e12 B/s x the fitted decode efficiency,
  // streamed at the speed of the kernel configuration a batch of 64 runs (BLOCK_SIZE_M 32, N 64).
  const Calibration& cal = r.model.calibration.at("mi300x");
  const double bw        = 5.3e12 * cal.decode_bw_efficiency;
  REQUIRE(fused_moe_config(decode_graph_tokens(64)) == 1);
  CHECK(r.cost.decode_step_s(64, a, distinct) - base ==
        doctest::Approx(9.44e6 / bw * cal.moe_config_time[1]).epsilon(1e-6).scale(0));
}

TEST_CASE("cost: qwen3-30b decode step grows with context (KV reads)")
{
  Real r;
  std::vector<uint16_t> distinct(size_t(r.model.layers), uint16_t(64));
  AttentionLoad a, b;
  a.context_tokens = a.windowed_tokens = 10000;
  b.context_tokens = b.windowed_tokens = 20000;
  // 10000 more tokens * 98304 B at 5.3e12 B/s x the fitted decode efficiency.
  const double bw = 5.3e12 * r.model.calibration.at("mi300x").decode_bw_efficiency;
  CHECK(r.cost.decode_step_s(32, b, distinct) - r.cost.decode_step_s(32, a, distinct) ==
        doctest::Approx(10000 * 98304 / bw).epsilon(1e-9));
}

// --- Multi-GPU instances (TP + EP, docs/model.md section 3b) ---------------------------------------

namespace {

// The toy model with 8 experts (2 per rank on 4 GPUs); e = 2 ms, a = 4 ms as above.
ModelSpec toy_model8()
{
  ModelSpec m = toy_model();
  m.experts   = 8;
  return m;
}

// xGMI-like links of round numbers: 1 GB/s per pair each way, 1 us latency.
InstanceLayout four_gpus(int ep)
{
  InstanceLayout l;
  l.gpus  = 4;
  l.ep    = ep;
  l.links = {1e9, 1e-6};
  return l;
}

// decode_step_s as it was before multi-GPU instances (commit 00b76c1), verbatim, for the bit-for-bit check.
double old_decode_step_s(const ModelSpec& m, const Hardware& hw, const Calibration& cal, const CostModel& c, int batch,
                         const AttentionLoad& a, std::span<const uint16_t> distinct)
{
  const double bw            = hw.hbm_bandwidth_Bps * cal.decode_bw_efficiency;
  const double peak          = m.gemm_dtype == "fp8" && hw.dense_fp8_flops > 0 ? hw.dense_fp8_flops : hw.dense_flops;
  const double flops         = peak * hw.gemm_efficiency;
  const double f             = m.sliding_kv_fraction;
  const double attn          = m.kv_bytes_per_token * ((1.0 - f) * a.context_tokens + f * a.windowed_tokens);
  const double dense_memory  = m.non_expert_bytes_per_layer / bw;
  const double dense_compute = batch * m.non_expert_flops_per_token() / flops;
  double t                   = cal.step_overhead_s + m.lm_head_bytes / bw + attn / bw;
  t += m.layers * std::max(dense_memory, dense_compute);
  for (uint16_t d : distinct) {
    double memory  = d * (m.expert_bytes / bw);
    double compute = batch * m.expert_flops_per_token() / flops;
    t += c.moe_overhead_s() + std::max(memory, compute);
  }
  double always = 0;
  if (m.shared_experts > 0)
    always += m.layers * std::max(m.shared_expert_bytes / bw, batch * m.shared_expert_flops_per_token() / flops);
  if (m.dense_layers > 0)
    always += m.dense_layers * std::max(m.dense_layer_bytes / bw, batch * m.dense_layer_flops_per_token() / flops);
  return t + always;
}

}  // namespace

TEST_CASE("multi-GPU cost: a one-GPU layout is bit for bit the single-GPU decode step (toy, shared/dense, fp8)")
{
  ModelSpec plain           = toy_model8();
  ModelSpec extra           = toy_model8();  // DeepSeek-like: a shared expert, a dense layer, FP8 GEMMs
  extra.shared_experts      = 1;
  extra.shared_expert_ffn   = 200;
  extra.shared_expert_bytes = 3e8;
  extra.dense_layers        = 1;
  extra.dense_layer_bytes   = 7e8;
  extra.gemm_dtype          = "fp8";
  Hardware hw               = toy_hardware();
  hw.dense_fp8_flops        = 2e15;
  std::mt19937_64 rng(7);
  for (const ModelSpec& m : {plain, extra}) {
    CostModel c(m, hw, toy_calibration());
    InstanceLayout one;
    one.links = {1e9, 1e-6};  // links do not matter on one GPU
    for (int trial = 0; trial < 200; ++trial) {
      const int batch = int(rng() % 3000) + 1;
      std::vector<uint16_t> distinct{uint16_t(rng() % 9), uint16_t(rng() % 9)};
      AttentionLoad a;
      a.context_tokens  = double(rng() % 1000000);
      a.windowed_tokens = a.context_tokens;
      const double old  = old_decode_step_s(m, hw, toy_calibration(), c, batch, a, distinct);
      CHECK(c.decode_step(one, batch, a, distinct).seconds == old);  // exact
      CHECK(c.decode_step_s(batch, a, distinct) == old);
      std::vector<PrefillPrompt> prompts{{int(rng() % 1000) + 1, 0}, {int(rng() % 1000) + 1, 0}};
      CHECK(c.prefill_s(one, prompts, distinct) == c.prefill_s(prompts, distinct));
    }
  }
}

TEST_CASE("multi-GPU cost: TP4 + EP4 decode step by hand, all active experts on one rank is slower than spread")
{
  CostModel c(toy_model8(), toy_hardware(), toy_calibration());
  const InstanceLayout l = four_gpus(4);
  AttentionLoad a;
  a.context_tokens  = 1000;
  a.windowed_tokens = 1000;
  // Batch 4; each layer activates 2 distinct experts with 8 picks (compute negligible: 2 picks x 6e5 /
  // 5e14 = 2.4 ns); the largest GPU-pair message of the dispatch is 2 tokens x 1000 x 2 B = 4000 B.
  //   overhead 1 ms + LM head 0.2/4 + attention 2.0/4 + dense 2 x 1/4 = 1 + 0.05 + 0.5 + 0.5 = 2.05 ms
  //   all-reduce after each layer's attention: 4 x 1000 x 2 B = 8000 B over 4 ranks:
  //     2 x (1 us + 2000 / 1e9) = 6 us, 2 layers = 12 us (no MoE all-reduce: EP combines by all-to-all)
  //   all-to-all per layer: 2 x (1 us + 4000 / 1e9) = 10 us, 2 layers = 20 us
  //   spread (one active expert on ranks 0 and 1): slowest rank 4 + 2 = 6 ms per layer -> 12 ms
  //   on one rank (both on rank 0): 4 + 2 x 2 = 8 ms per layer -> 16 ms
  const std::vector<uint16_t> distinct{2, 2};
  const std::vector<uint32_t> pair{2, 2};
  const std::vector<uint16_t> spread_d{1, 1, 0, 0, 1, 1, 0, 0}, one_d{2, 0, 0, 0, 2, 0, 0, 0};
  const std::vector<uint32_t> spread_p{4, 4, 0, 0, 4, 4, 0, 0}, one_p{8, 0, 0, 0, 8, 0, 0, 0};
  const RankLoads spread{4, spread_d, spread_p, pair}, one{4, one_d, one_p, pair};
  const DecodeStepCost s = c.decode_step(l, 4, a, distinct, &spread);
  const DecodeStepCost o = c.decode_step(l, 4, a, distinct, &one);
  CHECK(s.seconds == doctest::Approx(2.05e-3 + 12e-6 + 20e-6 + 12e-3).epsilon(1e-9));
  CHECK(o.seconds == doctest::Approx(2.05e-3 + 12e-6 + 20e-6 + 16e-3).epsilon(1e-9));
  CHECK(o.seconds > s.seconds);
  CHECK(s.all_to_all_s == doctest::Approx(20e-6).epsilon(1e-9));
  // Imbalance = max / mean of the ranks' MoE times: spread 6 / ((6 + 6 + 4 + 4) / 4) = 1.2;
  // one rank 8 / ((8 + 4 + 4 + 4) / 4) = 1.6 (every layer alike).
  CHECK(s.imbalance == doctest::Approx(1.2).epsilon(1e-9));
  CHECK(o.imbalance == doctest::Approx(1.6).epsilon(1e-9));
  // An expert-parallel layout without its per-rank loads is a programming error.
  CHECK_THROWS(c.decode_step(l, 4, a, distinct));
}

TEST_CASE("multi-GPU cost: TP4 with tensor-split experts (ep 1) and a 4-GPU prefill by hand")
{
  CostModel c(toy_model8(), toy_hardware(), toy_calibration());
  AttentionLoad a;
  a.context_tokens  = 1000;
  a.windowed_tokens = 1000;
  // Each GPU reads a quarter of every active expert: layer = 4 + 2 x 2 / 4 = 5 ms; 3 distinct -> 4 + 1.5.
  //   2.05 ms (as above) + 5 + 5.5 ms MoE + 4 all-reduces (2 attention, 2 MoE) x 6 us = 12.574 ms
  const std::vector<uint16_t> distinct{2, 3};
  const DecodeStepCost s = c.decode_step(four_gpus(1), 4, a, distinct);
  CHECK(s.seconds == doctest::Approx(2.05e-3 + 10.5e-3 + 24e-6).epsilon(1e-9));
  CHECK(s.all_to_all_s == 0);
  CHECK(s.imbalance == 1);
  // Prefill: every term of the one-GPU time but the fixed costs (batch overhead 2 ms, MoE overhead
  // a = 4 ms per layer) is divided by 4, plus one all-reduce per layer of the batch's tokens:
  // 300 tokens x 1000 x 2 B = 6e5 B, 2 x (1 us + 1.5e5 / 1e9) = 302 us.
  std::vector<PrefillPrompt> prompts{{100, 0}, {200, 0}};
  const double fixed = 2e-3 + 2 * 4e-3;
  const double one   = c.prefill_s(prompts, distinct) - fixed;
  const double four  = c.prefill_s(four_gpus(4), prompts, distinct) - fixed;
  CHECK(four == doctest::Approx(one / 4 + 2 * 302e-6).epsilon(1e-9));
}

TEST_CASE("multi-GPU cost: KV capacity of an instance is gpus x HBM x fraction - one copy of the weights")
{
  const ModelSpec m = toy_model8();
  CostModel c(m, toy_hardware(), toy_calibration());
  // weights = 2 x (8 x 1e9 + 5e8) + 2e8 = 17.2e9 B
  CHECK(c.kv_capacity_bytes(0.9) == doctest::Approx(90e9 - 17.2e9));
  CHECK(c.kv_capacity_bytes(0.9, 4) == doctest::Approx(360e9 - 17.2e9));
  CHECK(instance_kv_capacity_bytes(toy_hardware(), m, 4, 0.9) == c.kv_capacity_bytes(0.9, 4));
}

TEST_CASE("multi-GPU cost: placements give every rank experts / ranks experts")
{
  for (int ranks : {2, 4, 8}) {
    std::vector<double> w(size_t(3 * 128));
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = double((i * 7919) % 101);
    for (const ExpertPlacement& p : {contiguous_placement(3, 128, ranks), random_placement(3, 128, ranks, 5),
                                     balanced_placement(w, 3, 128, ranks)})
      for (int l = 0; l < 3; ++l) {
        std::vector<int> n(size_t(ranks), 0);
        for (int e = 0; e < 128; ++e)
          ++n[size_t(p.rank(l, e))];
        CHECK(std::all_of(n.begin(), n.end(), [&](int k) { return k == 128 / ranks; }));
      }
  }
}

TEST_CASE("cost: speculative verification and the draft module's pass (toy model by hand)")
{
  Calibration cal         = toy_calibration();
  cal.step_per_sequence_s = 30e-6;
  CostModel c(toy_model(), toy_hardware(), cal);
  // 1250 sequences verifying 4 tokens each: 5000 tokens through the layers, as the 35.2 ms step of
  // 5000 above (dense compute bound, 5 ms a layer) plus the 2 ms context read, 1 + 0.2 + 2 + 10 + 10
  // + 14 = 37.2 ms; the per-sequence cost counts 1250 sequences (37.5 ms), not 5000 (150 ms).
  CHECK(c.decode_step(InstanceLayout{}, 1250, hand_context(), kHandDistinct, nullptr, 4).seconds ==
        doctest::Approx(37.2e-3 + 37.5e-3).epsilon(1e-12));
  CHECK(c.decode_step(InstanceLayout{}, 5000, hand_context(), kHandDistinct).seconds ==
        doctest::Approx(37.2e-3 + 150e-3).epsilon(1e-12));
  CHECK(c.decode_step(InstanceLayout{}, 4, hand_context(), kHandDistinct, nullptr, 1).seconds ==
        c.decode_step(InstanceLayout{}, 4, hand_context(), kHandDistinct).seconds);
  // One pass of a one-layer draft module over 4 tokens at 3 distinct experts: dense max(1 ms read,
  // 4 us) = 1 ms, one of the 2 attention layers' share of the 2 ms context read = 1 ms, a MoE layer
  // 4 + 3 x 2 = 10 ms, then the LM head 0.2 ms: 12.2 ms; two layers 2 x 12 + 0.2 = 24.2 ms.
  CHECK(c.draft_pass_s(InstanceLayout{}, 1, 4, hand_context(), 3) == doctest::Approx(12.2e-3).epsilon(1e-12));
  CHECK(c.draft_pass_s(InstanceLayout{}, 2, 4, hand_context(), 3) == doctest::Approx(24.2e-3).epsilon(1e-12));
}

namespace {

// A tiny dense draft: 2 layers of 1e8 B (0.2 ms to read; 5e7 bf16 params, 1e8 FLOPs a token), a
// tied 5e7 B embedding that is its LM head (0.1 ms; 5e7 FLOPs a logit), 1e4 B of KV a token.
ModelSpec tiny_dense_draft()
{
  return ModelSpec{.name                       = "tiny-draft",
                   .layers                     = 2,
                   .hidden                     = 100,
                   .intermediate_size          = 100,
                   .q_heads                    = 2,
                   .kv_heads                   = 1,
                   .head_dim                   = 50,
                   .non_expert_bytes_per_layer = 1e8,
                   .embedding_bytes            = 5e7,
                   .lm_head_bytes              = 5e7,
                   .kv_bytes_per_token         = 1e4,
                   .calibration                = {}};
}

}  // namespace

TEST_CASE("cost: a dense draft model's pass (tiny model by hand)")
{
  CostModel c(toy_model(), toy_hardware(), toy_calibration());
  const ModelSpec d = tiny_dense_draft();
  // 4 tokens, 4 logits, 1e6 context tokens on one GPU: each layer reads its weights (0.2 ms; 4e8
  // FLOPs are 0.8 us), the KV read 1e10 B is 20 ms, the head's read 0.1 ms: 2 x 0.2 + 20 + 0.1.
  CHECK(c.draft_model_pass_s(InstanceLayout{}, d, 4, 4, 1e6) == doctest::Approx(20.5e-3).epsilon(1e-12));
  // 10,000 tokens and logits: 1e12 FLOPs a layer (2 ms) and 5e11 in the head (1 ms): 2 x 2 + 20 + 1.
  CHECK(c.draft_model_pass_s(InstanceLayout{}, d, 10000, 10000, 1e6) == doctest::Approx(25e-3).epsilon(1e-12));
  // Four GPUs (tensor parallel, as the target): reads divided by 4, and per layer two all-reduces of
  // 4 x 100 x 2 B = 800 B, each 2 x (1 us + 200 B / 1e9 B/s) = 2.4 us: 2 x (50 + 4.8) us + 5 ms + 25 us.
  CHECK(c.draft_model_pass_s(four_gpus(1), d, 4, 4, 1e6) == doctest::Approx(109.6e-6 + 5e-3 + 25e-6).epsilon(1e-9));
}

TEST_CASE("KV capacity: a decode instance less the MTP module's or a draft model's weights and KV (by hand)")
{
  Experiment x;
  x.hardware                          = toy_hardware();
  x.model                             = toy_model();
  x.topology.decode.gpus_per_instance = 1;
  x.serving.kv_memory_fraction        = 0.9;
  // 90e9 B at fraction 0.9 less the weights 2 x (4 x 1e9 + 5e8) + 2e8 = 9.2e9: 80.8e9, with no
  // section, with k = 0 and with ngram drafts alike.
  CHECK(decode_kv_capacity_bytes(x) == 80.8e9);
  x.speculative.proposer_layers = 1;
  x.speculative.method          = SpeculativeMethod::mtp;
  CHECK(decode_kv_capacity_bytes(x) == 80.8e9);
  x.speculative.tokens = 2;
  x.speculative.method = SpeculativeMethod::ngram;
  CHECK(decode_kv_capacity_bytes(x) == 80.8e9);
  // MTP, one layer: a MoE layer 5e8 + 4 x 1e9 and the projection 2 x 1000 x 1000 x 2 B = 4.504e9 B
  // off; each token holds one more of the 2 layers' KV, 1.5e6 B where the target's is 1e6: 2/3 of
  // 76.296e9 B are the target's.
  x.speculative.method = SpeculativeMethod::mtp;
  CHECK(x.speculative.weight_bytes(x.model) == doctest::Approx(4.504e9).epsilon(1e-12));
  CHECK(x.speculative.kv_bytes_per_token(x.model) == doctest::Approx(5e5).epsilon(1e-12));
  CHECK(decode_kv_capacity_bytes(x) == doctest::Approx(76.296e9 * 2 / 3).epsilon(1e-12));
  // A draft model: its 2 x 1e8 + 5e7 B off, 1e4 B more KV a token: 80.55e9 x 1e6 / 1.01e6.
  x.speculative.method = SpeculativeMethod::draft;
  x.speculative.draft  = tiny_dense_draft();
  CHECK(decode_kv_capacity_bytes(x) == doctest::Approx(80.55e9 / 1.01).epsilon(1e-12));
}
