// The plugins that read the workers' KV caches: kv-cache-utilization-scorer, prefix-cache-scorer and
// llm-d's precise-prefix-cache-scorer.
#include "sim/routing/compose/plugin.hpp"

namespace eldr {

namespace {

// vLLM's KV usage: blocks held by running requests (cached blocks nobody holds count as free).
class KvCacheUtilizationScorer : public Scorer {
 public:
  void score(const Decision& d, std::span<double> scores) override
  {
    for (size_t i = 0; i < d.candidates.size(); ++i) {
      const BlockCache* c = d.load.kv_caches.empty() ? nullptr : &d.load.kv_caches[size_t(d.candidates[i])];
      scores[i] = c && c->capacity() > 0 ? 1.0 - double(c->used() - c->evictable()) / double(c->capacity()) : 1.0;
    }
  }
};

class PrefixCacheScorer : public Scorer {
 public:
  void score(const Decision& d, std::span<double> scores) override
  {
    const auto& keys = d.load.prompt_block_keys;
    for (size_t i = 0; i < d.candidates.size(); ++i)
      scores[i] = keys.empty() || d.load.kv_caches.empty()
                      ? 0.0
                      : double(d.load.kv_caches[size_t(d.candidates[i])].match(keys)) / double(keys.size());
  }
};

// llm-d's precise-prefix-cache-scorer (v0.8.0 preciseprefixcache/utils.go): the index's hit counts are
// min-max normalised over the workers with a hit, every worker of the pool (not only the candidates);
// a worker without one scores 0.
class PrecisePrefixCacheScorer : public Scorer {
 public:
  void score(const Decision& d, std::span<double> scores) override
  {
    const DecodeLoadView& load = d.load;
    const bool known           = !load.prompt_block_keys.empty() && !load.kv_caches.empty();
    hits_.assign(size_t(load.workers()), 0.0);
    double lo = 0, hi = 0;
    for (int w = 0; known && w < load.workers(); ++w)
      if (const double n = double(load.kv_caches[size_t(w)].match(load.prompt_block_keys)); n > 0) {
        hits_[size_t(w)] = n;
        lo               = lo == 0 ? n : std::min(lo, n);
        hi               = std::max(hi, n);
      }
    for (size_t i = 0; i < d.candidates.size(); ++i) {
      const double n = hits_[size_t(d.candidates[i])];
      scores[i]      = n == 0 ? 0.0 : hi == lo ? 1.0 : (n - lo) / (hi - lo);
    }
  }

 private:
  std::vector<double> hits_;  // scratch: each worker's cached prompt blocks
};

template <class S> std::unique_ptr<Scorer> make(const Json&, PluginContext&)
{
  return std::make_unique<S>();
}

}  // namespace

extern const PluginEntry kKvCacheUtilizationScorer = {
    .type           = "kv-cache-utilization-scorer",
    .help           = "free KV memory: 1 - the fraction of KV blocks held by running requests",
    .scorer         = make<KvCacheUtilizationScorer>,
    .reads_kv_cache = true};

extern const PluginEntry kPrefixCacheScorer = {
    .type           = "prefix-cache-scorer",
    .help           = "the fraction of the prompt's full KV blocks cached on the worker (decode prefix cache)",
    .scorer         = make<PrefixCacheScorer>,
    .reads_kv_cache = true};

extern const PluginEntry kPrecisePrefixCacheScorer = {
    .type           = "precise-prefix-cache-scorer",
    .help           = "llm-d's KV-event prefix scorer: the prompt's full KV blocks cached on the worker, (n - min) / "
                      "(max - min) over the workers with a hit (1 when their hits are equal), 0 without a hit",
    .scorer         = make<PrecisePrefixCacheScorer>,
    .reads_kv_cache = true};

}  // namespace eldr
