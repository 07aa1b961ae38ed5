#include "sim/cache/prefix_blocks.hpp"
#include "sim/common/rng.hpp"

namespace eldr {

void prompt_block_keys(const Workload& w, const Request& r, int block_tokens, std::vector<uint64_t>& keys)
{
  const auto hashes = w.hashes(r);
  const int n       = full_blocks(r.prompt_tokens, block_tokens);
  keys.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const long end = long(i + 1) * block_tokens;
    const long j   = hashes.empty() ? -1 : (end + w.prefix_block_tokens - 1) / w.prefix_block_tokens - 1;
    // A request's own blocks: its routing seed is drawn per request, so it keys them apart.
    const uint64_t base =
        j >= 0 && j < long(hashes.size()) ? hashes[size_t(j)] : splitmix64(r.routing_seed ^ 0x6b76626c6f636bULL);
    keys[size_t(i)] = splitmix64(base + uint64_t(end));
  }
}

}  // namespace eldr
