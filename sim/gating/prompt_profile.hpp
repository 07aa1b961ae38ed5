#pragma once
// A request's prompt routing as per (layer, expert) activation counts and gate sums: what ELDR's
// signatures are built from (sim/routing/eldr/signature.hpp). All [layer][expert] arrays are layer-major.
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/workload/request.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace eldr {

// Which optional sums a profile gathers (counts are always gathered).
struct ProfileFields {
  bool gate_prob  = false;
  bool gate_score = false;
};

// Activations of a request's prompt tokens, [layer][expert].
struct PromptProfile {
  int layers  = 0;
  int experts = 0;
  std::vector<uint16_t> counts;   // prompt tokens that picked (l, e); at most 65535 (more throws)
  std::vector<float> gate_prob;   // sum of their gate probabilities; empty when not gathered
  std::vector<float> gate_score;  // sum of their raw gate scores; empty when not gathered
};

// An all-zero profile of `shape` with the requested sums allocated.
PromptProfile empty_profile(const GatingShape& shape, ProfileFields fields = {});

// Adds tokens [begin, end) of `r` to `into` (counts, and the gate sums that `into` has allocated, read
// from `gates`). Token ranges of one request add up: a prompt's profile is the sum of its KV blocks'.
// `only_layers` (empty: all) restricts the work to those layers, the others' cells are left alone: a
// router needs only its mask's layers, and counting costs in proportion to the layers counted
// (~95 ns a token for Qwen3-30B-A3B's 48 layers with AVX-512BW). Throws std::invalid_argument if gate
// sums are allocated but `gates` cannot supply them or a layer is out of range, and
// std::overflow_error if a count would exceed 65535.
void add_tokens(const GatingSource& routing, const Request& r, int begin, int end, PromptProfile& into,
                const GateSource* gates = nullptr, std::span<const int> only_layers = {});

// The profile of r's prompt, tokens 0 .. prompt_tokens - 1 (on `only_layers`, as add_tokens).
PromptProfile count_prompt(const GatingSource& routing, const Request& r, ProfileFields fields = {},
                           const GateSource* gates = nullptr, std::span<const int> only_layers = {});

// Cellwise sum (e.g. cached KV-block profiles): same shape; gate sums present in `part` must be
// present in `into`.
void add_profile(PromptProfile& into, const PromptProfile& part);

// Decode profile [layer][expert]: activation counts over the output tokens that run through the
// model, positions P .. P+O-2 (the last output token is only sampled).
std::vector<uint16_t> count_decode(const GatingSource& routing, const Request& r);

// Lower-level: adds one token's masks (GatingShape layout) to [layer][expert] counts, bit by bit.
void add_mask_counts(std::span<const uint64_t> masks, const GatingShape& shape, std::span<uint16_t> counts);

namespace detail {
// The counting kernels behind add_tokens, for tests and benchmarks: 0 = scalar (add_mask_counts),
// 1 = AVX2, 2 = AVX-512BW byte lanes, -1 = the best the CPU has (what add_tokens uses for 8 tokens or
// more). Adds `tokens` to `counts`; false (nothing done) when the CPU lacks the kernel.
bool count_masks_with(int kernel, std::span<const std::span<const uint64_t>> tokens, const GatingShape& shape,
                      std::span<uint16_t> counts);
// The same for distinct masks with their multiplicities (each at most 65535 tokens), on the layers
// `only_layers` (all when empty), as add_tokens counts a pooled source's records: the SIMD kernels keep
// their byte counters in registers across masks.
bool count_mask_counts_with(int kernel, std::span<const MaskCount> masks, const GatingShape& shape,
                            std::span<uint16_t> counts, std::span<const int> only_layers = {});
}  // namespace detail

}  // namespace eldr
