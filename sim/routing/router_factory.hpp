#pragma once
#include "sim/routing/decode_router.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace eldr {

// Builds a decode router by name (see kDecodeRouterNames); throws std::invalid_argument on an unknown name.
std::unique_ptr<DecodeRouter> make_decode_router(const std::string& name, uint64_t seed);

}  // namespace eldr
