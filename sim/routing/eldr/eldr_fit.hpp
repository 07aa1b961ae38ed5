#pragma once
// ELDR's offline fit as the router table's fit (router_fit.hpp): the model file `eldrsim fit` writes
// and a run reads through eldr.model_file.
#include "sim/routing/router_fit.hpp"

#include <span>
#include <string>

namespace eldr {

FittedFile fit_eldr_file(const Experiment& x, const Workload& w, const GatingSource& gating);
void check_eldr_file(const std::string& path);
bool eldr_file_given(const Experiment& x);
// The eldr keys only the run reads (the band and the online refit), not the offline fit.
std::span<const char* const> eldr_run_only_keys();

}  // namespace eldr
