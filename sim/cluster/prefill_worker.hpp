#pragma once
#include "sim/cluster/cluster_state.hpp"
#include "sim/gating/expected_union.hpp"

namespace eldr {

// One prefill instance: takes queued prompts FIFO up to the token budget, prefills them as one batch,
// samples each one's first token and hands it to the decode router, which picks the decode worker its
// KV cache goes to (sim/cluster/hand_off.hpp).
// With prefix caching, a prompt's leading blocks found in the worker's block cache are not computed
// (only the tail is, attending to the cached prefix) and its blocks stay referenced until its KV
// cache has reached the decode worker.
class PrefillWorker {
 public:
  PrefillWorker(ClusterState& state, int index) : s_(state), index_(index) {}
  void operator()();

 private:
  // Takes the next batch off the queue (empty: the queue's head does not fit in KV memory yet).
  void take_batch();
  // Reserves r's KV blocks; false if they do not fit now.
  bool reserve_blocks(const Request& r, int& cached_tokens);
  double run_batch();
  // Distinct experts per layer of the batch's computed prompt tokens into `distinct`.
  void sampled_distinct(std::vector<double>& distinct) const;
  void expected_distinct(std::vector<double>& distinct);
  ClusterState& s_;
  int index_;
  std::vector<PrefilledPrompt> batch_;
  std::vector<uint64_t> batch_new_;  // blocks this batch computes (not hits for a later prompt in it)
  PromptLogCache log_cache_;         // expected unions: the logs of the chat template's owner and shared prefixes'
};

// Releases what the prefill side holds of r once its KV cache has been sent.
void release_prefill_blocks(ClusterState& s, const Request& r);

}  // namespace eldr
