#pragma once
// ELDR's signature variants: how a prompt profile's cell becomes a signature value (eldr/signature.hpp).
#include "sim/gating/gate_source.hpp"
#include "sim/gating/prompt_profile.hpp"

#include <optional>
#include <string_view>

namespace eldr {

// The value of a cell (l, e) of a profile with count c: c; c x idf[l][e]; sqrt(c); 1 if c > 0 else 0;
// the summed gate probability; the summed raw gate score.
enum class SignatureVariant { counts, counts_idf, sqrt_counts, binary, gate_prob, gate_score };

inline constexpr SignatureVariant kDefaultSignatureVariant = SignatureVariant::counts_idf;
inline constexpr SignatureVariant kAllSignatureVariants[]  = {
     SignatureVariant::counts, SignatureVariant::counts_idf, SignatureVariant::sqrt_counts,
     SignatureVariant::binary, SignatureVariant::gate_prob,  SignatureVariant::gate_score};

// "counts", "counts_idf", "sqrt_counts", "binary", "gate_prob", "gate_score".
std::string_view to_string(SignatureVariant v);
std::optional<SignatureVariant> parse_signature_variant(std::string_view name);

// What the signature variant `v` needs of a prompt profile.
ProfileFields fields_for(SignatureVariant v);

// Whether signatures of `v` can be built with `gates` (nullptr = no gate source): counts-based
// variants always; gate_prob needs a gate source; gate_score one with scores.
bool gates_support(const GateSource* gates, SignatureVariant v);

}  // namespace eldr
