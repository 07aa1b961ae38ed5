#include "sim/routing/domain_pools.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace eldr {

DomainPools make_domain_pools(const std::vector<long>& label_counts, const std::vector<std::string>& labels,
                              int workers, const std::vector<bool>& minor)
{
  const double total = double(std::accumulate(label_counts.begin(), label_counts.end(), 0L));
  if (total <= 0)
    throw std::invalid_argument("domain router: the calibration split has no requests to size pools from");
  DomainPools p;
  p.pool_of_label.assign(label_counts.size(), -1);
  std::vector<double> share;
  double misc = 0;
  for (size_t c = 0; c < label_counts.size(); ++c) {
    double s            = double(label_counts[c]) / total;
    const bool is_minor = c < minor.size() && minor[c];
    if (s >= 1.0 / workers && !is_minor) {
      p.pool_of_label[c] = int(share.size());
      p.names.push_back(c < labels.size() ? labels[c] : std::to_string(c));
      share.push_back(s);
    } else {
      misc += s;
    }
  }
  int misc_pool = -1;
  if (misc > 0) {
    misc_pool = int(share.size());
    p.names.push_back("misc");
    share.push_back(misc);
  }
  // floor(K x share), then the leftover workers to the largest remainders (lower pool index on ties).
  std::vector<int> size(share.size());
  int used = 0;
  for (size_t i = 0; i < share.size(); ++i)
    used += size[i] = int(std::floor(workers * share[i]));
  std::vector<size_t> order(share.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return workers * share[a] - size[a] > workers * share[b] - size[b]; });
  for (size_t k = 0; used < workers; ++k, ++used)
    ++size[order[k % order.size()]];
  int first = 0;
  for (size_t i = 0; i < share.size(); ++i) {
    p.first.push_back(first);
    p.size.push_back(size[i]);
    first += size[i];
  }
  for (size_t c = 0; c < label_counts.size(); ++c)
    if (p.pool_of_label[c] < 0 && misc_pool >= 0 && label_counts[c] > 0)
      p.pool_of_label[c] = misc_pool;
  // A pool that got no worker (a tiny misc share) sends its labels anywhere.
  for (int& pool : p.pool_of_label)
    if (pool >= 0 && p.size[size_t(pool)] == 0)
      pool = -1;
  return p;
}

DomainPools domain_pools_for(const RouterSetup& setup)
{
  if (!setup.workload)
    throw std::invalid_argument("domain pools need the workload's calibration split");
  const Workload& w = *setup.workload;
  std::vector<long> counts(w.labels.size(), 0);
  for (const Request& r : w.calibration)
    if (r.label < counts.size())
      ++counts[r.label];
  return make_domain_pools(counts, w.labels, setup.decode_workers, w.minor_labels);
}

}  // namespace eldr
