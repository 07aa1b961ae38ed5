#pragma once
// The KV blocks of one worker with prefix caching, as vLLM's block manager keeps them: a full prompt
// block is identified by a chained hash of the prompt up to its end (prefix_blocks.hpp); a block in
// use by a request holds a reference; a block nobody references stays cached (a later request with
// the same prefix reuses it) until memory is needed, then the least recently released goes first.
// Blocks that can never be shared (a prompt's partial last block, output tokens) are "private":
// counted, not indexed. Capacity is in blocks; nothing here ever exceeds it.
//
// Each cached block also remembers where its tokens came from (BlockOrigin): a router that profiles
// cached blocks (DecodeRouter::profiles_cached_blocks) has per-block expert counts allocated and
// evicted with the block, and a block's counts are a function of its tokens, so the origin is what
// the simulator needs to reproduce them (sim/gating/prompt_profile.hpp).
//
// Plain C++ (no SimGrid).
#include "sim/workload/request.hpp"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace eldr {

// The request whose prompt tokens filled a block, and the block's first token.
struct BlockOrigin {
  const Request* request = nullptr;
  int first_token        = 0;
};

struct BlockCacheStats {
  long lookups       = 0;  // acquire() calls
  long hit_blocks    = 0;  // leading blocks found cached (their compute or transfer is saved)
  long missed_blocks = 0;  // full prompt blocks that had to be filled
  long evictions     = 0;
  long peak_used     = 0;  // blocks, cached + private
};

class BlockCache {
 public:
  explicit BlockCache(long capacity_blocks);

  long capacity() const { return capacity_; }
  long used() const { return long(nodes_.size() - free_slots_.size()) + private_; }
  // Blocks holding data no request references: evictable.
  long evictable() const { return evictable_; }
  const BlockCacheStats& stats() const { return stats_; }

  // How many leading blocks of `keys` are cached now (the reusable prefix).
  long match(std::span<const uint64_t> keys) const;
  bool contains(uint64_t key) const { return index_.count(key) != 0; }
  // The origin of a cached block (nullptr request when absent).
  BlockOrigin origin(uint64_t key) const;

  // Whether acquire(keys, private_blocks) would succeed now.
  bool fits(std::span<const uint64_t> keys, long private_blocks) const;
  // References every block of `keys` (cached ones are reused; the others are allocated, evicting the
  // least recently released unreferenced blocks, and record `origins[i]`) and allocates
  // `private_blocks` more. Returns the number of leading blocks that were cached (the hit), or -1 with
  // nothing changed when they do not fit. `origins` is empty or as long as `keys`.
  long acquire(std::span<const uint64_t> keys, long private_blocks, std::span<const BlockOrigin> origins = {});
  // Drops one reference on each of `keys` (which must be referenced) and frees `private_blocks`.
  // Blocks left unreferenced become evictable; the last block of `keys` is evicted first, as vLLM
  // frees a request's blocks tail first (a prefix's tail is the least likely to be shared).
  void release(std::span<const uint64_t> keys, long private_blocks);
  // The reference count of a cached block (0: cached, evictable; -1: absent). For tests.
  int references(uint64_t key) const;

 private:
  struct Node {
    uint64_t key = 0;
    int refs     = 0;
    BlockOrigin origin;
    int32_t prev = -1, next = -1;  // LRU list of unreferenced blocks: head is evicted first
  };
  void unlink(int32_t n);
  void push_back_lru(int32_t n);
  int32_t allocate(uint64_t key, const BlockOrigin& origin);
  void evict_one();

  long capacity_;
  long private_   = 0;
  long evictable_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_slots_;
  std::unordered_map<uint64_t, int32_t> index_;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  BlockCacheStats stats_;
};

}  // namespace eldr
