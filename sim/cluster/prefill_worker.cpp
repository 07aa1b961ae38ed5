#include "sim/cluster/prefill_worker.hpp"

#include <algorithm>


XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_prefill, s4u, "eldr-sim prefill workers");

namespace sg4 = simgrid::s4u;

namespace eldr {

void dispatch_to_prefill(ClusterState& s, const Request& r)
{
  RequestRecord& rec = s.recorder.request(r.id);
  rec.arrival_s      = sg4::Engine::get_clock();
  int w              = s.prefill_router.choose(r.prefix_hash, s.prefill_in_flight);
  rec.prefill_worker = w;
  ++s.prefill_in_flight[size_t(w)];
  s.prefill_queues[size_t(w)].push(&r);
}

double PrefillWorker::run_batch(const std::vector<const Request*>& batch)
{
  const RoutingShape& shape = s_.routing.shape();
  std::vector<uint64_t> used(size_t(shape.words()), 0);
  std::vector<int> lengths;
  std::vector<TokenRef> chunk;
  bool full = false;
  for (const Request* r : batch) {
    lengths.push_back(r->prompt_tokens);
    // Long prompts touch every expert; once the union is full the remaining tokens cannot change it.
    for (int t0 = 0; t0 < r->prompt_tokens && !full; t0 += 32) {
      chunk.clear();
      for (int t = t0; t < std::min(t0 + 32, r->prompt_tokens); ++t)
        chunk.push_back({r, t});
      s_.routing.accumulate_tokens(chunk, used);
      full = union_is_full(used, shape);
    }
  }
  std::vector<uint16_t> distinct(size_t(shape.layers));
  count_distinct(used, shape, distinct);
  return s_.cost.prefill_s(lengths, distinct);
}

void PrefillWorker::hand_off(const Request& r)
{
  RequestRecord& rec = s_.recorder.request(r.id);
  const double now   = sg4::Engine::get_clock();
  rec.first_token_s  = now;
  rec.tokens_generated = 1;
  --s_.prefill_in_flight[size_t(index_)];

  DecodeLoadView view{s_.decode_in_flight, now};
  if (s_.decode_router.uses_prompt_profile())
    s_.decode_router.observe_prompt(r, count_prompt(s_.routing, r, s_.decode_router.prompt_fields(), s_.gates.get(),
                                                    s_.decode_router.prompt_layers()));
  int d = s_.decode_router.choose(r, view);
  xbt_assert(d >= 0 && d < view.workers(), "decode router '%s' returned worker %d of %d",
             std::string(s_.decode_router.name()).c_str(), d, view.workers());
  rec.decode_worker = d;
  ++s_.decode_in_flight[size_t(d)];
  rec.kv_start_s = now;
  // The KV cache moves as a host-to-host flow that contends with the others on the NICs; a zero-byte
  // doorbell (same route, so it never arrives after the flow ends) tells the decode side to watch it.
  auto bytes = uint64_t(s_.cost.kv_bytes(r.prompt_tokens) + s_.decode_router.handoff_bytes(r));
  s_.kv_transfers[r.id] = sg4::Comm::sendto_async(s_.prefill_hosts[size_t(index_)], s_.decode_hosts[size_t(d)], bytes);
  s_.kv_doorbells[size_t(d)]->put_init(const_cast<Request*>(&r), 0)->detach();
}

void PrefillWorker::operator()()
{
  WorkQueue& queue = s_.prefill_queues[size_t(index_)];
  const long budget = s_.experiment.serving.prefill_token_budget;
  std::vector<const Request*> batch;
  while (true) {
    queue.wait_nonempty();
    batch.clear();
    long tokens = 0;
    while (!queue.items.empty() && (batch.empty() || tokens + queue.items.front()->prompt_tokens <= budget)) {
      tokens += queue.items.front()->prompt_tokens;
      batch.push_back(queue.items.front());
      queue.items.pop_front();
    }
    const double now = sg4::Engine::get_clock();
    for (const Request* r : batch)
      s_.recorder.request(r->id).prefill_start_s = now;
    sg4::this_actor::sleep_for(run_batch(batch));
    for (const Request* r : batch)
      hand_off(*r);
  }
}

}  // namespace eldr
