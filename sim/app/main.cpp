// eldrsim: the command line over the simulator library.
#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"

#include <cstdio>
#include <exception>
#include <vector>

int main(int argc, char** argv)
{
  CLI::App app{"eldr-sim: a SimGrid simulator of prefill/decode-disaggregated MoE serving, for decode routing "
               "studies.",
               "eldrsim"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "eldrsim 0.1");
  std::vector<eldr::app::Command> commands = {eldr::app::add_run_command(app), eldr::app::add_table_command(app),
                                               eldr::app::add_routers_command(app), eldr::app::add_fit_command(app),
                                               eldr::app::add_sweep_command(app), eldr::app::add_compare_command(app),
                                               eldr::app::add_report_command(app), eldr::app::add_calibrate_command(app)};
  auto* trace = app.add_subcommand("trace", "Generate, import and inspect traces");
  trace->require_subcommand(1);
  commands.push_back(eldr::app::add_trace_gen_command(*trace));
  commands.push_back(eldr::app::add_trace_import_command(*trace));
  commands.push_back(eldr::app::add_trace_stats_command(*trace));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // bad command lines exit 2, like bad configs
  }
  try {
    for (auto& c : commands)
      if (c.sub->parsed())
        return c.run();
  } catch (const eldr::InputError& e) {
    std::fprintf(stderr, "eldrsim: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eldrsim: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
