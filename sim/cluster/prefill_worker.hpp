#pragma once
#include "sim/cluster/cluster_state.hpp"

namespace eldr {

// One prefill instance: takes queued prompts FIFO up to the token budget, prefills them as one batch,
// samples each one's first token, asks the decode router where it goes and ships its KV cache there.
class PrefillWorker {
public:
  PrefillWorker(ClusterState& state, int index) : s_(state), index_(index) {}
  void operator()();

private:
  double run_batch(const std::vector<const Request*>& batch);
  void hand_off(const Request& r);
  ClusterState& s_;
  int index_;
};

}  // namespace eldr
