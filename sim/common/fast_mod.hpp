#pragma once
// x mod n for a divisor fixed in advance, exactly and without a division instruction: Lemire, Kaser
// and Kurz, "Faster remainder by direct computation" (Software: Practice and Experience, 2019), the
// 64-bit case of github.com/lemire/fastmod (a 128-bit constant, three multiplications).
#include <cstdint>

namespace eldr {

// The constant of divisor n (n >= 1).
inline unsigned __int128 fast_mod_constant(uint64_t n)
{
  return ~(unsigned __int128)0 / n + 1;
}

// x mod n, given c = fast_mod_constant(n).
inline uint64_t fast_mod(uint64_t x, unsigned __int128 c, uint64_t n)
{
  const unsigned __int128 low    = c * x;
  const unsigned __int128 bottom = ((low & ~uint64_t(0)) * n) >> 64;
  return uint64_t((bottom + (low >> 64) * n) >> 64);
}

}  // namespace eldr
