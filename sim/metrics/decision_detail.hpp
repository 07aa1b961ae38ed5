#pragma once
// What a router's decision compared, for the optional decision log (output.decision_log, the score
// columns of decisions.csv): filled only by routers that score the workers and keep a band of the best
// as candidates (the expert-locality band: similarity to each worker's profile), and only while a log
// is attached, so the decision's hot path is untouched otherwise.
#include <vector>

namespace eldr {

struct DecisionDetail {
  bool valid  = false;          // set by the router, cleared by whoever consumes it
  float best  = 0;              // the best score
  float floor = 0;              // the band floor: scores from it to best were candidates
  std::vector<float> sims;      // each worker's score
  std::vector<int> candidates;  // workers in the band (plus the runner-up min_two adds), ascending
};

}  // namespace eldr
