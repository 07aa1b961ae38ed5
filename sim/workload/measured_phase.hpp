#pragma once
// Runs that differ only in their measured phase (its rate, length or request count) share one warm-up:
// it is simulated once, and the process forks where the warm-up has drained, each child going on with
// its own measured requests (`eldrsim run --measured-phases`, which a sweep uses for such points).
// That is exact because nothing before the drain reads the measured phase: the generated warm-up
// requests come first from their own streams, and a measured request's content does not depend on the
// rate (only its arrival time does), so each run's workload is a prefix of the longest one's, retimed.
#include "sim/common/json_reader.hpp"
#include "sim/config/experiment.hpp"
#include "sim/workload/request.hpp"

#include <string>

namespace eldr {

// The config keys a measured phase may change.
inline constexpr const char* kMeasuredPhaseKeys[] = {"workload.rate_rps", "workload.duration_s",
                                                     "workload.measured_requests"};

// Why x's warm-up cannot be shared with other measured phases; empty when it can: a generated workload
// (task or language) drained after a warm-up, whose measured requests draw their content without
// looking at their arrival times (no workload.mix_schedule, no workload.new_subtopics_after_s).
std::string warmup_not_shareable(const Experiment& x);

// x's resolved config less kMeasuredPhaseKeys (and its description): equal for two experiments whose
// runs may share a warm-up.
Json warmup_config(const Experiment& x);

// Why `phase` (a run's workload) is not `longest` (the longest run's) with another measured phase;
// empty when it is: the same calibration and warm-up requests, and as many or fewer measured requests
// that equal the longest's but for their arrival times.
std::string measured_phase_mismatch(const Workload& longest, const Workload& phase);

// Makes w (the longest run's workload, checked with measured_phase_mismatch) `phase` in place: its
// measured arrival times, then its length. No element moves: pointers into w stay valid.
void take_measured_phase(Workload& w, const Workload& phase);

}  // namespace eldr
