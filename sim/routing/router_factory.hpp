#pragma once
#include "sim/routing/decode_router.hpp"
#include "sim/routing/router_setup.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace eldr {

// Builds a decode router by name (see kDecodeRouterNames); throws std::invalid_argument on an unknown
// name or a setup the router cannot work with.
std::unique_ptr<DecodeRouter> make_decode_router(const std::string& name, const RouterSetup& setup);

}  // namespace eldr
