#include "sim/config/gating_profile.hpp"
#include "sim/common/json_reader.hpp"

#include <filesystem>

namespace eldr {

const LabelLocality& GatingProfile::locality(const std::string& kind, const std::string& file) const
{
  auto it = kinds.find(kind);
  if (it == kinds.end())
    throw InputError(file, "kinds." + kind, "the routing profile has no parameters for workload kind '" + kind + "'");
  return it->second;
}

// A [lo, hi] pair of numbers.
static std::pair<double, double> read_range(JsonReader& r, const std::string& key)
{
  r.ignore(key);
  const Json& v = r.raw(key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number() ||
      v[0].get<double>() > v[1].get<double>())
    r.fail(key, "must be a range [lo, hi] of two numbers, lo <= hi");
  return {v[0].get<double>(), v[1].get<double>()};
}

GatingProfile load_routing_profile(const std::string& path, const std::string& project_root)
{
  Json j = load_json_file(path);
  JsonReader r(j, path);
  GatingProfile p;
  p.model               = r.require_string("model");
  p.subtopics_per_label = int(r.integer("subtopics_per_label", 8, 1, 256));
  p.palette_records     = int(r.integer("palette_records", 512, 16, 1 << 16));
  if ((p.palette_records & (p.palette_records - 1)) != 0)
    r.fail("palette_records", "must be a power of two");
  p.popularity_sigma = r.number("popularity_sigma", 1.0, 0, 10);
  p.phase_drift      = r.number("phase_drift", 0.3, 0, 10);
  p.request_mix_max  = r.number("request_mix_max", 0.5, 0, 1);
  p.layer_floor      = r.number("layer_floor", 0.3, 0, 1);
  p.layer_peak       = r.number("layer_peak", 0.55, 0, 1);
  p.layer_width      = r.number("layer_width", 0.3, 0.01, 10);
  auto kinds         = r.object("kinds");
  for (const auto& k : kinds.keys()) {
    auto o = kinds.object(k);
    LabelLocality l;
    l.label_strength    = o.require_number("label_strength", 0, 10);
    l.subtopic_strength = o.require_number("subtopic_strength", 0, 10);
    l.popularity_sigma  = o.number("popularity_sigma", p.popularity_sigma, 0, 10);
    l.phase_drift       = o.number("phase_drift", p.phase_drift, 0, 10);
    l.request_mix_max   = o.number("request_mix_max", p.request_mix_max, 0, 1);
    l.shared_subtopics  = o.boolean("shared_subtopics", false);
    l.subtopic_zipf     = o.number("subtopic_zipf", 0, 0, 10);
    o.finish();
    p.kinds[k] = l;
  }
  kinds.finish();
  std::string counts = r.string("language_counts_file", "");
  if (!counts.empty()) {
    namespace fs           = std::filesystem;
    p.language_counts_file = fs::path(counts).is_absolute() ? counts : (fs::path(project_root) / counts).string();
    if (!fs::is_regular_file(p.language_counts_file))
      r.fail("language_counts_file", "file not found: " + p.language_counts_file);
  }
  auto t  = r.object("targets");
  auto dr = t.object("distinct_reduction");
  for (const auto& k : dr.keys())
    p.targets.distinct_reduction[k] = read_range(dr, k);
  p.targets.pearson_prefill_decode = t.number("pearson_prefill_decode", 0, -1, 1);
  p.targets.spearman_counts_idf    = t.number("spearman_counts_idf", 0, -1, 1);
  p.targets.spearman_binary        = t.number("spearman_binary", 0, -1, 1);
  p.targets.spearman_gate_prob     = t.number("spearman_gate_prob", 0, -1, 1);
  if (t.has("top_expert_share"))
    p.targets.top_expert_share = read_range(t, "top_expert_share");
  if (t.has("gate_per_pick")) {
    auto g = t.object("gate_per_pick");
    for (const auto& k : g.keys())
      p.targets.gate_per_pick[k] = read_range(g, k);
    g.finish();
  }
  t.ignore("source");
  t.finish();
  r.ignore("source");
  r.ignore("notes");
  r.ignore("calibration");
  r.finish();
  return p;
}

}  // namespace eldr
