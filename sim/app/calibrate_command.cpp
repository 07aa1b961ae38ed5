// eldrsim calibrate MEASURED.csv --model M --hardware H --out FILE: the cost-model fit of
// analysis/fit_cost.py (docs/calibration.md) on a user's own round-robin measurements, in the CSV
// format of traces/calibration/. The inputs are checked here (one-line errors, exit 2); then the fit
// runs on Debian's python3 with numpy and scipy, simulating with this binary, prints its fit table
// and writes the calibration block for M on H to FILE. models/*.json are not changed.
#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"
#include "sim/config/model_spec.hpp"

#include <filesystem>
#include <memory>
#include <sstream>

namespace eldr::app {

namespace {

namespace fs = std::filesystem;

struct CalibrateOptions {
  std::string measured;
  std::string model;
  std::string hardware = "mi300x";
  std::string out;
  std::string config;
  std::string report;
  double duration = 120;
  int warmup      = 3840;
  int max_evals   = 40;
  int jobs        = 2;
  uint64_t seed   = 1;
  std::vector<double> start;
};

// The measured file must be a regular file: /dev/zero or a FIFO would block the reader or never end.
// Its content (columns, numbers, rates in the simulator's range) is checked by fit_cost.py with the
// csv module, before anything is simulated, so that quoted fields read as they do there.
void check_measured(const std::string& path)
{
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found)
    throw InputError(path, "measured data", "not found");
  if (ec)
    throw InputError(path, "measured data", "cannot read: " + ec.message());
  if (st.type() == fs::file_type::directory)
    throw InputError(path, "measured data", "is a directory, not a file");
  if (st.type() != fs::file_type::regular)
    throw InputError(path, "measured data", "is not a regular file (a device, FIFO or socket)");
}

int calibrate(const CalibrateOptions& o)
{
  const std::string root = project_root(".");
  if (o.model.find('/') != std::string::npos || o.model.ends_with(".json"))
    throw InputError("--model", o.model, "a model name under models/ (e.g. qwen3-30b-a3b), not a path");
  const std::string model_file = (fs::path(root) / "models" / (o.model + ".json")).string();
  const ModelSpec model        = load_model(model_file);
  if (!model.calibration.count(o.hardware) && o.start.empty())
    throw InputError(model_file, "calibration." + o.hardware,
                     "missing: add a block to start from, or give --start EFF STEP_MS PREFILL_MS");
  const std::string config = o.config.empty() ? (fs::path(root) / "configs" / "default.json").string() : o.config;
  const Experiment x       = load_experiment(config);
  if (x.hardware.name != o.hardware)
    throw InputError(
        config, "cluster",
        "runs on hardware '" + x.hardware.name + "', not --hardware '" + o.hardware +
            "': give --config an experiment of the measured cluster (its cluster file names the hardware)");
  check_measured(o.measured);
  auto num = [](double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  };
  if (!(o.duration > 0))
    throw InputError("--duration", "", "must be above 0, got " + num(o.duration));
  // The fit's runs set these keys (and the rate, from each measured row: fit_cost.py checks rate x
  // duration): checked now, not when the first simulation fails.
  load_with_options(config, {{"--duration", {"workload.duration_s", num(o.duration)}},
                             {"--warmup", {"workload.warmup_requests", std::to_string(o.warmup)}},
                             {"--duration", {"workload.rate_rps", "1e-6"}}});

  std::string report = o.report;
  if (report.empty()) {
    fs::path p = fs::absolute(o.out);
    report     = (p.parent_path() / (p.stem().string() + "_report.md")).string();
  }
  std::vector<CommandInput> inputs = experiment_inputs(x);
  inputs.push_back({o.measured, "the measured data"});
  inputs.push_back({model_file, "the model file"});
  check_output_apart(o.out, "--out", inputs);
  inputs.push_back({o.out, "the --out file"});
  check_output_apart(report, "--report", inputs);
  std::vector<std::string> args = {"--models",
                                   o.model,
                                   "--hardware",
                                   o.hardware,
                                   "--data",
                                   o.measured,
                                   "--config",
                                   config,
                                   "--eldrsim",
                                   this_binary(),
                                   "--calibration-out",
                                   o.out,
                                   "--report",
                                   report,
                                   "--duration",
                                   num(o.duration),
                                   "--warmup",
                                   std::to_string(o.warmup),
                                   "--max-evals",
                                   std::to_string(o.max_evals),
                                   "--jobs",
                                   std::to_string(o.jobs),
                                   "--seed",
                                   std::to_string(o.seed)};
  if (!o.start.empty())
    args.insert(args.end(), {"--start", num(o.start[0]), num(o.start[1]), num(o.start[2])});
  exec_analysis_script(root, "fit_cost.py", args);
}

}  // namespace

Command add_calibrate_command(CLI::App& app)
{
  auto o    = std::make_shared<CalibrateOptions>();
  auto* sub = app.add_subcommand(
      "calibrate",
      "Fit the cost model's coefficients (decode_bw_efficiency, step_overhead_ms, prefill_overhead_ms, and "
      "step_jump_ms where the block sets step_jump_batch, the fused-MoE configurations' moe_time_* where it "
      "sets them) to your own round-robin measurements; writes "
      "the calibration block and prints the fit table");
  sub->add_option(
         "measured", o->measured,
         "Measured CSV in the format of traces/calibration/rr_task_tpot.csv (model, policy, rate_rps, requests, "
         "tpot_p50_ms, tpot_p95_ms, tpot_p99_ms, ttft_p50_ms); round_robin rows of --model are fitted")
      ->required();
  sub->add_option("--model", o->model, "Model name under models/ (e.g. qwen3-30b-a3b)")->required();
  sub->add_option("--hardware", o->hardware, "Calibration block to fit, the hardware measured (default mi300x)");
  sub->add_option("--out", o->out, "File to write: {model, hardware, calibration: {HARDWARE: block}} (JSON)")
      ->required();
  sub->add_option(
      "--config", o->config,
      "Experiment config of the measured set-up: cluster, topology, workload (default configs/default.json)");
  sub->add_option("--report", o->report, "Markdown fit report, and a .csv beside it (default OUT's stem + _report.md)");
  sub->add_option("--duration", o->duration, "Seconds of measured traffic per simulated run (default 120)");
  sub->add_option("--warmup", o->warmup, "Warm-up requests per simulated run (default 3840)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-evals", o->max_evals, "Evaluations (one run per rate each) at most (default 40)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--jobs,-j", o->jobs, "Parallel simulator runs (default 2)")->check(CLI::PositiveNumber);
  sub->add_option("--seed", o->seed, "Simulation seed (default 1)");
  sub->add_option("--start", o->start, "Starting point EFF STEP_MS PREFILL_MS (default: the model file's block)")
      ->expected(3);
  return {sub, [o] { return calibrate(*o); }};
}

}  // namespace eldr::app
