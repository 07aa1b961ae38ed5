#include "sim/config/hardware.hpp"
#include "sim/common/json_reader.hpp"

namespace eldr {

Hardware read_hardware(JsonReader& r)
{
  Hardware h;
  h.name              = r.require_string("name");
  h.hbm_bytes         = r.require_number("hbm_capacity_GB", 1e-3, 1e6) * 1e9;
  h.hbm_bandwidth_Bps = r.require_number("hbm_bandwidth_TBps", 1e-3, 1e4) * 1e12;
  h.dense_flops       = r.require_number("dense_bf16_TFLOPs", 1e-3, 1e6) * 1e12;
  h.dense_fp8_flops   = r.number("dense_fp8_TFLOPs", 0, 0, 1e6) * 1e12;
  h.gemm_efficiency   = r.require_number("gemm_efficiency", 0.01, 1.0);
  auto moe            = r.object("moe_layer_scaling");
  h.moe_distinct_lo   = moe.require_number("distinct_lo", 1, 1e6);
  h.moe_distinct_hi   = moe.require_number("distinct_hi", h.moe_distinct_lo + 1, 1e6);
  h.moe_time_ratio    = moe.require_number("time_ratio", 1.0 + 1e-6, h.moe_distinct_hi / h.moe_distinct_lo - 1e-6);
  moe.ignore("source");
  moe.finish();
  h.calibration_from = r.string("calibration_from", "");
  if (h.calibration_from == h.name)
    r.fail("calibration_from", "names this hardware itself");
  r.ignore("source");
  r.ignore("sources");  // per-key data-sheet text (free form)
  r.ignore("notes");
  r.finish();
  return h;
}

Hardware load_hardware(const std::string& path)
{
  Json j = load_json_file(path);
  JsonReader r(j, path);
  return read_hardware(r);
}

}  // namespace eldr
