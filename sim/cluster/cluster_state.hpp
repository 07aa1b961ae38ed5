#pragma once
// What the actors of one simulation share. SimGrid runs one actor at a time, so plain counters and
// queues are safe; condition variables only put idle actors to sleep.
#include "sim/cache/block_cache.hpp"
#include "sim/config/experiment.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/gating/gating_source.hpp"
#include "sim/metrics/run_recorder.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/prefill_router.hpp"
#include "sim/workload/request.hpp"

#include <simgrid/s4u.hpp>

#include <deque>
#include <memory>
#include <vector>

namespace eldr {

// A prefill worker's queue. Each mutex and condition-variable call is a SimGrid simcall (a trip
// through the kernel), so the worker records when it sleeps, KV-memory releases wake it only then, and
// a worker with work skips the lock.
struct WorkQueue {
  std::deque<const Request*> items;
  simgrid::s4u::MutexPtr mutex             = simgrid::s4u::Mutex::create();
  simgrid::s4u::ConditionVariablePtr ready = simgrid::s4u::ConditionVariable::create();
  bool sleeping                            = false;  // the consumer waits on `ready`

  // The driver's push notifies even when nobody waits: a simcall lets the other actors of the instant
  // run, and a burst of arrivals at one instant (trace timestamps) interleaves with the prefill workers
  // through these, so skipping them would change which of the burst a batch takes.
  void push(const Request* r)
  {
    items.push_back(r);
    ready->notify_one();
  }
  // What notify_one() would do: nothing unless the consumer waits.
  void wake()
  {
    if (sleeping)
      ready->notify_one();
  }
  // Blocks while empty.
  void wait_nonempty()
  {
    if (!items.empty())
      return;
    std::unique_lock<simgrid::s4u::Mutex> lock(*mutex);
    sleeping = true;
    ready->wait(lock, [this] { return !items.empty(); });
    sleeping = false;
  }
};

// A queue with one consumer that sleeps on a semaphore, released only while it sleeps, at most once a
// sleep: one simcall a sleep and one a wake; a condition variable adds a mutex lock and unlock around
// each wait. A decode worker's arrivals (KV received, waiting for admission) and the routing proxy's
// prefilled prompts are such queues.
template <class Item> struct SignalQueue {
  std::deque<Item> items;
  simgrid::s4u::SemaphorePtr bell = simgrid::s4u::Semaphore::create(0);
  bool sleeping                   = false;  // the consumer sleeps on `bell` and no push has released it yet

  void push(Item item)
  {
    items.push_back(item);
    if (sleeping) {
      sleeping = false;
      bell->release();
    }
  }
  // Sleeps until a push, or at most `timeout` seconds (negative: no limit); true when a push woke it.
  bool sleep(double timeout)
  {
    sleeping       = true;
    bool timed_out = false;
    if (timeout < 0)
      bell->acquire();
    else
      timed_out = bell->acquire_timeout(timeout);
    if (timed_out && !sleeping)
      bell->acquire();  // a push at the instant of the timeout released it: take that back
    sleeping = false;
    return !timed_out;
  }
  void wait_nonempty()
  {
    while (items.empty())
      sleep(-1);
  }
};
using ArrivalQueue = SignalQueue<const Request*>;

// A prompt whose prefill has finished, on its way to the decode router.
struct PrefilledPrompt {
  const Request* request;
  int cached_tokens;   // leading tokens reused from the prefill worker's block cache
  int prefill_worker;  // where its KV cache is
};

// The layout of a group's instances: its GPU count and expert-parallel degree over the node's xGMI links.
inline InstanceLayout instance_layout(const InstanceGroup& g, const ClusterSpec& c)
{
  InstanceLayout l;
  l.gpus  = g.gpus_per_instance;
  l.ep    = g.expert_parallel;
  l.links = {c.xgmi_bandwidth_Bps, c.xgmi_latency_s};
  return l;
}

struct ClusterState {
  ClusterState(const Experiment& x, const Workload& w, const CostModel& c, const GatingSource& src,
               DecodeRouter& router, RunRecorder& rec)
      : experiment(x), workload(w), cost(c), routing(src), decode_router(router),
        prefill_router(x.topology.prefill.instances, x.serving.prefill_hash_vnodes, x.serving.prefill_load_factor),
        recorder(rec), gates(make_gate_source(src)), prefill_queues(size_t(x.topology.prefill.instances)),
        decode_arrivals(size_t(x.topology.decode.instances)),
        prefill_in_flight(size_t(x.topology.prefill.instances), 0),
        decode_in_flight(size_t(x.topology.decode.instances), 0), kv_transfers(w.requests.size()),
        kv_flows_pending(w.requests.size(), 0), prefill_layout(instance_layout(x.topology.prefill, x.cluster)),
        decode_layout(instance_layout(x.topology.decode, x.cluster)), kv_block_tokens(x.model.kv_block_tokens),
        kv_block_bytes(c.kv_bytes(x.model.kv_block_tokens)), block_keys(x.serving.prefix_cache ? w.requests.size() : 0)
  {
    // KV memory in whole blocks, the unit vLLM allocates; prefill workers have a cache only when
    // prefix caching is on (otherwise their KV lives just for one batch and its transfer).
    // An instance of g GPUs holds g x the KV memory next to one copy of the weights.
    auto blocks = [&](const InstanceGroup& g) {
      return long(c.kv_capacity_bytes(x.serving.kv_memory_fraction, g.gpus_per_instance) / kv_block_bytes);
    };
    if (x.serving.prefix_cache)
      prefill_caches.assign(size_t(x.topology.prefill.instances), BlockCache(blocks(x.topology.prefill)));
    prefill_releases.assign(size_t(x.topology.prefill.instances), 0);
    // Decode instances also hold eplb's redundant experts and a speculative proposer's weights and
    // KV (decode_kv_capacity_bytes: none without them).
    const long decode_blocks = long(decode_kv_capacity_bytes(x) / kv_block_bytes);
    decode_caches.assign(size_t(x.topology.decode.instances), BlockCache(decode_blocks));
  }
  bool caches_prefixes() const { return experiment.serving.prefix_cache; }
  bool decode_caches_prefixes() const
  {
    return experiment.serving.prefix_cache && experiment.serving.decode_prefix_cache;
  }

  const Experiment& experiment;
  const Workload& workload;
  const CostModel& cost;
  const GatingSource& routing;
  DecodeRouter& decode_router;
  PrefillRouter prefill_router;
  DecodeRouter* prefill_composition = nullptr;  // routes prefill instead of prefill_router when set
  RunRecorder& recorder;
  std::unique_ptr<GateSource> gates;  // gate values of the routing source, for routers that need them

  std::vector<simgrid::s4u::Host*> prefill_hosts;  // each instance's first GPU
  std::vector<simgrid::s4u::Host*> decode_hosts;
  std::vector<std::vector<simgrid::s4u::Host*>> prefill_gpu_hosts, decode_gpu_hosts;  // all of each instance's GPUs
  std::vector<simgrid::s4u::Mailbox*> kv_doorbells;  // a decode instance learns of an incoming KV transfer here
  std::vector<WorkQueue> prefill_queues;
  std::vector<ArrivalQueue> decode_arrivals;
  SignalQueue<PrefilledPrompt> routing_queue;  // prompts waiting for a router with per-request work
  std::vector<int> prefill_in_flight;          // assigned and not yet prefilled
  std::vector<int> decode_in_flight;           // routed and not yet finished
  // By request id, while its KV cache is in flight: one flow per GPU of the decode instance (prefill
  // GPU i mod g_p -> decode GPU i), and how many of them have not arrived yet.
  std::vector<std::vector<simgrid::s4u::CommPtr>> kv_transfers;
  std::vector<int> kv_flows_pending;

  // The instances' GPU layouts (docs/model.md section 3b) and, for expert-parallel decode instances,
  // each instance's expert placement as rank masks [layer][rank][word] (empty when ep = 1).
  InstanceLayout prefill_layout;
  InstanceLayout decode_layout;
  std::vector<std::vector<uint64_t>> decode_rank_masks;

  // KV blocks. Decode workers always account their memory in a block cache (without prefix caching
  // every block is private); prefill workers have one with prefix caching.
  int kv_block_tokens;
  double kv_block_bytes;
  std::vector<BlockCache> prefill_caches;
  std::vector<long> prefill_releases;  // per prefill worker: block releases so far (wakes a waiting head)
  std::vector<BlockCache> decode_caches;
  std::vector<std::vector<uint64_t>> block_keys;  // by request id: its full prompt blocks' keys (prefix caching)

  // Completion tracking for the driver.
  long finished                              = 0;
  long finished_warmup                       = 0;
  simgrid::s4u::MutexPtr done_mutex          = simgrid::s4u::Mutex::create();
  simgrid::s4u::ConditionVariablePtr done_cv = simgrid::s4u::ConditionVariable::create();
};

// Request lifecycle helpers shared by the actors.
void dispatch_to_prefill(ClusterState& s, const Request& r);

}  // namespace eldr
