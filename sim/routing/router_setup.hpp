#pragma once
// What a decode router may know before the run starts: the cluster size, the run seed and the
// workload's calibration split (requests never served, kept for fitting routers).
#include "sim/workload/request.hpp"

#include <cstdint>

namespace eldr {

struct RouterSetup {
  int decode_workers        = 0;
  uint64_t seed             = 0;
  const Workload* workload  = nullptr;  // labels and calibration split; routers that need it check
};

}  // namespace eldr
