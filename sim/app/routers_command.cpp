#include "sim/app/commands.hpp"
#include "sim/routing/router_registry.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace eldr::app {

Command add_routers_command(CLI::App& app)
{
  auto* sub     = app.add_subcommand("routers", "List the decode routers, one per line");
  auto describe = std::make_shared<bool>(false);
  sub->add_flag("--describe", *describe, "Add a one-line description after each name");
  return {sub, [describe] {
            // Names alone by default: scripts loop over them (`for r in $(eldrsim routers)`).
            int width = 0;
            for (const RouterEntry& e : decode_routers())
              width = std::max(width, int(std::strlen(e.name)));
            for (const RouterEntry& e : decode_routers())
              if (*describe)
                std::printf("%-*s  %s\n", width, e.name, e.description);
              else
                std::printf("%s\n", e.name);
            return 0;
          }};
}

}  // namespace eldr::app
