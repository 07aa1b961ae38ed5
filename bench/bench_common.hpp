#pragma once
// Shared fixtures of the micro benchmarks: the real model and hardware files, read once.
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"

#include <string>

namespace eldr::bench {

inline std::string source_path(const std::string& rel) { return std::string(ELDR_SOURCE_DIR) + "/" + rel; }

inline const ModelSpec& qwen3_30b()
{
  static const ModelSpec m = load_model(source_path("models/qwen3-30b-a3b.json"));
  return m;
}

inline const Hardware& mi300x()
{
  static const Hardware h = load_hardware(source_path("models/hardware/mi300x.json"));
  return h;
}

}  // namespace eldr::bench
