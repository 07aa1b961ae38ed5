#pragma once
// The declarations of an experiment config's keys outside the routers' sections (experiment_keys.cpp).
#include "sim/config/config_key.hpp"

namespace eldr {

KeyTable experiment_keys();

}  // namespace eldr
