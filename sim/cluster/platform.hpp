#pragma once
// The SimGrid platform of a ClusterSpec: one host per GPU; one split-duplex NIC link per GPU into a
// FATPIPE switch (non-blocking: each NIC is its own bottleneck); one split-duplex xGMI link per GPU
// pair inside a node. Built with the NetZone API in one full zone (a star layout per node would
// merge a node's NICs into one pipe).
#include "sim/config/cluster_spec.hpp"

#include <simgrid/s4u.hpp>

#include <vector>

namespace eldr {

struct Platform {
  std::vector<simgrid::s4u::Host*> gpus;  // by global GPU id (node * gpus_per_node + local id)
};

// Must be called once, on a fresh Engine; sets the CM02 network model first (the default LV08 inflates
// small-message latency about 13x on this topology).
Platform build_platform(simgrid::s4u::Engine& engine, const ClusterSpec& spec);

}  // namespace eldr
