#pragma once
// Which configuration of its MoE kernel a layer runs, by vLLM's own rules (docs/calibration.md,
// "Kernel configurations"): a decode batch is padded to a captured graph size, and the fused-MoE
// kernel picks its tile configuration by that padded token count.
#include "sim/config/model_spec.hpp"

namespace eldr {

// The token count a decode step of `batch` sequences runs its kernels at: vLLM captures decode graphs
// at 1, 2, 4, every multiple of 8 up to 256 and every multiple of 16 up to 512
// (vllm/config/vllm.py, _set_cudagraph_sizes, with max_num_seqs >= 256); a step runs the graph of the
// next size up. Larger batches run eagerly, unpadded.
int decode_graph_tokens(int batch);

// The fused-MoE kernel's default bf16 configurations (vllm/model_executor/layers/fused_moe/,
// get_default_config, the rule of February 2026; no tuned file exists for the testbed's shapes), in
// order of token count M: BLOCK_SIZE_M 16 / N 64 / K 128 up to M = 32, M 32 / N 64 / K 128 up to 64,
// M 32 / N 128 / K 64 up to 96, M 64 / N 128 / K 64 beyond (the rule's larger-M tiles, above 512
// tokens, only prefill batches reach; they are not told apart here). Indexes kFusedMoeConfigNames.
int fused_moe_config(double tokens);

}  // namespace eldr
