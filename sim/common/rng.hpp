#pragma once
// Deterministic random streams. Every stream is seeded from the run seed and a stable name, so adding
// a stream never shifts another, and results do not depend on the standard library's distributions.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace eldr {

inline constexpr uint64_t splitmix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a: a stable hash of a stream name (std::hash is not stable across implementations).
inline constexpr uint64_t fnv1a(std::string_view s)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s)
    h = (h ^ uint8_t(c)) * 0x100000001b3ULL;
  return h;
}

inline constexpr uint64_t stream_seed(uint64_t run_seed, std::string_view name)
{
  return splitmix64(run_seed ^ splitmix64(fnv1a(name)));
}

// xoshiro256** (Blackman & Vigna): fast, good statistical quality, 2^256 period.
class Rng {
 public:
  using result_type = uint64_t;
  explicit Rng(uint64_t seed)
  {
    for (auto& w : s_) {
      seed = splitmix64(seed);
      w    = seed;
    }
  }
  Rng(uint64_t run_seed, std::string_view name) : Rng(stream_seed(run_seed, name)) {}

  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~uint64_t(0); }

  uint64_t operator()()
  {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t      = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return double((*this)() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n)
  {
    __uint128_t m = __uint128_t((*this)()) * n;
    uint64_t low  = uint64_t(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m   = __uint128_t((*this)()) * n;
        low = uint64_t(m);
      }
    }
    return uint64_t(m >> 64);
  }
  // Exponential with the given rate (mean 1/rate).
  double exponential(double rate) { return -std::log1p(-uniform01()) / rate; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace eldr
