#include "sim/routing/router_factory.hpp"
#include "sim/routing/domain_router.hpp"
#include "sim/routing/eldr_router.hpp"
#include "sim/routing/jsq_router.hpp"
#include "sim/routing/p2c_router.hpp"
#include "sim/routing/random_router.hpp"
#include "sim/routing/round_robin_router.hpp"

#include <stdexcept>

namespace eldr {

std::unique_ptr<DecodeRouter> make_decode_router(const std::string& name, const RouterSetup& setup)
{
  const uint64_t seed = setup.seed;
  if (name == "random")
    return std::make_unique<RandomRouter>(seed);
  if (name == "round_robin")
    return std::make_unique<RoundRobinRouter>();
  if (name == "jsq")
    return std::make_unique<JsqRouter>(seed);
  if (name == "p2c")
    return std::make_unique<P2cRouter>(seed);
  if (name == "domain")
    return std::make_unique<DomainRouter>(setup);
  if (name == "eldr")
    return make_eldr_router(setup);
  throw std::invalid_argument("unknown decode router '" + name + "'");
}

}  // namespace eldr
