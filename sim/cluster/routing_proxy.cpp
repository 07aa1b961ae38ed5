#include "sim/cluster/routing_proxy.hpp"
#include "sim/cluster/hand_off.hpp"

XBT_LOG_EXTERNAL_CATEGORY(eldr_routing);

namespace sg4 = simgrid::s4u;

namespace eldr {

void RoutingProxy::operator()()
{
  SignalQueue<PrefilledPrompt>& queue = s_.routing_queue;
  const double per_request            = s_.decode_router.routing_overhead_s();
  while (true) {
    queue.wait_nonempty();
    const PrefilledPrompt p = queue.items.front();
    queue.items.pop_front();
    XBT_CVERB(eldr_routing, "request %u: the routing proxy takes it (%zu behind it)", p.request->id,
              queue.items.size());
    sg4::this_actor::sleep_for(per_request);
    hand_off(s_, p);
  }
}

}  // namespace eldr
