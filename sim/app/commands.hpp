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

}  // namespace eldr::app
