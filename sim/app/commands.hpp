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

// A config override made by a command-line option (`--set`, or a dedicated one such as --router),
// so that an error in its value blames the option, not the config file.
struct OptionOverride {
  std::string option;  // "--set", "--router", ...
  Override value;      // key path, value as JSON text (a --set's bare word: a string)
};
// The --set options first, then the dedicated options' overrides (the more specific request). An
// option setting a key that another sets to a different value is an error (one would not take
// effect); --set KEY=A --set KEY=B is not (the last wins, as usual).
std::vector<OptionOverride> option_overrides(const std::vector<std::string>& sets,
                                             const std::vector<OptionOverride>& dedicated);
// load_experiment with those overrides; an InputError about a key an option set names the option
// ("--router: unknown value", "--set: workload.rate_rps: must be ...").
Experiment load_with_options(const std::string& config, const std::vector<OptionOverride>& overrides);
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
// A run's router as table and compare name it: the router, and for a composition (router "composed")
// what it is: "composed:NAME" for a named one, else "composed:HASH" (composition_hash).
std::string run_router_label(const Json& summary);
// A short hash of a composed run's resolved composition (its plugins, parameters and name; the scheduler
// file's path left out, it differs between machines); empty for other runs and summaries without it.
std::string composition_hash(const Json& summary);
// Runs `write` (which writes into the staging directory `staging` of output `final`); an InputError it
// throws names `final` in place of the staging directory, which the user never sees.
void write_staged(const std::string& staging, const std::string& final, const std::function<void()>& write);
// This binary's own path (/proc/self/exe), for scripts that run it.
std::string this_binary();

// "1 point", "3 points": a count with its noun in agreement (regular plurals only).
std::string count_of(size_t n, const char* noun);

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
