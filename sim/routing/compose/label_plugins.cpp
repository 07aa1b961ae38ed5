// The plugins that read the request's label (the domain oracle's): label-pool-filter and
// label-match-scorer, sharing the router's pools of workers (domain_pools.hpp).
#include "sim/routing/compose/plugin.hpp"
#include "sim/routing/domain_pools.hpp"

namespace eldr {

namespace {

// The pools of one router, built from the workload's calibration split; where a request belongs.
class LabelPools : public RouterPart {
 public:
  explicit LabelPools(DomainPools pools) : pools_(std::move(pools)) {}
  static std::unique_ptr<LabelPools> make(const RouterSetup& setup)
  {
    return std::make_unique<LabelPools>(domain_pools_for(setup));
  }

  // The workers [first, last) of the request's pool; first == last == -1 for a label without one.
  std::pair<int, int> pool_range(const Request& r) const
  {
    const int pool = pool_of(pools_, r);
    if (pool < 0)
      return {-1, -1};
    const int first = pools_.first[size_t(pool)];
    return {first, first + pools_.size[size_t(pool)]};
  }

  // The label's pool: what the request's label says, before any estimate.
  std::optional<std::vector<int>> home_workers(const Request& r, const PromptProfile&) const override
  {
    std::vector<int> w;
    const auto [first, last] = pool_range(r);
    for (int k = first; k < last; ++k)
      w.push_back(k);
    return w;
  }
  int home_precedence() const override { return 0; }

 private:
  DomainPools pools_;
};

class LabelPoolFilter : public Filter {
 public:
  explicit LabelPoolFilter(const LabelPools& pools) : pools_(pools) {}
  void keep(const Decision& d, std::vector<int>& kept) override
  {
    const auto [first, last] = pools_.pool_range(d.request);
    if (first < 0) {
      kept.assign(d.candidates.begin(), d.candidates.end());  // a label without a pool goes anywhere
      return;
    }
    for (int w : d.candidates)
      if (w >= first && w < last)
        kept.push_back(w);
  }

 private:
  const LabelPools& pools_;
};

class LabelMatchScorer : public Scorer {
 public:
  explicit LabelMatchScorer(const LabelPools& pools) : pools_(pools) {}
  void score(const Decision& d, std::span<double> scores) override
  {
    const auto [first, last] = pools_.pool_range(d.request);
    for (size_t i = 0; i < d.candidates.size(); ++i)
      scores[i] = d.candidates[i] >= first && d.candidates[i] < last ? 1.0 : 0.0;
  }

 private:
  const LabelPools& pools_;
};

}  // namespace

extern const PluginEntry kLabelPoolFilter = {
    .type   = "label-pool-filter",
    .help   = "the domain oracle's pool for the request's label (every worker for a label without one)",
    .filter = [](const Json&, PluginContext& ctx) -> std::unique_ptr<Filter> {
      return std::make_unique<LabelPoolFilter>(ctx.shared(&LabelPools::make));
    }};

extern const PluginEntry kLabelMatchScorer = {.type   = "label-match-scorer",
                                              .help   = "1 on the workers of the request label's pool, else 0",
                                              .scorer = [](const Json&, PluginContext& ctx) -> std::unique_ptr<Scorer> {
                                                return std::make_unique<LabelMatchScorer>(
                                                    ctx.shared(&LabelPools::make));
                                              }};

}  // namespace eldr
