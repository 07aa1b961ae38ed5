#include "sim/config/cluster_spec.hpp"
#include "sim/common/json_reader.hpp"

namespace eldr {

ClusterSpec read_cluster(JsonReader& r)
{
  ClusterSpec c;
  c.name               = r.require_string("name");
  c.hardware           = r.require_string("hardware");
  c.nodes              = int(r.require_integer("nodes", 1, 100000));
  c.gpus_per_node      = int(r.require_integer("gpus_per_node", 1, 1024));
  c.nic_bandwidth_Bps  = r.require_number("nic_bandwidth_Gbps", 1e-3, 1e6) * 1e9 / 8;
  c.nic_latency_s      = r.require_number("nic_latency_us", 0, 1e6) * 1e-6;
  c.switch_latency_s   = r.require_number("switch_latency_us", 0, 1e6) * 1e-6;
  c.xgmi_bandwidth_Bps = r.require_number("xgmi_bandwidth_GBps", 1e-3, 1e6) * 1e9;
  c.xgmi_latency_s     = r.require_number("xgmi_latency_us", 0, 1e6) * 1e-6;
  r.ignore("source");
  r.ignore("notes");
  r.finish();
  return c;
}

ClusterSpec load_cluster(const std::string& path)
{
  Json j = load_json_file(path);
  JsonReader r(j, path);
  return read_cluster(r);
}

}  // namespace eldr
