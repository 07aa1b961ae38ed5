// Prefix caching in whole runs (configs/prefix_cache.json: GPT-OSS-120B, 1P16D, a pool of prompts):
// the invariants of every run, cache hits where the workload repeats prompts, and KV memory that
// stays within capacity when it is scarce enough to force evictions and waits.
#include "integration/sim_fixture.hpp"
#include "sim/cache/prefix_blocks.hpp"

#include <set>

using namespace eldr;
using namespace eldr::test;

namespace {

const char* kConfig = "configs/prefix_cache.json";

// Requests whose whole prompt an earlier request prefilled on the same worker, in an earlier batch.
long repeated_prompts(const SmallRun& s, long& hit)
{
  std::set<std::pair<int, uint64_t>> done;  // (prefill worker, last prompt hash) of finished prefills
  std::vector<const Request*> order;
  for (const Request& r : s.w.requests)
    order.push_back(&r);
  const auto& recs = s.r().requests();
  std::sort(order.begin(), order.end(), [&](auto* a, auto* b) {
    return recs[a->id].prefill_start_s != recs[b->id].prefill_start_s
               ? recs[a->id].prefill_start_s < recs[b->id].prefill_start_s
               : a->id < b->id;
  });
  long repeats = 0;
  hit          = 0;
  for (size_t i = 0; i < order.size();) {
    // One batch: the requests that started prefilling together.
    size_t j = i;
    while (j < order.size() && recs[order[j]->id].prefill_start_s == recs[order[i]->id].prefill_start_s)
      ++j;
    for (size_t k = i; k < j; ++k) {
      const Request& r       = *order[k];
      const RequestRecord& q = recs[r.id];
      if (done.count({q.prefill_worker, s.w.hashes(r).back()})) {
        ++repeats;
        const int B = s.x.model.kv_block_tokens;
        hit += q.prefill_cached_tokens ==
               int(usable_prefix_blocks(full_blocks(r.prompt_tokens, B), r.prompt_tokens, B)) * B;
      }
    }
    for (size_t k = i; k < j; ++k)
      done.insert({recs[order[k]->id].prefill_worker, s.w.hashes(*order[k]).back()});
    i = j;
  }
  return repeats;
}

}  // namespace

TEST_CASE("prefix cache: invariants hold, repeated prompts skip their cached blocks, decode workers reuse blocks")
{
  SmallRun s = run_small({{"workload.distinct_prompts", "60"}, {"workload.warmup_requests", "0"}}, kConfig);
  check_invariants(s);
  REQUIRE(s.r().prefill_caches.size() == 1);
  REQUIRE(s.r().decode_caches.size() == 16);
  long hit       = 0;
  const long rep = repeated_prompts(s, hit);
  CHECK(rep > 150);
  CHECK(hit == rep);  // with memory to spare nothing is evicted: every repeat finds its whole prompt
  CHECK(s.r().prefill_caches[0].evictions == 0);
  long decode_hits = 0;
  for (const auto& rq : s.r().requests())
    decode_hits += rq.decode_cached_tokens > 0;
  CHECK(decode_hits > 0);
  // First uses compute everything but the KV blocks that only the chat template fills (GPT-OSS's
  // 64-token harmony header: one 64-token block), which every prompt shares once one has run.
  const int B         = s.x.model.kv_block_tokens;
  const int template_ = s.x.workload.template_prefix_tokens / B * B;
  CHECK(template_ == 64);
  std::set<uint64_t> seen;
  long template_hits = 0;
  for (const Request& r : s.w.requests)
    if (seen.insert(s.w.hashes(r).back()).second && r.id < 10) {
      const int cached = s.r().requests()[r.id].prefill_cached_tokens;
      CHECK((cached == 0 || cached == template_));
      template_hits += cached == template_;
    }
  CHECK(template_hits >= 8);  // one prefill worker: prompts after the first batch find the template warm
}

TEST_CASE("prefix cache: scarce KV memory evicts, makes prefills and admissions wait, never overflows")
{
  // Room for a few hundred blocks next to the weights: prompts of distinct requests compete.
  const Experiment probe = load_experiment(kConfig);
  const double block     = probe.model.kv_reserved_bytes(1);
  const double fraction  = (probe.model.weight_bytes() + 300 * block) / probe.hardware.hbm_bytes;
  SmallRun s             = run_small({{"workload.distinct_prompts", "200"},
                                      {"workload.rate_rps", "100"},
                                      {"serving.kv_memory_fraction", std::to_string(fraction)}},
                                     kConfig);
  check_invariants(s);
  long evictions = 0;
  for (const auto& caches : {s.r().prefill_caches, s.r().decode_caches})
    for (const CacheCounters& c : caches) {
      CHECK(c.capacity_blocks <= 301);
      evictions += c.evictions;
    }
  CHECK(evictions > 0);
  for (const WorkerCounters& c : s.r().decode_workers())
    CHECK(c.kv_peak_bytes <= c.kv_capacity_bytes);
}

TEST_CASE("prefix cache off: no cache statistics, no reuse")
{
  SmallRun s = run_small({{"workload.distinct_prompts", "60"}, {"serving.prefix_cache", "false"}}, kConfig);
  check_invariants(s);
  CHECK(s.r().prefill_caches.empty());
  CHECK(s.r().decode_caches.empty());
}
