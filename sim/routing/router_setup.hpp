#pragma once
// What a decode router may know before the run starts: the cluster size, the run seed and the
// workload's calibration split (requests never served, kept for fitting routers).
#include "sim/gating/gating_source.hpp"
#include "sim/workload/request.hpp"

#include <cstdint>

namespace eldr {

struct Experiment;

struct RouterSetup {
  int decode_workers           = 0;
  uint64_t seed                = 0;
  const Workload* workload     = nullptr;  // labels and calibration split; routers that need it check
  const GatingSource* routing  = nullptr;  // the calibration split's expert routing (ELDR fits on it)
  const Experiment* experiment = nullptr;  // router parameters (ELDR: tau, refit, model file)
};

}  // namespace eldr
