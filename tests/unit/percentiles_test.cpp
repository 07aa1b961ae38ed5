// Percentiles (numpy "linear" method) and the deterministic random streams (sim/common).
#include "sim/common/percentiles.hpp"
#include "sim/common/rng.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

using namespace eldr;

TEST_CASE("percentiles: numpy linear interpolation with values by hand")
{
  // numpy.percentile([1, 2, 3, 4], q): position q/100 * 3 between sorted entries.
  //   50 -> 1.5 -> 2.5;  90 -> 2.7 -> 3.7;  95 -> 2.85 -> 3.85;  99 -> 2.97 -> 3.97
  std::vector<double> v = {1, 2, 3, 4};
  CHECK(percentile_sorted(v, 50) == doctest::Approx(2.5));
  CHECK(percentile_sorted(v, 90) == doctest::Approx(3.7));
  CHECK(percentile_sorted(v, 95) == doctest::Approx(3.85));
  CHECK(percentile_sorted(v, 99) == doctest::Approx(3.97));
  CHECK(percentile_sorted(v, 0) == 1);
  CHECK(percentile_sorted(v, 100) == 4);

  // summarize() sorts: [50, 10, 40, 20, 30] -> [10..50], positions q/100 * 4:
  //   50 -> 2 -> 30;  90 -> 3.6 -> 46;  95 -> 3.8 -> 48;  99 -> 3.96 -> 49.6;  mean 30
  Percentiles p = summarize({50, 10, 40, 20, 30});
  CHECK(p.count == 5);
  CHECK(p.p50 == doctest::Approx(30));
  CHECK(p.p90 == doctest::Approx(46));
  CHECK(p.p95 == doctest::Approx(48));
  CHECK(p.p99 == doctest::Approx(49.6));
  CHECK(p.mean == doctest::Approx(30));

  // 1..101: entry k at position k-1, so percentile q is exactly 1 + q.
  std::vector<double> h;
  for (int i = 101; i >= 1; --i)
    h.push_back(i);
  Percentiles ph = summarize(h);
  CHECK(ph.p50 == doctest::Approx(51));
  CHECK(ph.p99 == doctest::Approx(100));
  CHECK(ph.mean == doctest::Approx(51));

  Percentiles one = summarize({7});
  CHECK(one.p50 == 7);
  CHECK(one.p99 == 7);
  CHECK(one.mean == 7);

  Percentiles none = summarize({});
  CHECK(none.count == 0);
  CHECK(none.p99 == 0);
  CHECK(percentile_sorted({}, 50) == 0);
}

TEST_CASE("rng: reference values of splitmix64 and FNV-1a")
{
  // SplitMix64 seeded with 0: first output 0xe220a8397b1dcdaf (Vigna's reference implementation).
  CHECK(splitmix64(0) == 0xe220a8397b1dcdafULL);
  // FNV-1a 64: empty string = offset basis; "a" = 0xaf63dc4c8601ec8c (published test vector).
  CHECK(fnv1a("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv1a("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("rng: same seed same sequence and streams differ by name and by seed")
{
  Rng a(42, "x"), b(42, "x"), c(42, "y"), d(43, "x");
  std::vector<uint64_t> sa, sb, sc, sd;
  for (int i = 0; i < 1000; ++i) {
    sa.push_back(a());
    sb.push_back(b());
    sc.push_back(c());
    sd.push_back(d());
  }
  CHECK(sa == sb);
  CHECK(sa != sc);
  CHECK(sa != sd);
  CHECK(stream_seed(1, "workload.requests") != stream_seed(1, "workload.arrivals.measured"));
  CHECK(stream_seed(1, "a") != stream_seed(2, "a"));
  // The named constructor is the numeric one on the stream seed.
  Rng e(stream_seed(42, "x"));
  CHECK(e() == sa[0]);
  // Stream seeds of many names are all distinct.
  std::set<uint64_t> seeds;
  for (int i = 0; i < 1000; ++i)
    seeds.insert(stream_seed(7, "stream-" + std::to_string(i)));
  CHECK(seeds.size() == 1000);
}

TEST_CASE("rng: below(n) stays in range and is uniform")
{
  Rng r(1, "test");
  for (uint64_t n : {1ULL, 2ULL, 3ULL, 7ULL, 1000ULL, (1ULL << 63) + 5})
    for (int i = 0; i < 2000; ++i)
      CHECK(r.below(n) < n);
  for (int i = 0; i < 100; ++i)
    CHECK(r.below(1) == 0);

  // Chi-square over 10 bins, 100k draws: 9 dof, P(chi2 > 27.88) = 0.001.
  std::vector<long> counts(10, 0);
  const long n = 100000;
  for (long i = 0; i < n; ++i)
    ++counts[r.below(10)];
  double x2 = 0;
  for (long c : counts)
    x2 += (double(c) - 10000.0) * (double(c) - 10000.0) / 10000.0;
  CHECK(x2 < 27.88);

  // A range that is not a power of two and close to 2^64: both halves equally likely.
  const uint64_t big = 3ULL << 62;  // 1.5 * 2^63 -> values below 2^63 should be 2/3 of draws
  long low           = 0;
  for (long i = 0; i < 60000; ++i)
    low += r.below(big) < (1ULL << 63);
  CHECK(double(low) / 60000 == doctest::Approx(2.0 / 3.0).epsilon(0.02));
}

TEST_CASE("rng: uniform01 in 0..1 with mean 1/2 and exponential mean 1/rate")
{
  Rng r(5, "test");
  double sum = 0, esum = 0;
  long bad_u = 0, bad_x = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double u = r.uniform01();
    bad_u += (u < 0 || u >= 1);
    sum += u;
    double x = r.exponential(4.0);
    bad_x += !(x >= 0 && std::isfinite(x));
    esum += x;
  }
  CHECK(bad_u == 0);
  CHECK(bad_x == 0);
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.01));
  CHECK(esum / n == doctest::Approx(0.25).epsilon(0.01));
}
