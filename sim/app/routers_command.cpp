#include "sim/app/commands.hpp"
#include "sim/routing/registry/router_registry.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

namespace eldr::app {

Command add_routers_command(CLI::App& app)
{
  struct Options {
    bool describe = false, all = false;
  };
  auto o    = std::make_shared<Options>();
  auto* sub = app.add_subcommand("routers", "List the decode routers, one per line (the studied ones; --all adds the "
                                            "config's own composition and the worked examples)");
  sub->add_flag("--describe", o->describe, "Add a one-line description after each name");
  sub->add_flag("--all", o->all,
                "Also list composed and the worked examples (jsq_of_d, ...), which --router accepts as well");
  return {sub, [o] {
            // Names alone by default: scripts loop over them (`for r in $(eldrsim routers)`).
            int width = 0;
            for (const RouterEntry& e : decode_routers())
              width = std::max(width, int(std::strlen(e.name)));
            for (const RouterEntry& e : decode_routers()) {
              if (e.extra && !o->all)
                continue;
              if (o->describe)
                std::printf("%-*s  %s\n", width, e.name, e.description);
              else
                std::printf("%s\n", e.name);
            }
            return 0;
          }};
}

}  // namespace eldr::app
