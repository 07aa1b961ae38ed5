#pragma once
// A workload for the router tests and benchmarks (tests/unit/router_registry_test.cpp, bench/bm_routers.cpp).
#include "sim/workload/request.hpp"

#include <cstdint>

namespace eldr::test {

// A small workload with two labels in the calibration split: enough for routers that size pools from it.
inline const Workload& two_label_workload()
{
  static const Workload w = [] {
    Workload x;
    x.labels = {"a", "b"};
    for (int i = 0; i < 100; ++i) {
      Request r;
      r.label = uint16_t(i % 2);
      x.calibration.push_back(r);
    }
    return x;
  }();
  return w;
}

}  // namespace eldr::test
