#pragma once
// The machine room: nodes of GPUs, one NIC per GPU into a non-blocking switch, and a fully
// connected intra-node fabric (xGMI). From a file under configs/cluster/.
#include <string>

namespace eldr {

class JsonReader;

struct ClusterSpec {
  std::string name;
  std::string hardware;  // a file under models/hardware/
  int nodes                 = 0;
  int gpus_per_node         = 0;
  double nic_bandwidth_Bps  = 0;  // per GPU NIC, each direction
  double nic_latency_s      = 0;  // per NIC link
  double switch_latency_s   = 0;
  double xgmi_bandwidth_Bps = 0;  // per GPU pair link, each direction
  double xgmi_latency_s     = 0;

  int gpus() const { return nodes * gpus_per_node; }
};

ClusterSpec read_cluster(JsonReader& r);
ClusterSpec load_cluster(const std::string& path);

}  // namespace eldr
