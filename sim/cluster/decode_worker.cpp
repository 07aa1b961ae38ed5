#include "sim/cluster/decode_worker.hpp"
#include "sim/cache/prefix_blocks.hpp"
#include "sim/cluster/prefill_worker.hpp"
#include "sim/common/rng.hpp"
#include "sim/gating/speculative_tokens.hpp"

#include <algorithm>
#include <bit>

XBT_LOG_EXTERNAL_CATEGORY(eldr);
XBT_LOG_NEW_DEFAULT_SUBCATEGORY(eldr_decode, eldr, "eldr-sim decode workers");
XBT_LOG_EXTERNAL_CATEGORY(eldr_kv);

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
      for (const sg4::CommPtr& flow : s_.kv_transfers[announced->id]) {
        watched.push_back(flow);
        incoming.push_back(announced);
      }
      watched[0] = doorbell->get_async<Request>(&announced);
      continue;
    }
    const Request* r = incoming[i];
    watched.erase(watched.begin() + long(i));
    incoming.erase(incoming.begin() + long(i));
    if (--s_.kv_flows_pending[r->id] > 0)
      continue;  // a multi-GPU instance takes the request over once every GPU's share has arrived
    std::vector<sg4::CommPtr>().swap(s_.kv_transfers[r->id]);
    RequestRecord& rec = s_.recorder.request(r->id);
    rec.kv_end_s       = sg4::Engine::get_clock();
    s_.recorder.decode_worker(index_).kv_received_bytes +=
        s_.cost.kv_bytes(r->prompt_tokens - rec.decode_cached_tokens);
    // Before the push, which may let the decode worker admit it at once.
    XBT_CVERB(eldr_kv,
              "request %u: KV transfer ends at decode worker %d, %.0f KV bytes; queued for admission behind %zu", r->id,
              index_, s_.cost.kv_bytes(r->prompt_tokens - rec.decode_cached_tokens),
              s_.decode_arrivals[size_t(index_)].items.size());
    release_prefill_blocks(s_, *r);
    s_.decode_arrivals[size_t(index_)].push(r);
  }
}

DecodeWorker::DecodeWorker(ClusterState& state, int index, int max_block_steps)
    : s_(state), index_(index), max_block_(std::max(1, max_block_steps)), cache_(s_.decode_caches[size_t(index)])
{
  s_.recorder.decode_worker(index_).kv_capacity_bytes = decode_kv_capacity_bytes(s_.experiment);
  planned_.resize(size_t(max_block_));
  const size_t layers = size_t(s_.routing.shape().layers);
  counts_.resize(layers);
  distinct_.resize(layers);
  if (s_.experiment.workload.expert_union == UnionMode::expected)
    expected_.emplace(s_.routing.shape().layers, s_.routing.shape().experts);
  else
    unions_.resize(size_t(max_block_) * size_t(s_.routing.shape().words()));
  ep_ = s_.decode_layout.ep;
  xbt_assert(ep_ == 1 || !expected_, "expected unions are single-rank: load_experiment picks 'sampled' for ep > 1");
  if (ep_ > 1) {
    const size_t R = size_t(ep_);
    rank_masks_    = s_.decode_rank_masks[size_t(index)];
    rank_acc_.resize(size_t(max_block_) * layers * (R + R * R));
    rank_distinct_.resize(layers * R);
    rank_picks_.resize(layers * R);
    pair_max_.resize(layers);
    if (s_.experiment.eplb.enabled)
      eplb_.emplace(s_.experiment.eplb, int(layers), s_.routing.shape().experts, ep_, max_block_, s_.recorder.eplb);
  }
  spec_ = s_.experiment.speculative.tokens;
  if (spec_ > 0) {
    accept_seed_ = stream_seed(s_.experiment.seed, "speculative acceptance");
    expert_seed_ = stream_seed(s_.experiment.seed, "speculative experts");
  }
  // As the driver counts them: the requests before the first measured one.
  const auto& reqs = s_.workload.requests;
  warmup_requests_ = std::find_if(reqs.begin(), reqs.end(), [](const Request& r) { return r.measured; }) - reqs.begin();
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
    batch_.push_back({r,
                      r->prompt_tokens,
                      r->output_tokens,
                      blocks - long(keys.size()),
                      s_.recorder.request(r->id).tokens_generated,
                      0,
                      int(admitted_++ % ep_),
                      {}});
    if (spec_ > 0 && !expected_ && s_.routing.has_token_laws())
      batch_.back().hot =
          hot_cells(s_.routing.token_law(*r, 1), size_t(s_.routing.shape().layers) * size_t(s_.routing.shape().experts),
                    s_.experiment.speculative.expert_persistence);
    if (expected_)
      expected_->join(decode_law(*r));
    s_.recorder.request(r->id).decode_admit_s = now;
    XBT_VERB("request %u: admitted to decode worker %d's batch (%zu sequences, %ld of %ld KV blocks used)", r->id,
             index_, batch_.size(), cache_.used(), cache_.capacity());
  }
  c.peak_batch = std::max(c.peak_batch, int(batch_.size()));
  // One line per wait (admit runs after every block of steps): when the head of the queue changes.
  if (XBT_LOG_ISENABLED(eldr_decode, xbt_log_priority_verbose) && !pending.empty() && pending.front() != logged_wait_) {
    logged_wait_ = pending.front();
    if (int(batch_.size()) >= s_.experiment.serving.max_decode_seqs)
      XBT_VERB("request %u: waits for admission at decode worker %d: the batch is full (%zu sequences)",
               logged_wait_->id, index_, batch_.size());
    else
      XBT_VERB("request %u: waits for admission at decode worker %d: KV memory is short (%ld of %ld blocks used)",
               logged_wait_->id, index_, cache_.used(), cache_.capacity());
  }
}

// The planned steps live in rings (committing steps moves the head, not the data): upcoming step k is
// slot (head_ + k) mod max_block_.
size_t DecodeWorker::slot(int k) const
{
  return size_t((head_ + k) % max_block_);
}

std::span<uint64_t> DecodeWorker::step_union(int k)
{
  const size_t words = size_t(s_.routing.shape().words());
  return {&unions_[slot(k) * words], words};
}

std::span<uint32_t> DecodeWorker::step_ranks(int k)
{
  const size_t n = rank_acc_.size() / size_t(max_block_);
  return {&rank_acc_[slot(k) * n], n};
}

// Expert parallel: ORs tokens_ into step k's union as accumulate_tokens does, and counts per layer each
// rank's picks and the tokens each owner dispatches to each other rank holding one of their experts.
void DecodeWorker::accumulate_ranks(int k)
{
  const GatingShape& shape = s_.routing.shape();
  const int W = shape.words_per_layer, R = ep_;
  const size_t per_layer  = size_t(R + R * R);
  std::span<uint64_t> u   = step_union(k);
  std::span<uint32_t> acc = step_ranks(k);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    std::span<const uint64_t> m =
        spec_ > 0 ? std::span<const uint64_t>(&window_[t * size_t(shape.words())], size_t(shape.words()))
                  : s_.routing.token_experts(*tokens_[t].request, tokens_[t].position);
    const int o = owners_[t];
    if (eplb_)  // the token's picks go to replicas (key: the token, however planning is split)
      eplb_->add_token(slot(k), m, W, uint64_t(tokens_[t].request->id) << 32 | uint32_t(tokens_[t].position), o,
                       acc.data());
    else
      for (int l = 0; l < shape.layers; ++l) {
        uint32_t* a = &acc[size_t(l) * per_layer];
        for (int r = 0; r < R; ++r) {
          int c = 0;
          for (int w = 0; w < W; ++w)
            c += std::popcount(m[size_t(l * W + w)] & rank_masks_[size_t((l * R + r) * W + w)]);
          a[r] += uint32_t(c);
          if (c > 0 && r != o)
            ++a[R + o * R + r];
        }
      }
    for (size_t i = 0; i < u.size(); ++i)
      u[i] |= m[i];
  }
}

// Distinct experts per layer of planned step k into distinct_; returns their sum.
double DecodeWorker::step_distinct(int k)
{
  if (expected_) {  // the same for every step until the batch changes
    if (distinct_of_ != expected_->changes()) {
      distinct_sum_ = expected_->distinct(distinct_);
      distinct_of_  = expected_->changes();
    }
    return distinct_sum_;
  }
  const long total = count_distinct(step_union(k), s_.routing.shape(), counts_);
  std::copy(counts_.begin(), counts_.end(), distinct_.begin());
  return double(total);
}

// The cost of planned step k (its union and, with expert parallelism, its per-rank counts complete).
DecodeStepCost DecodeWorker::step_cost(int k, int batch, const AttentionLoad& attention)
{
  if (ep_ <= 1)
    return s_.cost.decode_step(s_.decode_layout, batch, attention, distinct_, nullptr, spec_ + 1);
  const GatingShape& shape = s_.routing.shape();
  const int W = shape.words_per_layer, R = ep_;
  const size_t per_layer        = size_t(R + R * R);
  std::span<const uint64_t> u   = step_union(k);
  std::span<const uint32_t> acc = step_ranks(k);
  if (eplb_)  // the distinct replicas each rank's slots hold
    eplb_->rank_distinct(slot(k), rank_distinct_);
  else
    for (int l = 0; l < shape.layers; ++l)
      for (int r = 0; r < R; ++r) {
        int d = 0;
        for (int w = 0; w < W; ++w)
          d += std::popcount(u[size_t(l * W + w)] & rank_masks_[size_t((l * R + r) * W + w)]);
        rank_distinct_[size_t(l * R + r)] = uint16_t(d);
      }
  for (int l = 0; l < shape.layers; ++l) {
    const uint32_t* a = &acc[size_t(l) * per_layer];
    uint32_t worst    = 0;
    for (int r = 0; r < R; ++r)
      rank_picks_[size_t(l * R + r)] = a[r];
    for (int i = 0; i < R * R; ++i)
      worst = std::max(worst, a[R + i]);
    pair_max_[size_t(l)] = worst;
  }
  const RankLoads loads{R, rank_distinct_, rank_picks_, pair_max_};
  return s_.cost.decode_step(s_.decode_layout, batch, attention, distinct_, &loads, spec_ + 1);
}

TokenLaw DecodeWorker::decode_law(const Request& r) const
{
  return window_law(s_.routing.token_law(r, 1), spec_, s_.experiment.speculative.expert_persistence);
}

int DecodeWorker::generated_at(size_t i, int k) const
{
  return spec_ > 0 ? gen_at_[i * size_t(max_block_ + 1) + size_t(k)] : batch_[i].generated + k;
}

// Speculative decoding: fills gen_at_ for up to n steps, each sequence emitting 1 + a tokens a step (at
// most what it has left, at least one); returns the steps up to the first after which one finishes.
int DecodeWorker::plan_speculative(int n)
{
  const size_t row = size_t(max_block_ + 1);
  gen_at_.resize(batch_.size() * row);
  const std::span<const double> acceptance = s_.experiment.speculative.acceptance;
  int steps                                = n;
  for (size_t i = 0; i < batch_.size(); ++i) {
    const Request& r = *batch_[i].request;
    int g            = batch_[i].generated;
    gen_at_[i * row] = g;
    for (int k = 0; k < n; ++k) {
      const int emitted =
          std::max(1, std::min(1 + accepted_drafts(accept_seed_, r.id, g, acceptance), r.output_tokens - g));
      g += emitted;
      gen_at_[i * row + size_t(k) + 1] = g;
      if (g >= r.output_tokens) {
        steps = std::min(steps, k + 1);
        break;
      }
    }
  }
  return steps;
}

// Plans the steps from `start` up to the first one after which a sequence finishes (at most
// max_block_): their expert unions and costs, as one step at a time would compute them. Returns
// their number.
int DecodeWorker::plan(double start)
{
  const GatingShape& shape = s_.routing.shape();
  const int window         = s_.experiment.model.sliding_window;
  int n                    = eplb_ ? eplb_steps(max_block_) : max_block_;
  if (spec_ > 0) {
    n = plan_speculative(n);
  } else {
    for (const Sequence& seq : batch_)
      n = std::min(n, seq.output_tokens - seq.generated);
    n = std::max(n, 1);  // a sequence admitted with every token generated still runs one step
  }
  // Sampled unions: each step's tokens ORed in (expected ones are kept as the batch changes).
  for (int k = unions_ready_; k < n && !expected_; ++k) {
    std::ranges::fill(step_union(k), 0);
    if (ep_ > 1)
      std::ranges::fill(step_ranks(k), 0);
    if (eplb_)
      eplb_->clear(slot(k));
  }
  unions_ready_ = std::max(unions_ready_, n);
  for (int k = 0; k < n && !expected_; ++k) {
    // At step k a sequence runs output token generated-1+k (position prompt + generated - 1 + k).
    tokens_.clear();
    owners_.clear();
    window_.clear();
    for (size_t i = 0; i < batch_.size(); ++i) {
      const Sequence& seq = batch_[i];
      if (seq.planned > k)
        continue;
      const int position = seq.request->prompt_tokens + generated_at(i, k) - 1;
      // Speculative: the step verifies this token and the next spec_, their masks in window_.
      if (spec_ > 0)
        window_masks(s_.routing, *seq.request, position, spec_, s_.experiment.speculative.expert_persistence,
                     expert_seed_, seq.hot, window_);
      for (int j = 0; j <= spec_; ++j) {
        tokens_.push_back({seq.request, position + j});
        if (ep_ > 1)
          owners_.push_back(seq.owner);
      }
    }
    if (tokens_.empty())
      continue;
    if (ep_ > 1)
      accumulate_ranks(k);
    else if (spec_ > 0)
      for (size_t t = 0; t < tokens_.size(); ++t)
        accumulate(step_union(k), {&window_[t * size_t(shape.words())], size_t(shape.words())});
    else
      s_.routing.accumulate_tokens(tokens_, step_union(k));
  }
  for (Sequence& seq : batch_)
    seq.planned = std::max(seq.planned, n);

  // Contexts are whole numbers, so their sums are exact in any order: step k adds k per sequence.
  // Speculative decoding: k + 1 positions a step, the same context for all of them (its drafts' KV, k
  // tokens per sequence, is left out).
  long context0 = 0;
  for (const Sequence& seq : batch_)
    context0 += seq.prompt_tokens + seq.generated;
  const long batch = long(batch_.size());
  double t         = start;
  for (int k = 0; k < n; ++k) {
    AttentionLoad attention;
    attention.context_tokens = double(context0 + k * batch);
    if (spec_ > 0) {
      long context = 0;
      for (size_t i = 0; i < batch_.size(); ++i)
        context += batch_[i].request->prompt_tokens + generated_at(i, k);
      attention.context_tokens = double(context);
    }
    attention.windowed_tokens = attention.context_tokens;
    if (window > 0) {
      long windowed = 0;
      for (size_t i = 0; i < batch_.size(); ++i)
        windowed += std::min(batch_[i].request->prompt_tokens + generated_at(i, k), window);
      attention.windowed_tokens = double(windowed);
    }
    const double distinct_sum = step_distinct(k);
    DecodeStepCost c          = step_cost(k, int(batch_.size()), attention);
    if (spec_ > 0 && s_.experiment.speculative.method == SpeculativeMethod::mtp) {
      // vLLM's proposer: a pass over the step's B (k + 1) tokens, then k - 1 over one token a sequence;
      // each pass's MoE layer is charged the step's mean distinct experts per layer.
      const int layers  = s_.experiment.speculative.proposer_layers;
      const double mean = distinct_sum / shape.layers;
      const int tokens  = int(batch) * (spec_ + 1);
      c.seconds += s_.cost.draft_pass_s(s_.decode_layout, layers, tokens, attention, mean) +
                   (spec_ - 1) * s_.cost.draft_pass_s(s_.decode_layout, layers, int(batch), attention, mean);
    } else if (spec_ > 0 && s_.experiment.speculative.method == SpeculativeMethod::draft) {
      // vLLM's draft_model proposer: a first pass over the step's B (k + 1) tokens and each sequence's
      // sampled token, B (k + 2), then k - 1 over one token a sequence; one logit a sequence each.
      const ModelSpec& draft = s_.experiment.speculative.draft;
      const int b            = int(batch);
      c.seconds += s_.cost.draft_model_pass_s(s_.decode_layout, draft, b * (spec_ + 2), b, attention.context_tokens) +
                   (spec_ - 1) * s_.cost.draft_model_pass_s(s_.decode_layout, draft, b, b, attention.context_tokens);
    }
    const double d    = c.seconds;
    planned_[slot(k)] = {t,
                         d,
                         attention.context_tokens,
                         float(distinct_sum / shape.layers),
                         uint32_t(batch_.size()),
                         uint16_t(index_),
                         float(c.imbalance),
                         float(c.all_to_all_s)};
    for (size_t i = 0; spec_ > 0 && i < batch_.size(); ++i)
      planned_[slot(k)].extra_tokens += uint32_t(generated_at(i, k + 1) - generated_at(i, k) - 1);
    t += d;  // the clock after sleeping d from t, exactly as SimGrid computes it
  }
  return n;
}

// Sleeps through up to `steps` planned steps, stopping at the end of the step in progress when a KV
// transfer arrives. Returns how many steps have ended.
int DecodeWorker::sleep_through(double start, int steps)
{
  auto end_of = [&](int k) { return planned_[slot(k)].start_s + planned_[slot(k)].duration_s; };
  // One timed wait ends exactly at the planned end E when start + (E - start) == E, which holds for
  // E <= 2 start (Sterbenz: E - start is then exact); only the first second of a run needs the check.
  int m = 1;
  while (m < steps && end_of(m) <= 2 * start)
    ++m;
  if (m == 1) {
    sg4::this_actor::sleep_for(planned_[slot(0)].duration_s);
    return 1;
  }
  // Woken by an arrival or at start + (E - start), E the last step's end.
  if (!s_.decode_arrivals[size_t(index_)].sleep(end_of(m - 1) - sg4::Engine::get_clock()))
    return m;
  // A KV transfer arrived during step k: it is admitted when that step ends.
  const double now = sg4::Engine::get_clock();
  int k            = 0;
  while (end_of(k) < now)
    ++k;
  if (end_of(k) > now)
    sg4::this_actor::sleep_until(end_of(k));
  return k + 1;
}

// Records the first `steps` planned steps as done, `now` being the end of the last.
void DecodeWorker::commit(int steps, double now)
{
  WorkerCounters& c = s_.recorder.decode_worker(index_);
  for (int k = 0; k < steps; ++k) {
    s_.recorder.add_step(planned_[slot(k)]);
    if (eplb_)
      eplb_record(k);
  }
  c.steps += steps;
  head_ = int(slot(steps));
  unions_ready_ -= steps;
  // Every sequence got `steps` steps' tokens; the finished ones leave (order kept: deterministic and FCFS-fair).
  size_t kept = 0;
  for (size_t i = 0; i < batch_.size(); ++i) {
    const int generated = generated_at(i, steps);
    c.tokens += generated - batch_[i].generated;
    batch_[i].generated = generated;
    batch_[i].planned -= steps;
    if (batch_[i].generated >= batch_[i].output_tokens)
      finish(batch_[i], now);
    else if (kept++ != i)  // a self-move would empty its vector
      batch_[kept - 1] = std::move(batch_[i]);
  }
  batch_.resize(kept);
}

void DecodeWorker::finish(const Sequence& seq, double now)
{
  const Request& r     = *seq.request;
  RequestRecord& rec   = s_.recorder.request(r.id);
  rec.finish_s         = now;
  rec.tokens_generated = seq.generated;
  ++rec.finish_count;
  XBT_VERB("request %u: finishes at decode worker %d, %d tokens, TPOT %.3f ms", r.id, index_, seq.generated,
           r.output_tokens > 1 ? (now - rec.first_token_s) / double(r.output_tokens - 1) * 1e3 : 0.0);
  std::span<const uint64_t> keys;
  if (s_.decode_caches_prefixes())
    keys = s_.block_keys[r.id];
  cache_.release(keys, seq.private_blocks);
  if (expected_)
    expected_->leave(decode_law(r));
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
  // Wake the driver only when what it waits for (every warm-up request, then every request, done)
  // may hold, and now and then for its progress line: a wake per finish costs a context switch each.
  if ((!r.measured && s_.finished_warmup == warmup_requests_) || s_.finished == long(s_.workload.requests.size()) ||
      s_.finished % 1024 == 0)
    s_.done_cv->notify_all();
}

void DecodeWorker::operator()()
{
  ArrivalQueue& arrivals = s_.decode_arrivals[size_t(index_)];
  while (true) {
    admit();
    if (batch_.empty()) {
      arrivals.wait_nonempty();
      continue;
    }
    const double start = sg4::Engine::get_clock();
    const int steps    = plan(start);
    XBT_DEBUG("decode worker %d: up to %d steps of a batch of %zu", index_, steps, batch_.size());
    const int done = sleep_through(start, steps);
    commit(done, sg4::Engine::get_clock());
  }
}

}  // namespace eldr
