#pragma once
// Workload kind "trace": the requests of a trace directory (docs/trace-format.md) as a Workload.
#include "sim/config/experiment.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/workload/request.hpp"

#include <string>

namespace eldr {

// Reads x.workload.trace_dir and splits it, in file order:
//  - calibration: the requests flagged "calibration": true; if none is flagged, the first
//    workload.calibration_requests requests. Kept in Workload::calibration, never served.
//  - warm-up: the next workload.warmup_requests (measured = false); an InputError if the trace has
//    fewer than that plus one.
//  - measured: the next workload.measured_requests when the config (or --requests) sets it
//    explicitly, clipped to what the trace has left; otherwise every remaining request. (The
//    experiment's rate_rps x duration_s default does not apply to traces.)
// Arrivals: workload.arrivals "trace" keeps the file's times: warm-up times relative to the first
// warm-up request; measured times relative to the last warm-up request (to the first measured one
// without a warm-up), so without a drain the served timeline is exactly the trace's. "poisson"
// re-draws them at warmup_rate_rps / rate_rps from the same streams as generate_workload.
// Lengths and labels come from the trace: prompt_min/max_tokens and output_tokens do not apply.
// Every served request must fit serving.prefill_token_budget and a decode worker's KV memory
// (InputError naming the request's line otherwise). With workload.routing "trace" the trace must have
// a routing file whose model matches the experiment's (name, layers, experts and top_k: the ids are
// that model's experts); without replay, a trace's lengths may be served by any model.
Workload load_trace_workload(const Experiment& x);

// InputError naming the trace manifest and the config when the manifest records a model whose name
// is not the experiment model's (a manifest edited, or a trace of a same-shaped model).
void check_trace_model_name(const TraceManifest& manifest, const std::string& manifest_path, const Experiment& x);
// InputError naming the trace manifest and the config unless the manifest's model has the
// experiment model's name, layers, experts and top_k.
void check_trace_model(const TraceManifest& manifest, const std::string& manifest_path, const Experiment& x);

}  // namespace eldr
