#include "sim/cluster/prefill_worker.hpp"
#include "sim/cache/prefix_blocks.hpp"
#include "sim/cluster/hand_off.hpp"
#include "sim/gating/expected_union.hpp"

#include <algorithm>

XBT_LOG_EXTERNAL_CATEGORY(eldr);
XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_prefill, eldr, "eldr-sim prefill workers");

namespace sg4 = simgrid::s4u;

namespace eldr {

void dispatch_to_prefill(ClusterState& s, const Request& r)
{
  RequestRecord& rec = s.recorder.request(r.id);
  rec.arrival_s      = sg4::Engine::get_clock();
  int w              = -1;
  if (s.prefill_composition) {
    DecodeLoadView view{s.prefill_in_flight, rec.arrival_s, s.prefill_caches};
    if (s.caches_prefixes()) {  // the prefix-cache scorer matches them (the worker computes them again)
      prompt_block_keys(s.workload, r, s.kv_block_tokens, s.block_keys[r.id]);
      view.prompt_block_keys = s.block_keys[r.id];
    }
    w = s.prefill_composition->choose(r, view);
  } else {
    w = s.prefill_router.choose(r.prefix_hash, s.prefill_in_flight);
  }
  rec.prefill_worker = w;
  ++s.prefill_in_flight[size_t(w)];
  s.prefill_queues[size_t(w)].push(&r);
  XBT_VERB("request %u: arrives%s, %d prompt and %d output tokens, queued at prefill worker %d (%d there)", r.id,
           r.measured ? "" : " (warm-up)", r.prompt_tokens, r.output_tokens, w, s.prefill_in_flight[size_t(w)]);
}

void release_prefill_blocks(ClusterState& s, const Request& r)
{
  if (!s.caches_prefixes())
    return;
  const int w      = s.recorder.request(r.id).prefill_worker;
  const auto& keys = s.block_keys[r.id];
  s.prefill_caches[size_t(w)].release(keys, total_blocks(r.prompt_tokens, s.kv_block_tokens) - long(keys.size()));
  ++s.prefill_releases[size_t(w)];
  s.prefill_queues[size_t(w)].wake();  // a prompt waiting for KV memory may fit now
}

bool PrefillWorker::reserve_blocks(const Request& r, int& cached_tokens)
{
  cached_tokens = 0;
  if (!s_.caches_prefixes())
    return true;
  BlockCache& cache = s_.prefill_caches[size_t(index_)];
  auto& keys        = s_.block_keys[r.id];
  prompt_block_keys(s_.workload, r, s_.kv_block_tokens, keys);
  // Blocks another prompt of this batch computes are not there yet: they end the reusable prefix.
  long lead = 0;
  while (lead < long(keys.size()) && cache.contains(keys[size_t(lead)]) &&
         std::find(batch_new_.begin(), batch_new_.end(), keys[size_t(lead)]) == batch_new_.end())
    ++lead;
  std::vector<BlockOrigin> origins(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    origins[i] = {&r, int(i) * s_.kv_block_tokens};
  const long hit = cache.acquire(keys, total_blocks(r.prompt_tokens, s_.kv_block_tokens) - long(keys.size()), origins);
  if (hit < 0)
    return false;
  for (size_t i = size_t(std::min(hit, lead)); i < keys.size(); ++i)
    batch_new_.push_back(keys[i]);
  cached_tokens =
      int(usable_prefix_blocks(std::min(hit, lead), r.prompt_tokens, s_.kv_block_tokens)) * s_.kv_block_tokens;
  return true;
}

void PrefillWorker::take_batch()
{
  WorkQueue& queue  = s_.prefill_queues[size_t(index_)];
  const long budget = s_.experiment.serving.prefill_token_budget;
  batch_.clear();
  batch_new_.clear();
  long tokens = 0;  // computed tokens: cached ones cost no budget, as in vLLM's scheduler
  while (!queue.items.empty()) {
    const Request& r = *queue.items.front();
    if (!batch_.empty() && tokens + r.prompt_tokens > budget)
      break;  // even uncached it might not fit; checked before touching the cache
    int cached = 0;
    if (!reserve_blocks(r, cached))
      break;  // FCFS: waits for KV memory, and so does everyone behind it
    tokens += r.prompt_tokens - cached;
    batch_.push_back({&r, cached, index_});
    queue.items.pop_front();
  }
}

void PrefillWorker::sampled_distinct(std::vector<double>& distinct) const
{
  const GatingShape& shape = s_.routing.shape();
  std::vector<uint64_t> used(size_t(shape.words()), 0);
  std::vector<TokenRef> chunk;
  bool full = false;
  for (const PrefilledPrompt& p : batch_) {
    const Request* r = p.request;
    // Long prompts touch every expert; once the union is full the remaining tokens cannot change it.
    for (int t0 = p.cached_tokens; t0 < r->prompt_tokens && !full; t0 += 32) {
      chunk.clear();
      for (int t = t0; t < std::min(t0 + 32, r->prompt_tokens); ++t)
        chunk.push_back({r, t});
      s_.routing.accumulate_tokens(chunk, used);
      full = union_is_full(used, shape);
    }
  }
  std::vector<uint16_t> counts(size_t(shape.layers));
  count_distinct(used, shape, counts);
  distinct.assign(counts.begin(), counts.end());
}

void PrefillWorker::expected_distinct(std::vector<double>& distinct)
{
  std::vector<PromptTokens> prompts;
  for (const PrefilledPrompt& p : batch_)
    prompts.push_back({p.request, p.cached_tokens, p.request->prompt_tokens});
  distinct.resize(size_t(s_.routing.shape().layers));
  expected_prompt_distinct(s_.routing, prompts, distinct, &log_cache_);
}

double PrefillWorker::run_batch()
{
  std::vector<PrefillPrompt> prompts;
  for (const PrefilledPrompt& p : batch_)
    prompts.push_back({p.request->prompt_tokens, p.cached_tokens});
  std::vector<double> distinct;
  if (s_.experiment.workload.expert_union == UnionMode::expected)
    expected_distinct(distinct);
  else
    sampled_distinct(distinct);
  return s_.cost.prefill_s(s_.prefill_layout, prompts, distinct);
}

void PrefillWorker::operator()()
{
  WorkQueue& queue = s_.prefill_queues[size_t(index_)];
  while (true) {
    queue.wait_nonempty();
    const long releases = s_.prefill_releases[size_t(index_)];
    take_batch();
    if (batch_.empty()) {  // the head waits for KV blocks that in-flight transfers still hold
      XBT_DEBUG("request %u: waits for KV memory at prefill worker %d", queue.items.front()->id, index_);
      std::unique_lock<sg4::Mutex> lock(*queue.mutex);
      queue.sleeping = true;
      queue.ready->wait(lock, [&] { return s_.prefill_releases[size_t(index_)] != releases; });
      queue.sleeping = false;
      continue;
    }
    const double now = sg4::Engine::get_clock();
    for (const PrefilledPrompt& p : batch_) {
      s_.recorder.request(p.request->id).prefill_start_s = now;
      XBT_VERB("request %u: prefill starts at prefill worker %d, %d of %d prompt tokens cached, batch of %zu",
               p.request->id, index_, p.cached_tokens, p.request->prompt_tokens, batch_.size());
    }
    sg4::this_actor::sleep_for(run_batch());
    // A router with per-request work decides in the routing proxy, after the batch and before the
    // first token leaves (so it adds to TTFT); the others decide at once.
    const bool proxy = s_.decode_router.routing_overhead_s() > 0;
    for (const PrefilledPrompt& p : batch_) {
      --s_.prefill_in_flight[size_t(index_)];
      XBT_VERB("request %u: prefill ends at prefill worker %d%s", p.request->id, index_,
               proxy ? ", to the routing proxy" : "");
      if (proxy)
        s_.routing_queue.push(p);
      else
        hand_off(s_, p);
    }
  }
}

}  // namespace eldr
