#pragma once
// One accelerator type, from a file under models/hardware/. SI units inside the program.
#include <string>

namespace eldr {

class JsonReader;

struct Hardware {
  std::string name;
  double hbm_bytes         = 0;  // capacity
  double hbm_bandwidth_Bps = 0;  // peak HBM bandwidth
  double dense_flops       = 0;  // peak dense bf16 FLOP/s
  double dense_fp8_flops   = 0;  // peak dense fp8 FLOP/s; 0: not given (fp8 models are then rejected)
  double gemm_efficiency   = 0;  // achieved fraction of dense_flops in large GEMMs (prefill)
  // Measured MoE-layer scaling: a layer's time at `moe_distinct_hi` distinct experts is
  // `moe_time_ratio` times its time at `moe_distinct_lo`. Fixes the per-layer MoE overhead.
  double moe_distinct_lo = 16;
  double moe_distinct_hi = 128;
  double moe_time_ratio  = 4.7;
  // A model without a calibration block for this hardware uses the block of this hardware instead
  // (explicit in the hardware file, documented there; empty: no fallback, a missing block is an error).
  std::string calibration_from;
};

Hardware read_hardware(JsonReader& r);
Hardware load_hardware(const std::string& path);

}  // namespace eldr
