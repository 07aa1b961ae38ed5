#pragma once
// Builds the request stream of an experiment: labels in their measured proportions, prompt lengths
// drawn from real dataset token counts, Poisson arrivals (a warm-up phase, then the measured one).
#include "sim/config/experiment.hpp"
#include "sim/workload/request.hpp"

#include <map>
#include <string>
#include <vector>

namespace eldr {

// Prompt lengths of each label, read from a CSV with columns domain,dataset,item_id,prompt_tokens,...
using LengthTable = std::map<std::string, std::vector<int>>;

LengthTable load_prompt_lengths(const std::string& csv_path, const std::vector<TaskLabel>& labels);
// Chat prompt lengths, the same pool for every label: first_input_tokens of WildChat first turns
// (session,num_turns,first_input_tokens,first_output_tokens; the default, as the testbed's language
// workload) or ContextTokens of a trace in the Azure 2023 format (TIMESTAMP,ContextTokens,GeneratedTokens).
LengthTable load_chat_lengths(const std::string& csv_path, const std::vector<TaskLabel>& labels);

// Inter-arrival gaps (seconds) of a request log in the Azure 2023 CSV format, in file order.
std::vector<double> load_arrival_gaps(const std::string& csv_path);

// The label weights of a drift schedule at measured-phase time t (null: no schedule, the base mix).
const std::vector<double>* mix_at(const std::vector<MixPhase>& schedule, double t);

// Workload kinds "task" and "language". Calibration requests (spec.calibration_requests) come from
// their own random stream, so their number does not change the served requests.
// Arrival times are relative to the start of each request's phase: warm-up requests from 0, measured
// requests from the start of the measured phase, which the simulation fixes (after the warm-up arrivals,
// or once the warm-up has drained). Request contents do not depend on the rates, so runs at different
// rates or with different routers see the same requests (common random numbers).
Workload generate_workload(const WorkloadSpec& spec, uint64_t seed);

}  // namespace eldr
