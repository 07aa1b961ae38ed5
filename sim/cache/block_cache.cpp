#include "sim/cache/block_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace eldr {

BlockCache::BlockCache(long capacity_blocks) : capacity_(capacity_blocks)
{
  if (capacity_blocks < 1)
    throw std::invalid_argument("a block cache needs room for at least one block");
}

long BlockCache::match(std::span<const uint64_t> keys) const
{
  long n = 0;
  while (n < long(keys.size()) && index_.count(keys[size_t(n)]))
    ++n;
  return n;
}

BlockOrigin BlockCache::origin(uint64_t key) const
{
  auto it = index_.find(key);
  return it == index_.end() ? BlockOrigin{} : nodes_[size_t(it->second)].origin;
}

int BlockCache::references(uint64_t key) const
{
  auto it = index_.find(key);
  return it == index_.end() ? -1 : nodes_[size_t(it->second)].refs;
}

bool BlockCache::fits(std::span<const uint64_t> keys, long private_blocks) const
{
  long missing = 0, revived = 0;  // blocks to allocate; evictable blocks that acquiring would pin
  for (uint64_t k : keys) {
    auto it = index_.find(k);
    if (it == index_.end())
      ++missing;
    else if (nodes_[size_t(it->second)].refs == 0)
      ++revived;
  }
  return used() + missing + private_blocks - (evictable_ - revived) <= capacity_;
}

long BlockCache::acquire(std::span<const uint64_t> keys, long private_blocks, std::span<const BlockOrigin> origins)
{
  if (!origins.empty() && origins.size() != keys.size())
    throw std::invalid_argument("block origins must match the keys one to one");
  if (!fits(keys, private_blocks))
    return -1;
  ++stats_.lookups;
  const long hit = match(keys);
  // Pin the cached blocks first, so that making room for the new ones cannot evict them.
  for (uint64_t k : keys) {
    auto it = index_.find(k);
    if (it == index_.end())
      continue;
    Node& n = nodes_[size_t(it->second)];
    if (n.refs++ == 0) {
      unlink(it->second);
      --evictable_;
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (index_.count(keys[i]))
      continue;
    while (used() + 1 > capacity_)
      evict_one();
    nodes_[size_t(allocate(keys[i], origins.empty() ? BlockOrigin{} : origins[i]))].refs = 1;
    ++stats_.missed_blocks;
  }
  while (used() + private_blocks > capacity_)
    evict_one();
  private_ += private_blocks;
  stats_.hit_blocks += hit;
  stats_.peak_used = std::max(stats_.peak_used, used());
  return hit;
}

void BlockCache::release(std::span<const uint64_t> keys, long private_blocks)
{
  if (private_blocks > private_)
    throw std::logic_error("releasing " + std::to_string(private_blocks) + " private blocks of " +
                           std::to_string(private_) + " held");
  private_ -= private_blocks;
  // Tail first into the LRU order, so that the tail is evicted before the shared head.
  for (auto k = keys.rbegin(); k != keys.rend(); ++k) {
    auto it = index_.find(*k);
    if (it == index_.end() || nodes_[size_t(it->second)].refs == 0)
      throw std::logic_error("releasing a KV block that is not referenced");
    if (--nodes_[size_t(it->second)].refs == 0) {
      push_back_lru(it->second);
      ++evictable_;
    }
  }
}

void BlockCache::unlink(int32_t i)
{
  Node& n                                                 = nodes_[size_t(i)];
  (n.prev >= 0 ? nodes_[size_t(n.prev)].next : lru_head_) = n.next;
  (n.next >= 0 ? nodes_[size_t(n.next)].prev : lru_tail_) = n.prev;
  n.prev = n.next = -1;
}

void BlockCache::push_back_lru(int32_t i)
{
  Node& n                                                       = nodes_[size_t(i)];
  n.prev                                                        = lru_tail_;
  n.next                                                        = -1;
  (lru_tail_ >= 0 ? nodes_[size_t(lru_tail_)].next : lru_head_) = i;
  lru_tail_                                                     = i;
}

int32_t BlockCache::allocate(uint64_t key, const BlockOrigin& origin)
{
  int32_t i;
  if (!free_slots_.empty()) {
    i = free_slots_.back();
    free_slots_.pop_back();
  } else {
    i = int32_t(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[size_t(i)] = Node{key, 0, origin, -1, -1};
  index_.emplace(key, i);
  return i;
}

void BlockCache::evict_one()
{
  if (lru_head_ < 0)
    throw std::logic_error("KV block cache over capacity with nothing to evict");
  const int32_t i = lru_head_;
  unlink(i);
  index_.erase(nodes_[size_t(i)].key);
  free_slots_.push_back(i);
  --evictable_;
  ++stats_.evictions;
}

}  // namespace eldr
