#pragma once
#include "sim/cluster/cluster_state.hpp"

namespace eldr {

// The front-end proxy's routing step, for a decode router with per-request work (ELDR: reading a
// prompt's routed experts into its signature and deciding). Prefilled prompts reach it in the order
// their batches finish; it handles them one at a time (one Python process), each for the router's
// routing_overhead_s(), and then hands each off. The prefill GPU does not wait for it: it goes on with
// its next batch.
class RoutingProxy {
 public:
  explicit RoutingProxy(ClusterState& state) : s_(state) {}
  void operator()();

 private:
  ClusterState& s_;
};

}  // namespace eldr
