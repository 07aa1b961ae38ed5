#pragma once
// The domain oracle's pools: it knows each request's label. Decode workers are split into contiguous
// pools sized by each label's share of the calibration split (labels under 1/K, and labels that
// gather such labels (Workload::minor_labels), share a "misc" pool; pool sizes floor(K x share),
// leftovers by largest remainder). The oracle (router "domain": the
// label-pool filter, then the shortest queue) sends a request to its label's pool; labels without a
// pool (a misc pool of zero workers, or unknown) go anywhere.
#include "sim/routing/router_setup.hpp"

#include <string>
#include <vector>

namespace eldr {

struct DomainPools {
  std::vector<int> pool_of_label;  // label index -> pool index, -1: no pool
  std::vector<int> first, size;    // per pool: first worker and number of workers
  std::vector<std::string> names;  // per pool: the label, or "misc"
};

// Pools for K workers from label counts (index = label); `minor` (by label, may be shorter): labels
// that go to the misc pool whatever their share.
DomainPools make_domain_pools(const std::vector<long>& label_counts, const std::vector<std::string>& labels,
                              int workers, const std::vector<bool>& minor = {});

// The pools for the run's decode workers from its workload's calibration split; throws
// std::invalid_argument without one.
DomainPools domain_pools_for(const RouterSetup& setup);

// The pool of a request's label, -1 for none (the label may go anywhere).
inline int pool_of(const DomainPools& p, const Request& r)
{
  return r.label < p.pool_of_label.size() ? p.pool_of_label[r.label] : -1;
}

}  // namespace eldr
