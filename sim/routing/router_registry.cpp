#include "sim/routing/router_registry.hpp"
#include "sim/routing/domain_router.hpp"
#include "sim/routing/eldr/eldr_router.hpp"
#include "sim/routing/jsq_router.hpp"
#include "sim/routing/p2c_router.hpp"
#include "sim/routing/random_router.hpp"
#include "sim/routing/round_robin_router.hpp"

#include "examples/routers/jsq_of_d.hpp"
#include "examples/routers/prefix_affinity.hpp"

#include <stdexcept>

namespace eldr {

namespace {

// Factories for routers whose constructor takes nothing, the run seed, or the whole setup.
template <class R> std::unique_ptr<DecodeRouter> plain(const RouterSetup&)
{
  return std::make_unique<R>();
}
template <class R> std::unique_ptr<DecodeRouter> seeded(const RouterSetup& setup)
{
  return std::make_unique<R>(setup.seed);
}
template <class R> std::unique_ptr<DecodeRouter> from_setup(const RouterSetup& setup)
{
  return std::make_unique<R>(setup);
}

// One entry per decode router, in the order `eldrsim routers` lists them.
const RouterEntry kRouters[] = {
    {"random", "a uniformly random worker, ignoring load", seeded<RandomRouter>},
    {"round_robin", "workers in turn", plain<RoundRobinRouter>},
    {"jsq", "join the shortest queue: fewest in-flight requests, ties at random", seeded<JsqRouter>},
    {"p2c", "power of two choices: the less loaded of two random workers", seeded<P2cRouter>},
    {"domain", "oracle: the shortest queue of the request label's pool of workers", from_setup<DomainRouter>},
    {"eldr", "expert-locality-aware: similar prompts to the same worker, within a load band", make_eldr_router,
     &kEldrSection},
    // Worked examples (examples/routers/, docs/adding-a-router.md).
    {"jsq_of_d", "example: the least loaded of d sampled workers", make_jsq_of_d, &kJsqOfDSection, true},
    {"prefix_affinity", "example: the prompt prefix's worker, unless far busier than the least loaded",
     make_prefix_affinity, nullptr, true},
};

}  // namespace

std::span<const RouterEntry> decode_routers()
{
  return kRouters;
}

const RouterEntry* find_decode_router(std::string_view name)
{
  for (const RouterEntry& e : kRouters)
    if (name == e.name)
      return &e;
  return nullptr;
}

std::vector<std::string> decode_router_names()
{
  std::vector<std::string> names;
  for (const RouterEntry& e : kRouters)
    names.emplace_back(e.name);
  return names;
}

std::unique_ptr<DecodeRouter> make_decode_router(const std::string& name, const RouterSetup& setup)
{
  const RouterEntry* e = find_decode_router(name);
  if (!e)
    throw std::invalid_argument("unknown decode router '" + name + "'");
  return e->make(setup);
}

const RouterCatalog& router_catalog()
{
  static const RouterCatalog catalog = [] {
    RouterCatalog c;
    for (const RouterEntry& e : kRouters) {
      c.routers.push_back({e.name, e.description});
      if (e.section)
        c.sections.push_back(*e.section);
    }
    return c;
  }();
  return catalog;
}

}  // namespace eldr
