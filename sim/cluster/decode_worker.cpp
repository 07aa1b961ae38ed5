#include "sim/cluster/decode_worker.hpp"
#include "sim/cache/prefix_blocks.hpp"
#include "sim/cluster/prefill_worker.hpp"

#include <algorithm>

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_decode, s4u, "eldr-sim decode workers");

namespace sg4 = simgrid::s4u;

namespace eldr {

void KvReceiver::operator()()
{
  sg4::Mailbox* doorbell = s_.kv_doorbells[size_t(index_)];
  Request* announced     = nullptr;
  // watched[0] is the pending doorbell; the others are transfers in flight, owned by incoming[i].
  std::vector<sg4::ActivityPtr> watched{doorbell->get_async<Request>(&announced)};
  std::vector<const Request*> incoming{nullptr};
  while (true) {
    auto i = size_t(sg4::Activity::wait_any(watched));
    if (i == 0) {
      watched.push_back(s_.kv_transfers[announced->id]);
      incoming.push_back(announced);
      watched[0] = doorbell->get_async<Request>(&announced);
      continue;
    }
    const Request* r = incoming[i];
    watched.erase(watched.begin() + long(i));
    incoming.erase(incoming.begin() + long(i));
    s_.kv_transfers[r->id] = nullptr;
    RequestRecord& rec = s_.recorder.request(r->id);
    rec.kv_end_s       = sg4::Engine::get_clock();
    s_.recorder.decode_worker(index_).kv_received_bytes += s_.cost.kv_bytes(r->prompt_tokens - rec.decode_cached_tokens);
    release_prefill_blocks(s_, *r);
    s_.decode_arrivals[size_t(index_)].push(r);
  }
}

DecodeWorker::DecodeWorker(ClusterState& state, int index) : s_(state), index_(index), cache_(s_.decode_caches[size_t(index)])
{
  s_.recorder.decode_worker(index_).kv_capacity_bytes = s_.cost.kv_capacity_bytes(s_.experiment.serving.kv_memory_fraction);
  union_.resize(size_t(s_.routing.shape().words()));
  distinct_.resize(size_t(s_.routing.shape().layers));
}

void DecodeWorker::admit()
{
  auto& pending     = s_.decode_arrivals[size_t(index_)].items;
  const double now  = sg4::Engine::get_clock();
  WorkerCounters& c = s_.recorder.decode_worker(index_);
  while (!pending.empty() && int(batch_.size()) < s_.experiment.serving.max_decode_seqs) {
    const Request* r = pending.front();
    // KV blocks for prompt + output; with prefix caching the full prompt blocks are shared through the
    // cache (those pinned when the transfer started are held already) and the rest are private.
    const long blocks = total_blocks(r->prompt_tokens + r->output_tokens, s_.kv_block_tokens);
    xbt_assert(blocks <= cache_.capacity(),
               "request %u needs %ld KV blocks, more than decode worker %d holds (%ld): lower its prompt or output",
               r->id, blocks, index_, cache_.capacity());
    std::span<const uint64_t> keys;
    if (s_.decode_caches_prefixes())
      keys = s_.block_keys[r->id];
    const long held = s_.recorder.request(r->id).decode_cached_tokens / s_.kv_block_tokens;
    if (cache_.acquire(keys.subspan(size_t(held)), blocks - long(keys.size())) < 0)
      break;  // FCFS: a request that does not fit waits, and so does everyone behind it
    pending.pop_front();
    if (double(cache_.used()) * s_.kv_block_bytes > c.kv_peak_bytes) {
      c.kv_peak_bytes = double(cache_.used()) * s_.kv_block_bytes;
      c.kv_peak_s     = now;
    }
    batch_.push_back({r, blocks - long(keys.size()), s_.recorder.request(r->id).tokens_generated});
    s_.recorder.request(r->id).decode_admit_s = now;
  }
  c.peak_batch = std::max(c.peak_batch, int(batch_.size()));
}

double DecodeWorker::step_time(double now)
{
  const RoutingShape& shape = s_.routing.shape();
  const int window          = s_.experiment.model.sliding_window;
  AttentionLoad attention;
  tokens_.clear();
  for (const Sequence& seq : batch_) {
    const Request& r = *seq.request;
    // This step runs output token generated-1 (position prompt + generated - 1) through the model.
    tokens_.push_back({&r, r.prompt_tokens + seq.generated - 1});
    const double context = r.prompt_tokens + seq.generated;
    attention.context_tokens += context;
    attention.windowed_tokens += window > 0 ? std::min(context, double(window)) : context;
  }
  std::fill(union_.begin(), union_.end(), 0);
  s_.routing.accumulate_tokens(tokens_, union_);
  const double distinct_sum = double(count_distinct(union_, shape, distinct_));
  const double t = s_.cost.decode_step_s(int(batch_.size()), attention, distinct_);
  s_.recorder.add_step({now, t, attention.context_tokens, float(distinct_sum / shape.layers),
                        uint32_t(batch_.size()), uint16_t(index_)});
  return t;
}

void DecodeWorker::finish(const Sequence& seq, double now)
{
  const Request& r   = *seq.request;
  RequestRecord& rec = s_.recorder.request(r.id);
  rec.finish_s       = now;
  rec.tokens_generated = seq.generated;
  ++rec.finish_count;
  std::span<const uint64_t> keys;
  if (s_.decode_caches_prefixes())
    keys = s_.block_keys[r.id];
  cache_.release(keys, seq.private_blocks);
  if (s_.caches_prefixes())
    std::vector<uint64_t>().swap(s_.block_keys[r.id]);  // the prefill side let go at the transfer's end
  auto& mix = s_.recorder.decode_worker(index_).label_requests;
  if (mix.size() <= r.label)
    mix.resize(size_t(r.label) + 1, 0);
  ++mix[r.label];
  --s_.decode_in_flight[size_t(index_)];
  ++s_.finished;
  if (!r.measured)
    ++s_.finished_warmup;
  s_.done_cv->notify_all();
}

void DecodeWorker::operator()()
{
  WorkQueue& arrivals = s_.decode_arrivals[size_t(index_)];
  WorkerCounters& c   = s_.recorder.decode_worker(index_);
  while (true) {
    admit();
    if (batch_.empty()) {
      arrivals.wait_nonempty();
      continue;
    }
    const double start = sg4::Engine::get_clock();
    sg4::this_actor::sleep_for(step_time(start));
    const double now = sg4::Engine::get_clock();
    ++c.steps;
    c.tokens += long(batch_.size());
    // Every sequence got one token; the finished ones leave (order kept: deterministic and FCFS-fair).
    size_t kept = 0;
    for (size_t i = 0; i < batch_.size(); ++i) {
      if (++batch_[i].generated >= batch_[i].request->output_tokens)
        finish(batch_[i], now);
      else
        batch_[kept++] = batch_[i];
    }
    batch_.resize(kept);
  }
}

}  // namespace eldr
