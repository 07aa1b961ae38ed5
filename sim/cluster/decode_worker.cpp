#include "sim/cluster/decode_worker.hpp"

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
    s_.recorder.request(r->id).kv_end_s = sg4::Engine::get_clock();
    s_.recorder.decode_worker(index_).kv_received_bytes += s_.cost.kv_bytes(r->prompt_tokens);
    s_.decode_arrivals[size_t(index_)].push(r);
  }
}

DecodeWorker::DecodeWorker(ClusterState& state, int index) : s_(state), index_(index)
{
  kv_capacity_ = s_.cost.kv_capacity_bytes(s_.experiment.serving.kv_memory_fraction);
  s_.recorder.decode_worker(index_).kv_capacity_bytes = kv_capacity_;
  union_.resize(size_t(s_.routing.shape().words()));
  // As the driver counts them: the requests before the first measured one.
  const auto& reqs = s_.workload.requests;
  warmup_requests_ = std::find_if(reqs.begin(), reqs.end(), [](const Request& r) { return r.measured; }) - reqs.begin();
  distinct_.resize(size_t(s_.routing.shape().layers));
}

void DecodeWorker::admit()
{
  auto& pending     = s_.decode_arrivals[size_t(index_)].items;
  const double now  = sg4::Engine::get_clock();
  WorkerCounters& c = s_.recorder.decode_worker(index_);
  while (!pending.empty() && int(batch_.size()) < s_.experiment.serving.max_decode_seqs) {
    const Request* r = pending.front();
    double need      = s_.experiment.model.kv_reserved_bytes(r->prompt_tokens + r->output_tokens);
    xbt_assert(need <= kv_capacity_, "request %u needs %.3g GB of KV cache, more than decode worker %d holds (%.3g GB)",
               r->id, need / 1e9, index_, kv_capacity_ / 1e9);
    if (kv_used_ + need > kv_capacity_)
      break;  // FCFS: a request that does not fit waits, and so does everyone behind it
    pending.pop_front();
    kv_used_ += need;
    c.kv_peak_bytes = std::max(c.kv_peak_bytes, kv_used_);
    batch_.push_back({r, need, s_.recorder.request(r->id).tokens_generated});
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
  kv_used_ -= seq.kv_bytes;
  auto& mix = s_.recorder.decode_worker(index_).label_requests;
  if (mix.size() <= r.label)
    mix.resize(size_t(r.label) + 1, 0);
  ++mix[r.label];
  --s_.decode_in_flight[size_t(index_)];
  ++s_.finished;
  if (!r.measured)
    ++s_.finished_warmup;
  // Wake the driver only when what it waits for (every warm-up request, then every request, done)
  // may hold, and now and then for its progress line: a wake per finish costs a context switch each.
  if (s_.finished_warmup == warmup_requests_ || s_.finished == long(s_.workload.requests.size()) ||
      s_.finished % 1024 == 0)
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
