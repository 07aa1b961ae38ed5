// PrefillRouter (sim/routing/prefill_router.hpp): consistent hash ring with a load guard.
#include "sim/common/rng.hpp"
#include "sim/routing/prefill_router.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace eldr;

TEST_CASE("prefill router: the owner of a key is stable")
{
  PrefillRouter a(8, 160, 1.25), b(8, 160, 1.25);
  Rng rng(3, "test.keys");
  for (int i = 0; i < 2000; ++i) {
    uint64_t key = rng();
    int w        = a.owner(key);
    CHECK((w >= 0 && w < 8));
    CHECK(a.owner(key) == w);  // repeatable
    CHECK(b.owner(key) == w);  // independent of the instance
    // With no load anywhere the guard never fires: the owner takes it.
    std::vector<int> idle(8, 0);
    CHECK(a.choose(key, idle) == w);
  }
}

TEST_CASE("prefill router: adding a worker only moves keys to the new worker")
{
  // Consistent hashing: workers 0..7 keep their ring points when worker 8 joins, so a key either keeps
  // its owner or moves to worker 8, and about 1/9 of the keys move.
  PrefillRouter eight(8, 160, 1.25), nine(9, 160, 1.25);
  Rng rng(5, "test.keys");
  long moved   = 0;
  const long n = 50000;
  for (long i = 0; i < n; ++i) {
    uint64_t key = rng();
    int before   = eight.owner(key);
    int after    = nine.owner(key);
    if (after != before) {
      CHECK(after == 8);
      ++moved;
    }
  }
  CHECK(double(moved) / n > 0.08);
  CHECK(double(moved) / n < 0.15);
}

TEST_CASE("prefill router: with 160 virtual nodes each of 8 workers gets 8-17% of 100k keys")
{
  PrefillRouter r(8, 160, 1.25);
  Rng rng(11, "test.keys");
  std::vector<long> counts(8, 0);
  const long n = 100000;
  for (long i = 0; i < n; ++i)
    ++counts[size_t(r.owner(rng()))];
  for (int w = 0; w < 8; ++w) {
    CAPTURE(w);
    CHECK(double(counts[size_t(w)]) / n > 0.08);
    CHECK(double(counts[size_t(w)]) / n < 0.17);
  }

  // With a single virtual node the shares are far more uneven than with 160 (why vnodes exist).
  PrefillRouter coarse(8, 1, 1.25);
  std::vector<long> c1(8, 0);
  Rng rng2(11, "test.keys");
  for (long i = 0; i < n; ++i)
    ++c1[size_t(coarse.owner(rng2()))];
  auto spread = [](const std::vector<long>& c) {
    long lo = c[0], hi = c[0];
    for (long x : c) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    return hi - lo;
  };
  CHECK(spread(c1) > spread(counts));
}

TEST_CASE("prefill router: the load guard sends work to the least loaded when the owner is overloaded")
{
  // Find keys owned by worker 0 and by worker 2 on a 5-worker ring.
  PrefillRouter r(5, 160, 1.25);
  Rng rng(1, "test.keys");
  uint64_t key0 = 0, key2 = 0;
  bool have0 = false, have2 = false;
  while (!(have0 && have2)) {
    uint64_t k = rng();
    int o      = r.owner(k);
    if (o == 0 && !have0) {
      key0  = k;
      have0 = true;
    }
    if (o == 2 && !have2) {
      key2  = k;
      have2 = true;
    }
  }

  // Loads {4, 2, 2, 2, 2}: mean 2.4, limit 1.25 * 2.4 + 1 = 4. The owner holds exactly 4, not more:
  // it keeps the request.
  CHECK(r.choose(key0, std::vector<int>{4, 2, 2, 2, 2}) == 0);
  // Loads {5, 2, 2, 2, 2}: mean 2.6, limit 4.25 < 5: the least loaded takes it, the lowest index
  // among the tied minima (worker 1).
  CHECK(r.choose(key0, std::vector<int>{5, 2, 2, 2, 2}) == 1);
  // Loads {5, 3, 3, 1, 3}: mean 3, limit 4.75 < 5 -> worker 3, the unique minimum.
  CHECK(r.choose(key0, std::vector<int>{5, 3, 3, 1, 3}) == 3);
  // Worker 0 overloaded does not matter for a key owned by worker 2.
  CHECK(r.choose(key2, std::vector<int>{50, 0, 0, 0, 0}) == 2);

  // From idle: 8 workers, the owner's load L, others 0: limit = 1.25 L / 8 + 1. L = 1 stays
  // (1 <= 1.156); L = 2 moves (2 > 1.3125).
  PrefillRouter r8(8, 160, 1.25);
  uint64_t k = 12345;
  int o      = r8.owner(k);
  std::vector<int> loads(8, 0);
  loads[size_t(o)] = 1;
  CHECK(r8.choose(k, loads) == o);
  loads[size_t(o)] = 2;
  CHECK(r8.choose(k, loads) == (o == 0 ? 1 : 0));

  // A huge load factor disables the guard short of extreme imbalance.
  PrefillRouter lax(8, 160, 1e6);
  CHECK(lax.choose(k, loads) == o);
}
