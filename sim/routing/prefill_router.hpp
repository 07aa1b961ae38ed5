#pragma once
// Prefill routing as the measured proxy does it: a consistent hash of the prompt's first block
// (virtual nodes per worker on a 64-bit ring) keeps requests that share a prefix on one worker; if
// that worker holds more than load_factor x the mean in-flight prefills (+1), the least-loaded
// worker takes the request instead.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace eldr {

class PrefillRouter {
 public:
  PrefillRouter(int workers, int virtual_nodes, double load_factor);
  // The worker the hash ring maps `key` to, ignoring load.
  int owner(uint64_t key) const;
  // The worker to use given each worker's in-flight prefills (lowest index among the least loaded).
  int choose(uint64_t key, std::span<const int> in_flight) const;

 private:
  std::vector<std::pair<uint64_t, int>> ring_;  // (point, worker), sorted by point
  double load_factor_;
};

}  // namespace eldr
