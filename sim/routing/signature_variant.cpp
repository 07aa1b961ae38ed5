#include "sim/routing/signature_variant.hpp"

namespace eldr {

std::string_view to_string(SignatureVariant v)
{
  switch (v) {
  case SignatureVariant::counts:
    return "counts";
  case SignatureVariant::counts_idf:
    return "counts_idf";
  case SignatureVariant::sqrt_counts:
    return "sqrt_counts";
  case SignatureVariant::binary:
    return "binary";
  case SignatureVariant::gate_prob:
    return "gate_prob";
  case SignatureVariant::gate_score:
    return "gate_score";
  }
  return "?";
}

std::optional<SignatureVariant> parse_signature_variant(std::string_view name)
{
  for (SignatureVariant v : kAllSignatureVariants)
    if (to_string(v) == name)
      return v;
  return std::nullopt;
}

ProfileFields fields_for(SignatureVariant v)
{
  ProfileFields f;
  f.gate_prob  = v == SignatureVariant::gate_prob;
  f.gate_score = v == SignatureVariant::gate_score;
  return f;
}

bool gates_support(const GateSource* gates, SignatureVariant v)
{
  if (v == SignatureVariant::gate_prob)
    return gates != nullptr;
  if (v == SignatureVariant::gate_score)
    return gates != nullptr && gates->has_scores();
  return true;
}

}  // namespace eldr
