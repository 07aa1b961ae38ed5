#include "sim/cluster/simulation.hpp"
#include "sim/cluster/cluster_state.hpp"
#include "sim/cluster/decode_worker.hpp"
#include "sim/cluster/platform.hpp"
#include "sim/cluster/prefill_worker.hpp"
#include "sim/routing/router_factory.hpp"

#include <cstdio>

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_simulation, s4u, "eldr-sim simulation driver");

namespace sg4 = simgrid::s4u;

namespace eldr {

namespace {

// Issues arrivals in time order, waits for the warm-up to drain if asked, then for every request to finish.
class Driver {
public:
  Driver(ClusterState& s, bool progress) : s_(s), progress_(progress) {}
  void operator()()
  {
    const auto& reqs = s_.workload.requests;
    size_t i         = 0;
    double offset    = 0;
    for (; i < reqs.size() && !reqs[i].measured; ++i) {
      sg4::this_actor::sleep_until(reqs[i].arrival_s);
      dispatch_to_prefill(s_, reqs[i]);
    }
    const long warmup = long(i);
    if (s_.experiment.workload.drain_after_warmup)
      wait_until([&] { return s_.finished_warmup >= warmup; });
    offset                     = sg4::Engine::get_clock();
    s_.recorder.measured_start_s = offset;
    for (; i < reqs.size(); ++i) {
      sg4::this_actor::sleep_until(offset + reqs[i].arrival_s);
      dispatch_to_prefill(s_, reqs[i]);
      report(i);
    }
    wait_until([&] { return s_.finished >= long(reqs.size()); });
    s_.recorder.end_s = sg4::Engine::get_clock();
    if (progress_)
      std::fprintf(stderr, "\r%-60s\r", "");
  }

private:
  template <class Pred> void wait_until(Pred done)
  {
    std::unique_lock<sg4::Mutex> lock(*s_.done_mutex);
    while (!done()) {
      s_.done_cv->wait(lock);
      report(0);
    }
  }
  void report(size_t)
  {
    if (!progress_ || ++calls_ % 2000 != 0)
      return;
    std::fprintf(stderr, "\r  simulated %.1f s, %ld / %zu requests finished", sg4::Engine::get_clock(), s_.finished,
                 s_.workload.requests.size());
  }
  ClusterState& s_;
  bool progress_;
  long calls_ = 0;
};

}  // namespace

RunRecorder run_simulation(const Experiment& x, const Workload& w, const ExpertRoutingSource& routing,
                           const SimulationOptions& opt)
{
  int argc           = 2;
  char arg0[]        = "eldrsim";
  char arg1[]        = "--log=root.thres:warning";
  char* argv[]       = {arg0, arg1, nullptr};
  sg4::Engine engine(&argc, argv);
  Platform platform = build_platform(engine, x.cluster);

  CostModel cost(x.model, x.hardware, x.calibration);
  auto router = make_decode_router(x.router, RouterSetup{x.topology.decode.instances, x.seed, &w, &routing, &x});
  RunRecorder recorder(w.requests.size(), x.topology.decode.instances);
  ClusterState s(x, w, cost, routing, *router, recorder);

  for (int i = 0; i < x.topology.prefill.instances; ++i) {
    sg4::Host* host = platform.gpus[size_t(x.topology.prefill.gpus[size_t(i)].front())];
    s.prefill_hosts.push_back(host);
    sg4::Actor::create("prefill-" + std::to_string(i), host, PrefillWorker(s, i))->daemonize();
  }
  for (int i = 0; i < x.topology.decode.instances; ++i) {
    sg4::Host* host = platform.gpus[size_t(x.topology.decode.gpus[size_t(i)].front())];
    s.decode_hosts.push_back(host);
    s.kv_doorbells.push_back(sg4::Mailbox::by_name("kv-doorbell-" + std::to_string(i)));
    sg4::Actor::create("kv-receiver-" + std::to_string(i), host, KvReceiver(s, i))->daemonize();
    sg4::Actor::create("decode-" + std::to_string(i), host, DecodeWorker(s, i, opt.decode_block_steps))->daemonize();
  }
  sg4::Actor::create("driver", s.prefill_hosts.front(), Driver(s, opt.progress));
  engine.run();
  recorder.router_stats = router->stats();
  return recorder;
}

}  // namespace eldr
