#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace eldr {

// One request as the workload defines it; what happens to it is recorded elsewhere (RunRecorder).
struct Request {
  uint32_t id           = 0;
  uint16_t label        = 0;      // index into Workload::labels
  bool measured         = true;   // false for warm-up requests
  double arrival_s      = 0;
  int prompt_tokens     = 0;
  int output_tokens     = 0;      // including the first token, sampled by the prefill worker
  uint64_t prefix_hash  = 0;      // hash of the prompt's first block: prefill affinity key
  uint64_t routing_seed = 0;      // per-request stream of the expert routing source
  int32_t routing_record = -1;    // replayed traces: the request's record in the routing file
  uint32_t hash_begin   = 0;      // its prompt's block hashes: Workload::prefix_hashes[hash_begin ..
  uint32_t hash_count   = 0;      //   + hash_count), leading block first; none: a prompt nobody shares
};

struct Workload {
  std::vector<std::string> labels;
  std::vector<Request> requests;     // served, in arrival order; ids are indices
  std::vector<Request> calibration;  // never served: what routers may fit on (ids index this vector)
  // Prompt block hashes of every request (calibration and served), for prefix caching: block i's
  // hash identifies the prompt up to the end of block i (tokens [0, (i+1) x prefix_block_tokens), or
  // the whole prompt for its last, partial block), so equal hashes mean a shared prefix.
  int prefix_block_tokens = 0;
  std::vector<uint64_t> prefix_hashes;
  // Every prompt holds this many chat-template tokens (WorkloadSpec::template_*_tokens), routed as
  // template_owner()'s: the same tokens in the same context pick the same experts. The suffix's
  // context is the message, so for it this assumes that its tokens alone set its experts. Routing
  // does not depend on a token's place, so they are the prompt's first template_tokens tokens.
  int template_tokens = 0;
  const Request* template_owner() const
  {
    return template_tokens == 0 ? nullptr : !calibration.empty() ? &calibration.front()
                                                 : requests.empty()     ? nullptr
                                                                        : &requests.front();
  }
  std::span<const uint64_t> hashes(const Request& r) const { return {prefix_hashes.data() + r.hash_begin, r.hash_count}; }
};

}  // namespace eldr
