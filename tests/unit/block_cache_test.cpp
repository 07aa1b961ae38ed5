// KV block cache with prefix reuse (sim/cache/block_cache.hpp) and prompt block keys
// (sim/cache/prefix_blocks.hpp): by hand, and against a brute-force model on random operations.
#include "sim/cache/block_cache.hpp"
#include "sim/cache/prefix_blocks.hpp"
#include "sim/common/rng.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <vector>

using namespace eldr;

TEST_CASE("block cache: hits, references and LRU eviction by hand")
{
  BlockCache c(4);
  const std::vector<uint64_t> ab{1, 2}, cd{3, 4}, ae{1, 5};
  CHECK(c.acquire(ab, 0) == 0);  // nothing cached yet
  CHECK(c.used() == 2);
  CHECK(c.references(1) == 1);
  CHECK(c.acquire(ab, 0) == 2);  // a second request with the same prefix shares both blocks
  CHECK(c.used() == 2);
  CHECK(c.references(2) == 2);
  c.release(ab, 0);
  c.release(ab, 0);
  CHECK(c.evictable() == 2);
  CHECK(c.references(1) == 0);  // cached, unreferenced
  CHECK(c.acquire(cd, 0) == 0);
  c.release(cd, 0);
  // LRU: released tail first, so the order of eviction is 2, 1, 4, 3.
  CHECK(c.acquire(std::vector<uint64_t>{6}, 0) == 0);  // 4 blocks used: evicts block 2
  CHECK(c.references(2) == -1);
  CHECK(c.stats().evictions == 1);
  CHECK(c.match(ab) == 1);       // block 1 is still there, its successor is not
  CHECK(c.acquire(ae, 0) == 1);  // reuses 1 (pinned first), allocates 5 by evicting 4
  CHECK(c.references(4) == -1);
  CHECK(c.contains(3));
  CHECK(c.stats().evictions == 2);
  CHECK(c.used() == 4);
  CHECK(c.stats().hit_blocks == 2 + 1);
  CHECK(c.stats().missed_blocks == 2 + 2 + 1 + 1);
}

TEST_CASE("block cache: private blocks, refusals change nothing, capacity is never exceeded")
{
  BlockCache c(3);
  const std::vector<uint64_t> a{10};
  CHECK(c.acquire(a, 2) == 0);
  CHECK(c.used() == 3);
  CHECK_FALSE(c.fits(std::vector<uint64_t>{11}, 0));
  CHECK(c.acquire(std::vector<uint64_t>{11}, 0) == -1);
  CHECK(c.used() == 3);
  CHECK(c.stats().lookups == 1);
  CHECK(c.fits(a, 0));  // a shared block costs nothing more
  CHECK_FALSE(c.fits({}, 1));
  c.release(a, 2);
  CHECK(c.used() == 1);  // block 10 stays cached
  CHECK(c.fits({}, 3));  // ... but can be evicted for room
  CHECK(c.acquire({}, 3) == 0);
  CHECK_FALSE(c.contains(10));
  CHECK(c.used() == 3);
  CHECK_THROWS_AS(c.release(a, 0), std::logic_error);  // not referenced
  CHECK_THROWS_AS(c.release({}, 4), std::logic_error);
}

TEST_CASE("block cache: eviction removes the block's origin (its signature entry) with it")
{
  BlockCache c(2);
  Request r;
  r.id = 7;
  const std::vector<uint64_t> k{1, 2};
  const std::vector<BlockOrigin> o{{&r, 0}, {&r, 16}};
  c.acquire(k, 0, o);
  CHECK(c.origin(2).request == &r);
  CHECK(c.origin(2).first_token == 16);
  c.release(k, 0);
  c.acquire(std::vector<uint64_t>{3}, 0);  // evicts 2 (the tail)
  CHECK(c.origin(2).request == nullptr);
  CHECK(c.origin(1).request == &r);
  CHECK(c.used() == 2);
}

TEST_CASE("block cache: random operations against a brute-force model")
{
  // The model: a map key -> refs, an LRU list of unreferenced keys, a private count.
  Rng rng(42);
  const long capacity = 24;
  BlockCache c(capacity);
  std::map<uint64_t, int> refs;
  std::vector<uint64_t> lru;  // front evicted first
  long priv = 0;
  struct Held {
    std::vector<uint64_t> keys;
    long priv;
  };
  std::vector<Held> held;
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng.below(2) == 0) {
      // A prompt: a chain of up to 6 keys from a small alphabet of prefixes, plus private blocks.
      std::vector<uint64_t> keys;
      uint64_t h = rng.below(5);
      for (uint64_t n = rng.below(7); n > 0; --n) {
        keys.push_back(h * 131 + keys.size());
        h = h * 7 + rng.below(2);
      }
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
      const long p = long(rng.below(4));
      long missing = 0, revived = 0;
      for (uint64_t k : keys) {
        auto it = refs.find(k);
        missing += it == refs.end();
        revived += it != refs.end() && it->second == 0;
      }
      const long used      = long(refs.size()) + priv;
      const bool fits_want = used + missing + p - (long(lru.size()) - revived) <= capacity;
      long lead            = 0;
      while (lead < long(keys.size()) && refs.count(keys[size_t(lead)]))
        ++lead;
      const long got = c.acquire(keys, p);
      REQUIRE(fits_want == (got >= 0));
      if (got < 0)
        continue;
      CHECK(got == lead);
      for (uint64_t k : keys)
        if (refs.count(k) && refs[k]++ == 0)
          lru.erase(std::find(lru.begin(), lru.end(), k));
      for (uint64_t k : keys)
        if (!refs.count(k)) {
          while (long(refs.size()) + priv + 1 > capacity) {
            refs.erase(lru.front());
            lru.erase(lru.begin());
          }
          refs[k] = 1;
        }
      while (long(refs.size()) + priv + p > capacity) {
        refs.erase(lru.front());
        lru.erase(lru.begin());
      }
      priv += p;
      held.push_back({keys, p});
    } else {
      const size_t i = size_t(rng.below(held.size()));
      c.release(held[i].keys, held[i].priv);
      priv -= held[i].priv;
      for (auto k = held[i].keys.rbegin(); k != held[i].keys.rend(); ++k)
        if (--refs[*k] == 0)
          lru.push_back(*k);
      held.erase(held.begin() + long(i));
    }
    REQUIRE(c.used() == long(refs.size()) + priv);
    REQUIRE(c.used() <= capacity);
    REQUIRE(c.evictable() == long(lru.size()));
    for (const auto& [k, n] : refs)
      REQUIRE(c.references(k) == n);
  }
  CHECK(c.stats().peak_used <= capacity);
  CHECK(c.stats().evictions > 0);
}

namespace {
std::vector<uint64_t> keys_of(const Workload& w, const Request& r, int block_tokens)
{
  std::vector<uint64_t> k;
  prompt_block_keys(w, r, block_tokens, k);
  return k;
}
}  // namespace

TEST_CASE("prefix blocks: keys from workload hashes of another block size, by hand")
{
  Workload w;
  w.prefix_block_tokens = 16;
  // Two prompts sharing their first 3 hash blocks (48 tokens), then differing.
  w.prefix_hashes = {101, 102, 103, 104, 105, 101, 102, 103, 204};
  Request a, b;
  a.prompt_tokens = 80, a.hash_begin = 0, a.hash_count = 5, a.routing_seed = 1;
  b.prompt_tokens = 70, b.hash_begin = 5, b.hash_count = 4, b.routing_seed = 2;
  // 16-token KV blocks: 5 full for a, 4 full for b; the first 3 equal.
  auto ka = keys_of(w, a, 16), kb = keys_of(w, b, 16);
  REQUIRE(ka.size() == 5);
  REQUIRE(kb.size() == 4);
  CHECK(ka[0] == kb[0]);
  CHECK(ka[2] == kb[2]);
  CHECK(ka[3] != kb[3]);
  CHECK(ka[0] == splitmix64(101 + 16));
  // 32-token blocks: block 0 ends at token 32 (hash block 1): shared; block 1 ends at 64 (hash 3): not.
  ka = keys_of(w, a, 32), kb = keys_of(w, b, 32);
  REQUIRE(ka.size() == 2);
  REQUIRE(kb.size() == 2);
  CHECK(ka[0] == kb[0]);
  CHECK(ka[0] == splitmix64(102 + 32));
  CHECK(ka[1] != kb[1]);
  // Hash blocks larger than KV blocks (Mooncake's 512): every KV block inside one hash block is keyed
  // by that hash and its own end, so two prompts share exactly the KV blocks of their common hashes.
  Workload m;
  m.prefix_block_tokens = 512;
  m.prefix_hashes       = {7, 8, 7, 9};
  Request c, d;
  c.prompt_tokens = 1024, c.hash_begin = 0, c.hash_count = 2, c.routing_seed = 3;
  d.prompt_tokens = 1000, d.hash_begin = 2, d.hash_count = 2, d.routing_seed = 4;
  auto kc = keys_of(m, c, 16), kd = keys_of(m, d, 16);
  REQUIRE(kc.size() == 64);
  REQUIRE(kd.size() == 62);
  for (int i = 0; i < 32; ++i)
    CHECK(kc[size_t(i)] == kd[size_t(i)]);
  for (int i = 32; i < 62; ++i)
    CHECK(kc[size_t(i)] != kd[size_t(i)]);
  std::sort(kc.begin(), kc.end());
  CHECK(std::adjacent_find(kc.begin(), kc.end()) == kc.end());  // a prompt's keys are distinct
  // Without hashes a prompt's blocks are its own.
  Request e = c, f = c;
  e.hash_count = f.hash_count = 0;
  f.routing_seed              = 5;
  auto ke = keys_of(m, e, 16), kf = keys_of(m, f, 16);
  CHECK(ke.size() == 64);
  CHECK(ke[0] != kf[0]);
}

TEST_CASE("prefix blocks: a prefill always computes the prompt's last token (vLLM)")
{
  CHECK(full_blocks(64, 16) == 4);
  CHECK(full_blocks(63, 16) == 3);
  CHECK(total_blocks(65, 16) == 5);
  CHECK(usable_prefix_blocks(4, 64, 16) == 3);  // fully cached, 64 tokens: recompute the last block
  CHECK(usable_prefix_blocks(4, 65, 16) == 4);  // 64 cached, the 65th token computed
  CHECK(usable_prefix_blocks(2, 65, 16) == 2);
  CHECK(usable_prefix_blocks(0, 1, 16) == 0);
}
