#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace eldr {

// Request::label of the chat template's own tokens (Workload::template_request): no workload label.
inline constexpr uint16_t kTemplateLabel = 0xffff;

// One request as the workload defines it; what happens to it is recorded elsewhere (RunRecorder).
struct Request {
  uint32_t id            = 0;
  uint16_t label         = 0;     // index into Workload::labels
  bool measured          = true;  // false for warm-up requests
  double arrival_s       = 0;
  int prompt_tokens      = 0;
  int output_tokens      = 0;   // including the first token, sampled by the prefill worker
  uint64_t prefix_hash   = 0;   // hash of the prompt's first block: prefill affinity key
  uint64_t routing_seed  = 0;   // per-request stream of the expert routing source
  int32_t routing_record = -1;  // replayed traces: the request's record in the routing file
  uint32_t hash_begin    = 0;   // its prompt's block hashes: Workload::prefix_hashes[hash_begin ..
  uint32_t hash_count    = 0;   //   + hash_count), leading block first; none: a prompt nobody shares
};

struct Workload {
  std::vector<std::string> labels;
  std::vector<bool> minor_labels;    // per label: it gathers labels too small for a pool (TaskLabel::minor)
  std::vector<Request> requests;     // served, in arrival order; ids are indices
  std::vector<Request> calibration;  // never served: what routers may fit on (ids index this vector)
  // Prompt block hashes of every request (calibration and served), for prefix caching: block i's
  // hash identifies the prompt up to the end of block i (tokens [0, (i+1) x prefix_block_tokens), or
  // the whole prompt for its last, partial block), so equal hashes mean a shared prefix.
  int prefix_block_tokens = 0;
  std::vector<uint64_t> prefix_hashes;
  // Every prompt holds this many chat-template tokens (WorkloadSpec::template_*_tokens), routed as
  // template_request's: the same tokens pick the same experts in every prompt, whatever its message
  // or label. For the leading ones that is exact (a causal model's token sees only the tokens before
  // it); for the suffix, which follows the message, it assumes a token's identity sets its experts,
  // as MoE routers largely do. Routing does not depend on a token's place, so they are the prompt's
  // first template_tokens tokens.
  int template_tokens = 0;
  // The template's content: label kTemplateLabel (a routing source gives it experts of its own),
  // prompt_tokens = template_tokens. Shared, so that pointers to it survive copies and moves.
  std::shared_ptr<const Request> template_request;
  const Request* template_owner() const { return template_tokens == 0 ? nullptr : template_request.get(); }
  std::span<const uint64_t> hashes(const Request& r) const
  {
    return {prefix_hashes.data() + r.hash_begin, r.hash_count};
  }
};

}  // namespace eldr
