#include "sim/cluster/hand_off.hpp"
#include "sim/cache/cached_profile.hpp"

#include <algorithm>

XBT_LOG_EXTERNAL_CATEGORY(eldr_routing);
XBT_LOG_EXTERNAL_CATEGORY(eldr_kv);

namespace sg4 = simgrid::s4u;

namespace eldr {

namespace {

PromptProfile prompt_profile(const ClusterState& s, const PrefilledPrompt& p)
{
  DecodeRouter& router = s.decode_router;
  const Request& r     = *p.request;
  std::vector<BlockOrigin> cached;
  for (int i = 0; i * s.kv_block_tokens < p.cached_tokens; ++i)
    cached.push_back(s.prefill_caches[size_t(p.prefill_worker)].origin(s.block_keys[r.id][size_t(i)]));
  return cached_prompt_profile(s.routing, r, cached, s.kv_block_tokens, router.profiles_cached_blocks(),
                               router.prompt_fields(), s.gates.get(), router.prompt_layers());
}

}  // namespace

void hand_off(ClusterState& s, const PrefilledPrompt& p)
{
  const Request& r          = *p.request;
  RequestRecord& rec        = s.recorder.request(r.id);
  const double now          = sg4::Engine::get_clock();
  rec.first_token_s         = now;
  rec.tokens_generated      = 1;
  rec.prefill_cached_tokens = p.cached_tokens;

  DecodeLoadView view{s.decode_in_flight, now, s.decode_caches};
  if (s.caches_prefixes())
    view.prompt_block_keys = s.block_keys[r.id];
  if (s.decode_router.uses_prompt_profile())
    s.decode_router.observe_prompt(r, prompt_profile(s, p));
  int d = s.decode_router.choose(r, view);
  xbt_assert(d >= 0 && d < view.workers(), "decode router '%s' returned worker %d of %d",
             std::string(s.decode_router.name()).c_str(), d, view.workers());
  rec.decode_worker = d;
  XBT_CVERB(eldr_routing, "request %u: router %.*s picks decode worker %d of %d (%d in flight there)", r.id,
            int(s.decode_router.name().size()), s.decode_router.name().data(), d, view.workers(),
            s.decode_in_flight[size_t(d)]);
  if (s.recorder.log_decisions)  // before this request counts: the loads the router saw
    s.recorder.record_decision(r.id, now, view.in_flight, d);
  ++s.decode_in_flight[size_t(d)];
  rec.kv_start_s = now;
  // Blocks the decode worker holds already need not travel (vLLM's P/D connectors pull only the
  // blocks the decode side misses); they are pinned there now so they stay until admission.
  long held = 0;
  if (s.decode_caches_prefixes()) {
    const auto& keys = s.block_keys[r.id];
    BlockCache& dc   = s.decode_caches[size_t(d)];
    held             = dc.match(keys);
    dc.acquire(std::span(keys).first(size_t(held)), 0);
  }
  rec.decode_cached_tokens = int(held) * s.kv_block_tokens;
  // The KV cache moves as a host-to-host flow that contends with the others on the NICs; a zero-byte
  // doorbell (same route, so it never arrives after the flow ends) tells the decode side to watch it.
  // Even when the decode worker holds every prompt block, the first token's id (4 bytes) travels: a
  // flow of no bytes would end with the doorbell, before the receiver could watch it.
  auto bytes = std::max<uint64_t>(
      4, uint64_t(s.cost.kv_bytes(r.prompt_tokens - rec.decode_cached_tokens) + s.decode_router.handoff_bytes(r)));
  // A decode instance of g GPUs receives g flows of bytes/g in parallel, prefill GPU i mod g_p -> decode
  // GPU i (each GPU gets its share of the KV heads); one GPU: the single flow as before.
  const auto& senders   = s.prefill_gpu_hosts[size_t(p.prefill_worker)];
  const auto& receivers = s.decode_gpu_hosts[size_t(d)];
  auto& flows           = s.kv_transfers[r.id];
  flows.clear();
  const uint64_t share = receivers.size() == 1 ? bytes : std::max<uint64_t>(1, bytes / receivers.size());
  for (size_t i = 0; i < receivers.size(); ++i)
    flows.push_back(sg4::Comm::sendto_async(senders[i % senders.size()], receivers[i], share));
  s.kv_flows_pending[r.id] = int(flows.size());
  XBT_CVERB(eldr_kv,
            "request %u: KV transfer starts, prefill worker %d -> decode worker %d, %llu bytes, %zu flow(s), %d prompt "
            "tokens held there",
            r.id, p.prefill_worker, d, static_cast<unsigned long long>(bytes), flows.size(), rec.decode_cached_tokens);
  s.kv_doorbells[size_t(d)]->put_init(const_cast<Request*>(&r), 0)->detach();
}

}  // namespace eldr
