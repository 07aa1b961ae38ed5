#pragma once
#include "sim/cluster/cluster_state.hpp"

namespace eldr {

// The first token of a prefilled prompt leaves now: the decode router picks its decode worker and its
// KV cache starts towards it (the blocks the decode worker already holds stay behind).
void hand_off(ClusterState& s, const PrefilledPrompt& p);

}  // namespace eldr
