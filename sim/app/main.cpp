// eldrsim: the command line over the simulator library.
#include "sim/app/commands.hpp"
#include "sim/app/process_pool.hpp"
#include "sim/common/build_id.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/config/config_key.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <vector>

// The command word at argv[i] of `app` (and, for a command with its own commands, the next one): an
// unknown one is named, with the closest, instead of CLI11's "A subcommand is required".
static std::string unknown_command(CLI::App& app, int argc, char** argv, int i, const std::string& before)
{
  if (i >= argc || argv[i][0] == '-' || app.get_subcommands({}).empty())
    return "";
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == argv[i])
      return unknown_command(*sub, argc, argv, i + 1, before + argv[i] + " ");
    names.push_back(sub->get_name());
  }
  std::string line = "unknown command '" + before + argv[i] + "'";
  if (const std::string near = eldr::closest_name(argv[i], names); !near.empty())
    line += " (did you mean '" + before + near + "'?)";
  std::string list;
  for (const std::string& n : names)
    list += (list.empty() ? "" : ", ") + n;
  return line + "; commands: " + list + " (see --help)";
}

// The command line: parses argv and runs its command; what main returns. Sweep points and fits
// call it in a forked child (process_pool.hpp) as a fresh process would.
static int eldrsim_main(int argc, char** argv)
{
  CLI::App app{"eldr-sim: a SimGrid simulator of prefill/decode-disaggregated MoE serving, for decode routing "
               "studies.",
               "eldrsim"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("eldrsim ") + eldr::eldrsim_version());
  std::vector<eldr::app::Command> commands = {
      eldr::app::add_run_command(app),    eldr::app::add_table_command(app),     eldr::app::add_routers_command(app),
      eldr::app::add_fit_command(app),    eldr::app::add_sweep_command(app),     eldr::app::add_compare_command(app),
      eldr::app::add_report_command(app), eldr::app::add_calibrate_command(app), eldr::app::add_validate_command(app)};
  auto* trace = app.add_subcommand("trace", "Generate, import and inspect traces");
  trace->require_subcommand(1);
  commands.push_back(eldr::app::add_trace_gen_command(*trace));
  commands.push_back(eldr::app::add_trace_import_command(*trace));
  commands.push_back(eldr::app::add_trace_stats_command(*trace));
  auto* config = app.add_subcommand("config", "Describe the configuration: `config keys` lists every key");
  config->require_subcommand(1);
  commands.push_back(eldr::app::add_config_command(*config));
  // Every command documents the same exit codes (compare adds its own note before them).
  app.footer(eldr::kExitCodesHelp);
  for (auto& c : commands)
    if (c.sub->get_footer().empty())
      c.sub->footer(eldr::kExitCodesHelp);
  eldr::app::add_input_checks(app);
  if (const std::string unknown = unknown_command(app, argc, argv, 1, ""); !unknown.empty()) {
    std::fprintf(stderr, "eldrsim: error: %s\n", eldr::printable_line(unknown).c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0)  // --help, --version
      return app.exit(e);
    // Bad command lines exit 2 with one line, like bad configs.
    std::fprintf(stderr, "eldrsim: error: %s\n", eldr::app::cli_error_line(e).c_str());
    return 2;
  }
  eldr::install_interrupt_handler();  // a signal: one line, exit 128 + N (commands register what to remove)
  try {
    for (auto& c : commands)
      if (c.sub->parsed())
        return c.run();
  } catch (const eldr::InputError& e) {
    std::fprintf(stderr, "eldrsim: error: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be used (permissions, a file where a directory should be).
    std::fprintf(stderr, "eldrsim: error: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eldrsim: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv)
{
  eldr::app::set_entry_point(eldrsim_main);
  return eldrsim_main(argc, argv);
}
