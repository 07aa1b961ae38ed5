// Worked example (docs/adding-a-router.md section 5): a scorer that prefers workers with KV headroom.
// A worker with at least headroom_blocks free KV blocks scores 1, one with fewer scores its free blocks
// / headroom_blocks: the scorer tells apart only workers near full, where a long decode could wait for
// memory, and leaves the others to the other scorers (unlike kv-cache-utilization-scorer, which ranks
// every worker by its free fraction). Free blocks count as vLLM's: not held by a running request
// (cached blocks nobody holds are free). Without KV caches in the view (unit tests) every worker
// scores 1.
//
// Registered by one line in sim/routing/registry/plugin_table.cpp; used as
//   "composed": {"scorers": {"kv-headroom-scorer": {"headroom_blocks": 64}, "queue-scorer": {}}}
#include "sim/routing/compose/plugin.hpp"

#include <algorithm>

namespace eldr {

namespace {

class KvHeadroomScorer : public Scorer {
 public:
  explicit KvHeadroomScorer(const Json& params) : headroom_(double(params["headroom_blocks"].get<long>())) {}
  void score(const Decision& d, std::span<double> scores) override
  {
    for (size_t i = 0; i < d.candidates.size(); ++i) {
      if (d.load.kv_caches.empty()) {
        scores[i] = 1.0;
        continue;
      }
      const BlockCache& c = d.load.kv_caches[size_t(d.candidates[i])];
      const double free   = double(c.capacity() - (c.used() - c.evictable()));
      scores[i]           = std::min(1.0, free / headroom_);
    }
  }

 private:
  double headroom_;
};

// Its parameters, paths relative to its section (composed.scorers.kv-headroom-scorer); the composition
// adds the weight every scorer has.
constexpr ConfigKey kKeys[] = {
    {.path = "headroom_blocks",
     .type = KeyType::integer,
     .def  = "64",
     .unit = "blocks",
     .min  = 1,
     .max  = 1e9,
     .help = "free KV blocks from which a worker scores 1 (fewer: free / headroom_blocks)"},
};

}  // namespace

extern const PluginEntry kKvHeadroomScorer = {
    .type   = "kv-headroom-scorer",
    .help   = "example: KV headroom, min(1, free KV blocks / headroom_blocks)",
    .keys   = kKeys,
    .scorer = [](const Json& params, PluginContext&) -> std::unique_ptr<Scorer> {
      return std::make_unique<KvHeadroomScorer>(params);
    },
    .reads_kv_cache = true};

}  // namespace eldr
