#include "sim/app/commands.hpp"
#include "sim/config/experiment.hpp"

#include <cstdio>

namespace eldr::app {

Command add_routers_command(CLI::App& app)
{
  auto* sub = app.add_subcommand("routers", "List the decode routers, one per line");
  return {sub, [] {
            for (const auto& name : kDecodeRouterNames)
              std::printf("%s\n", name.c_str());
            return 0;
          }};
}

}  // namespace eldr::app
