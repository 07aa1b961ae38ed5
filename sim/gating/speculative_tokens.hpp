#pragma once
// Speculative decoding's tokens (docs/speculative.md). A decode step verifies the window of k + 1
// consecutive tokens of each sequence (its last token and k drafts) and emits 1 + a of them.
//
// Experts: consecutive tokens of one sequence share experts more often than two tokens of its law
// drawn independently (real routing in token order: analysis/expert_persistence.py). Model: a token
// keeps each expert of the token before it with probability rho (the persistence) and picks an
// expert that token lacks with f = p (1 - rho) / (1 - p), which keeps every token's picks at p. The
// window then misses expert e with probability (1 - p) (1 - f)^k.
//
// Acceptance: draft i is accepted with probability alpha_i once draft i - 1 was, so
// P(a >= i) = alpha_1 ... alpha_i; one uniform per sequence and step from a counter-based stream
// (the run seed, the request, the tokens it had) decides a.
#include "sim/gating/gating_source.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace eldr {

// P(expert e in none of window + 1 consecutive tokens) for a per-token pick probability p.
double window_miss(double p, int window, double persistence);

// `law` as the law of a window of `window` + 1 consecutive tokens (window 0: `law` itself).
TokenLaw window_law(TokenLaw law, int window, double persistence);

// The masks (source.shape().words() words each, appended to `out`) of tokens position .. position +
// window of r: the first as the source gives it; each later one, where the source has token laws
// (its tokens independent given the request), keeps each expert of the one before it with
// probability `persistence` and adds each expert of its own record that the one before lacks with
// probability (1 - persistence) / (1 - p), capped at 1, and each of the `hot` cells (hot_cells: where
// f > p, which one record cannot reach) that neither picked with (f - p) / (1 - p): the model above,
// sampled. Sources without laws replay real tokens in order, whose persistence is their own: their
// masks as given. `seed` names the stream of the keep and add draws.
void window_masks(const GatingSource& source, const Request& r, int position, int window, double persistence,
                  uint64_t seed, std::span<const uint32_t> hot, std::vector<uint64_t>& out);

// The (layer, expert) cells of `law` with p > persistence, in order: where a token's record alone
// picks an expert less often than the model's f = p (1 - persistence) / (1 - p). Once per request.
std::vector<uint32_t> hot_cells(const TokenLaw& law, size_t cells, double persistence);

// The drafts accepted in the step that starts with `generated` tokens of request `request` (0 ..
// acceptance.size()), drawn from stream `seed`.
int accepted_drafts(uint64_t seed, uint32_t request, int generated, std::span<const double> acceptance);

// The mean of 1 + a: 1 + sum_i P(a >= i).
double expected_emitted(std::span<const double> acceptance);

}  // namespace eldr
