#include "sim/cluster/simulation.hpp"
#include "sim/cluster/cluster_state.hpp"
#include "sim/cluster/decode_worker.hpp"
#include "sim/cluster/platform.hpp"
#include "sim/cluster/prefill_worker.hpp"
#include "sim/cluster/routing_proxy.hpp"
#include "sim/cluster/sim_log.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/cost/cluster_placement.hpp"
#include "sim/routing/registry/router_registry.hpp"

#include <cmath>
#include <cstdio>

XBT_LOG_EXTERNAL_CATEGORY(eldr);
XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_simulation, eldr, "eldr-sim simulation driver");

namespace sg4 = simgrid::s4u;

namespace eldr {

namespace {

// Issues arrivals in time order, waits for the warm-up to drain if asked, then for every request to finish.
class Driver {
 public:
  Driver(ClusterState& s, bool progress, std::function<void()> at_measured_start)
      : s_(s), progress_(progress), at_measured_start_(std::move(at_measured_start))
  {
  }
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
    if (s_.experiment.workload.drain_after_warmup) {
      wait_until([&] { return s_.finished_warmup >= warmup; });
      if (at_measured_start_) {
        at_measured_start_();
        s_.recorder.keep_requests(reqs.size());
      }
    }
    offset = sg4::Engine::get_clock();
    XBT_VERB("measured phase starts: %ld warm-up requests issued, %ld finished", warmup, s_.finished_warmup);
    s_.recorder.measured_start_s = offset;
    const double horizon = s_.experiment.workload.horizon_s > 0 ? offset + s_.experiment.workload.horizon_s : INFINITY;
    for (; i < reqs.size() && offset + reqs[i].arrival_s <= horizon; ++i) {
      sg4::this_actor::sleep_until(offset + reqs[i].arrival_s);
      dispatch_to_prefill(s_, reqs[i]);
      report(i);
    }
    wait_until([&] { return s_.finished >= long(reqs.size()) || sg4::Engine::get_clock() >= horizon; }, horizon);
    s_.recorder.end_s = sg4::Engine::get_clock();
    XBT_VERB("run ends: %ld of %zu requests finished", s_.finished, reqs.size());
    if (s_.finished < long(reqs.size()))
      record_leftovers();
    if (progress_)
      std::fprintf(stderr, "\r%-60s\r", "");
  }

 private:
  template <class Pred> void wait_until(Pred done, double deadline = INFINITY)
  {
    std::unique_lock<sg4::Mutex> lock(*s_.done_mutex);
    while (!done()) {
      if (std::isinf(deadline))
        s_.done_cv->wait(lock);
      else
        s_.done_cv->wait_until(lock, deadline);
      report(0);
    }
  }
  // The run stops at its horizon: where each unfinished request is (the daemons die with the driver).
  void record_leftovers()
  {
    RunRecorder& rec       = s_.recorder;
    rec.stopped_at_horizon = true;
    for (const Request& r : s_.workload.requests) {
      const RequestRecord& q = rec.request(r.id);
      if (q.finish_count > 0)
        continue;
      if (std::isnan(q.arrival_s))
        ++rec.left_unarrived;
      else if (std::isnan(q.first_token_s))
        ++rec.left_in_prefill;
      else if (std::isnan(q.kv_end_s))
        ++rec.left_in_transfer;
      else if (std::isnan(q.decode_admit_s))
        ++rec.left_waiting;
      else
        ++rec.left_decoding;
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
  std::function<void()> at_measured_start_;
  long calls_ = 0;
};

}  // namespace

RunRecorder run_simulation(const Experiment& x, const Workload& w, const GatingSource& routing,
                           const SimulationOptions& opt)
{
  std::unique_ptr<sg4::Engine> engine_owner;
  {
    const InterruptsHeld held;                     // no Ctrl-C reaches SimGrid's own handler in between
    engine_owner = make_engine(opt.log, opt.cfg);  // logs, SimGrid options
    install_interrupt_handler();                   // over SimGrid's: one line, exit 128 + N
  }
  sg4::Engine& engine = *engine_owner;
  Platform platform   = build_platform(engine, x.cluster);

  CostModel cost(x.model, x.hardware, x.calibration);
  auto router = make_decode_router(x.router, RouterSetup{x.topology.decode.instances, x.seed, &w, &routing, &x});
  RunRecorder recorder(w.requests.size(), x.topology.decode.instances);
  recorder.decode_expert_parallel = x.topology.decode.expert_parallel;
  recorder.expert_union           = std::string(to_string(x.workload.expert_union));
  recorder.log_decisions          = x.decision_log;
  if (x.decision_log)
    router->log_decisions_to(&recorder.decision_detail);
  recorder.router_follows_drift = router->follows_drift();
  recorder.signature_cache      = router->profiles_cached_blocks();
  ClusterState s(x, w, cost, routing, *router, recorder);
  // The prefill router when the config composes one (else the front end's hash ring).
  auto prefill_router   = make_prefill_router(RouterSetup{x.topology.prefill.instances, x.seed, &w, &routing, &x});
  s.prefill_composition = prefill_router.get();

  // Expert-parallel decode instances: each one's expert placement, as rank masks.
  const ClusterPlacements placements = decode_placements(x, w, routing, *router, s.gates.get());
  for (const ExpertPlacement& p : placements.placements)
    s.decode_rank_masks.push_back(p.rank_masks(routing.shape().words_per_layer));
  recorder.placement_calibration_requests = placements.calibration_requests;
  auto gpu_hosts                          = [&](const std::vector<int>& gpus) {
    std::vector<sg4::Host*> hosts;
    for (int g : gpus)
      hosts.push_back(platform.gpus[size_t(g)]);
    return hosts;
  };

  for (int i = 0; i < x.topology.prefill.instances; ++i) {
    sg4::Host* host = platform.gpus[size_t(x.topology.prefill.gpus[size_t(i)].front())];
    s.prefill_hosts.push_back(host);
    s.prefill_gpu_hosts.push_back(gpu_hosts(x.topology.prefill.gpus[size_t(i)]));
    sg4::Actor::create("prefill-" + std::to_string(i), host, PrefillWorker(s, i))->daemonize();
  }
  for (int i = 0; i < x.topology.decode.instances; ++i) {
    sg4::Host* host = platform.gpus[size_t(x.topology.decode.gpus[size_t(i)].front())];
    s.decode_hosts.push_back(host);
    s.decode_gpu_hosts.push_back(gpu_hosts(x.topology.decode.gpus[size_t(i)]));
    s.kv_doorbells.push_back(sg4::Mailbox::by_name("kv-doorbell-" + std::to_string(i)));
    sg4::Actor::create("kv-receiver-" + std::to_string(i), host, KvReceiver(s, i))->daemonize();
    sg4::Actor::create("decode-" + std::to_string(i), host, DecodeWorker(s, i, opt.decode_block_steps))->daemonize();
  }
  if (router->routing_overhead_s() > 0)
    sg4::Actor::create("routing-proxy", s.prefill_hosts.front(), RoutingProxy(s))->daemonize();
  sg4::Actor::create("driver", s.prefill_hosts.front(), Driver(s, opt.progress, opt.at_measured_start));
  engine.run();
  recorder.router_stats  = router->stats();
  recorder.refit_times_s = router->refit_times();
  router->log_decisions_to(nullptr);
  if (x.serving.prefix_cache) {
    auto counters = [](const BlockCache& c) {
      const BlockCacheStats& st = c.stats();
      return CacheCounters{c.capacity(), st.lookups, st.hit_blocks, st.missed_blocks, st.evictions, st.peak_used};
    };
    for (const BlockCache& c : s.prefill_caches)
      recorder.prefill_caches.push_back(counters(c));
    if (x.serving.decode_prefix_cache)
      for (const BlockCache& c : s.decode_caches)
        recorder.decode_caches.push_back(counters(c));
  }
  return recorder;
}

}  // namespace eldr
