#include "sim/cluster/platform.hpp"

#include <string>

XBT_LOG_EXTERNAL_CATEGORY(eldr);
XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_platform, eldr, "eldr-sim platform construction");

namespace sg4 = simgrid::s4u;

namespace eldr {

Platform build_platform(sg4::Engine& engine, const ClusterSpec& spec)
{
  engine.set_config("network/model:CM02");
  // RDMA acknowledges in the NIC: no TCP-style ACK flow charged to the reverse direction.
  engine.set_config("network/crosstraffic:0");
  auto* zone = sg4::create_full_zone(spec.name);
  Platform p;
  std::vector<sg4::SplitDuplexLink*> nics;
  for (int g = 0; g < spec.gpus(); ++g) {
    // Hosts never compute in SimGrid (step times come from the cost model); speed is a placeholder.
    p.gpus.push_back(zone->create_host("gpu-" + std::to_string(g), 1e12));
    auto* nic = zone->create_split_duplex_link("nic-" + std::to_string(g), spec.nic_bandwidth_Bps);
    nic->set_latency(spec.nic_latency_s)->seal();
    nics.push_back(nic);
  }
  auto* fabric = zone->create_link("switch", spec.nic_bandwidth_Bps);
  fabric->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->set_latency(spec.switch_latency_s)->seal();

  using Dir = sg4::LinkInRoute::Direction;
  for (int a = 0; a < spec.gpus(); ++a)
    for (int b = a + 1; b < spec.gpus(); ++b) {
      std::vector<sg4::LinkInRoute> route;
      if (a / spec.gpus_per_node == b / spec.gpus_per_node) {
        auto* x = zone->create_split_duplex_link("xgmi-" + std::to_string(a) + "-" + std::to_string(b),
                                                 spec.xgmi_bandwidth_Bps);
        x->set_latency(spec.xgmi_latency_s)->seal();
        route = {sg4::LinkInRoute(x, Dir::UP)};
      } else {
        route = {sg4::LinkInRoute(nics[size_t(a)], Dir::UP), sg4::LinkInRoute(fabric),
                 sg4::LinkInRoute(nics[size_t(b)], Dir::DOWN)};
      }
      zone->add_route(p.gpus[size_t(a)]->get_netpoint(), p.gpus[size_t(b)]->get_netpoint(), nullptr, nullptr, route,
                      true);
    }
  zone->seal();
  XBT_DEBUG("platform %s: %d GPUs", spec.name.c_str(), spec.gpus());
  return p;
}

}  // namespace eldr
