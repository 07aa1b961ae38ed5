#pragma once
// eldrsim subcommands. Each registers itself and its options on the CLI11 app.
#include <CLI/CLI.hpp>

#include "sim/common/output_place.hpp"
#include "sim/config/experiment.hpp"

#include <functional>
#include <string>
#include <vector>

namespace eldr::app {

struct Command {
  CLI::App* sub;
  std::function<int()> run;  // returns the exit code
};

// `--set KEY=VALUE` options as config overrides (an InputError for a missing '=').
std::vector<Override> parse_sets(const std::vector<std::string>& sets);
// Adds checks to every option of `app` and its subcommands: NaN and infinities are errors for
// numbers (CLI11's ranges let NaN through), an empty text or one that is not UTF-8 for text.
void add_input_checks(CLI::App& app);
// A CLI11 parse error as one line, range errors as "must be above 0, got 0".
std::string cli_error_line(const CLI::ParseError& e);
// Replaces this process by `analysis/<script>` of the project at `root` under Debian's python3 (or
// $ELDR_PYTHON) with `args`; returns only by an InputError (script missing, python not runnable).
[[noreturn]] void exec_analysis_script(const std::string& root, const std::string& script,
                                       const std::vector<std::string>& args);
// The inputs of a run of `x` (its config and every file the config names), for check_output_apart.
std::vector<CommandInput> experiment_inputs(const Experiment& x);
// This binary's own path (/proc/self/exe), for scripts that run it.
std::string this_binary();

Command add_run_command(CLI::App& app);
Command add_table_command(CLI::App& app);
Command add_routers_command(CLI::App& app);
Command add_fit_command(CLI::App& app);
Command add_sweep_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_validate_command(CLI::App& app);
// Children of `eldrsim trace` (the parent is made in main.cpp).
Command add_trace_import_command(CLI::App& trace);
Command add_trace_gen_command(CLI::App& trace);
Command add_trace_stats_command(CLI::App& trace);
// Child of `eldrsim config`.
Command add_config_command(CLI::App& config);

}  // namespace eldr::app
