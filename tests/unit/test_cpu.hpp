#pragma once
// Which vector paths a unit test may hold against the portable ones. A test compares a vector kernel
// with the portable kernel only where the CPU has it, and checks the portable kernel against an
// independent computation everywhere. ELDRSIM_TEST_PORTABLE=1 makes the tests behave as on a CPU
// without the vector path, so that the portable-only branches can be run (and shown to fail on a
// broken kernel) on a machine that has it.
#include <cstdlib>

namespace test_cpu {

inline bool portable_forced()
{
  const char* v = std::getenv("ELDRSIM_TEST_PORTABLE");
  return v != nullptr && *v != '\0' && *v != '0';
}

inline bool vector_path_avx512f()
{
  __builtin_cpu_init();
  return !portable_forced() && __builtin_cpu_supports("avx512f");
}

}  // namespace test_cpu
