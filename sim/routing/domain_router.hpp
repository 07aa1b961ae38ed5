#pragma once
// The domain oracle: knows each request's label. Decode workers are split into contiguous pools
// sized by each label's share of the calibration split (labels under 1/K share a "misc" pool; pool
// sizes floor(K x share), leftovers by largest remainder), and requests join the shortest queue of
// their label's pool. Labels without a pool (a misc pool of zero workers, or unknown) go anywhere.
#include "sim/common/rng.hpp"
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <string>
#include <vector>

namespace eldr {

struct DomainPools {
  std::vector<int> pool_of_label;  // label index -> pool index, -1: no pool
  std::vector<int> first, size;    // per pool: first worker and number of workers
  std::vector<std::string> names;  // per pool: the label, or "misc"
};

// Pools for K workers from label counts (index = label).
DomainPools make_domain_pools(const std::vector<long>& label_counts, const std::vector<std::string>& labels,
                              int workers);

class DomainRouter : public DecodeRouter {
 public:
  explicit DomainRouter(const RouterSetup& setup);
  std::string_view name() const override { return "domain"; }
  int choose(const Request& r, const DecodeLoadView& load) override;
  // Every worker of the label's pool (none: any worker).
  std::vector<int> home_workers(const Request& r, const PromptProfile& prompt) const override;
  const DomainPools& pools() const { return pools_; }

 private:
  DomainPools pools_;
  Rng rng_;
};

}  // namespace eldr
