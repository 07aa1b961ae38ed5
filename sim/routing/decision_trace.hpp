#pragma once
// What ELDR's last decision looked at, for the optional decision log (output.decision_log): filled by
// EldrRouter only when a trace is attached, so the decision's hot path is untouched otherwise.
#include <vector>

namespace eldr {

struct EldrDecisionTrace {
  bool valid  = false;        // set by the router, cleared by whoever consumes it
  float best  = 0;            // the best similarity
  float floor = 0;            // the band floor, best - tau
  std::vector<float> sims;    // exact similarity to each worker's centroid
  std::vector<int> candidates;  // workers in the band (plus the runner-up min_two adds), ascending
};

}  // namespace eldr
