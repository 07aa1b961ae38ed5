#pragma once
// eldrsim subcommands. Each registers itself and its options on the CLI11 app.
#include <CLI/CLI.hpp>

#include <functional>

namespace eldr::app {

struct Command {
  CLI::App* sub;
  std::function<int()> run;  // returns the exit code
};

Command add_run_command(CLI::App& app);
Command add_table_command(CLI::App& app);
Command add_routers_command(CLI::App& app);
// Children of `eldrsim trace` (the parent is made in main.cpp).
Command add_trace_import_command(CLI::App& trace);
Command add_trace_gen_command(CLI::App& trace);
Command add_trace_stats_command(CLI::App& trace);

}  // namespace eldr::app
