// eldrsim sweep: combined.csv (one row per point, its columns from what the point recorded) and
// combined_seeds.csv.
#include "sim/app/commands.hpp"
#include "sim/app/sweep_parts.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/csv.hpp"
#include "sim/common/input_file.hpp"
#include "sim/experiments/sample_stats.hpp"
#include "sim/routing/registry/router_registry.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
namespace eldr::app {

namespace fs = std::filesystem;

namespace {

std::string num(double v)
{
  if (!std::isfinite(v))
    return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

struct Metric {
  const char* column;
  const char* a;
  const char* b;
};

const Metric kMetrics[] = {
    {"requests", "requests", nullptr},
    {"unfinished", "unfinished", nullptr},
    {"tpot_p50_ms", "tpot_ms", "p50"},
    {"tpot_p95_ms", "tpot_ms", "p95"},
    {"tpot_p99_ms", "tpot_ms", "p99"},
    {"tpot_mean_ms", "tpot_ms", "mean"},
    {"ttft_p50_ms", "ttft_ms", "p50"},
    {"ttft_p99_ms", "ttft_ms", "p99"},
    {"throughput_tok_s", "throughput_tok_s", nullptr},
    {"distinct_experts_mean", "distinct_experts_per_layer_mean", nullptr},
    {"decode_batch_mean", "decode_batch_mean", nullptr},
};

double metric(const Json& s, const Metric& m)
{
  const Json* v = &s;
  for (const char* k : {m.a, m.b}) {
    if (!k)
      break;
    if (!v->is_object() || !v->contains(k))
      return NAN;
    v = &(*v)[k];
  }
  return v->is_number() ? v->get<double>() : NAN;
}

// What a point's run recorded: summary.json (what the simulation used, its resolved config) and
// point.json's identity (its base config and overrides). The parameter columns come from here, never
// from the config files as they are now.
struct Recorded {
  Json summary, identity;
};

// A recorded value as a cell: strings bare, numbers as the metrics are, nothing for null or absent.
std::string recorded_cell(const Json* v)
{
  if (!v || v->is_null())
    return "";
  if (v->is_string())
    return v->get<std::string>();
  if (v->is_number_float())
    return num(v->get<double>());
  return v->dump();
}

const Json* recorded_at(const Json& j, std::initializer_list<const char*> path)
{
  const Json* v = &j;
  for (const char* k : path) {
    if (!v->is_object() || !v->contains(k))
      return nullptr;
    v = &(*v)[k];
  }
  return v;
}

// A config key as the point recorded it: the value its run used (summary.json's resolved config), else
// the one its overrides gave (point.json: a grid value of a key its router does not read, one router's
// parameter on another router's point, keeps the rows apart as the grid made them), else nothing.
std::string recorded_key(const Recorded& r, const std::string& dotted)
{
  const Json* v = recorded_at(r.summary, {"config"});
  for (size_t b = 0, e = 0; v && b <= dotted.size(); b = e + 1) {
    e = std::min(dotted.find('.', b), dotted.size());
    v = v->is_object() && v->contains(dotted.substr(b, e - b)) ? &(*v)[dotted.substr(b, e - b)] : nullptr;
  }
  if (v)
    return recorded_cell(v);
  std::string cell;
  if (const Json* o = recorded_at(r.identity, {"overrides"}); o && o->is_array())
    for (const Json& kv : *o)  // the last one wins, as when applied
      if (kv.is_array() && kv.size() == 2 && kv[0] == dotted && kv[1].is_string()) {
        const Json given = Json::parse(kv[1].get<std::string>(), nullptr, false);
        cell             = given.is_discarded() ? kv[1].get<std::string>() : recorded_cell(&given);
      }
  return cell;
}

// The parameter columns of a point (without metrics), with or without the seed.
void param_cells(std::string& row, const SweepPlan& plan, const SweepPoint& p, const Recorded& r, bool with_seed)
{
  const Json& s = r.summary;
  csv_cell(row, p.sweep);
  csv_cell(row, with_seed ? p.name : p.group);
  csv_cell(row, recorded_cell(recorded_at(r.identity, {"config"})));
  csv_cell(row, recorded_cell(recorded_at(s, {"model"})));
  csv_cell(row, recorded_key(r, "workload.kind"));
  csv_cell(row, recorded_cell(recorded_at(s, {"router"})));
  csv_cell(row, recorded_cell(recorded_at(s, {"rate_rps"})));
  csv_cell(row, recorded_cell(recorded_at(s, {"prefill_instances"})));
  csv_cell(row, recorded_cell(recorded_at(s, {"decode_instances"})));
  for (const ResultColumn& c : result_columns())
    csv_cell(row, recorded_key(r, c.key));
  if (with_seed)
    csv_cell(row, recorded_cell(recorded_at(s, {"seed"})));
  for (const auto& k : plan.extra_keys)
    csv_cell(row, recorded_key(r, k));
}

std::string param_header(const SweepPlan& plan, bool with_seed)
{
  std::string h = "sweep,point,config,model,workload,router,rate_rps,prefill,decode";
  for (const ResultColumn& c : result_columns())
    csv_cell(h, c.header);
  if (with_seed)
    h += ",seed";
  for (const auto& k : plan.extra_keys)
    csv_cell(h, k);
  return h;
}

// Whether the first line of `file` ends with `tail` (false when it cannot be read).
bool first_line_ends_with(const fs::path& file, const std::string& tail)
{
  try {
    const std::string text = read_input_file(file.string());
    const std::string line = text.substr(0, text.find('\n'));
    return line.size() >= tail.size() && line.compare(line.size() - tail.size(), tail.size(), tail) == 0;
  } catch (const InputError&) {
    return false;
  }
}

// Whether `file` holds exactly `text` (false when it cannot be read).
bool same_text(const fs::path& file, const std::string& text)
{
  std::error_code ec;
  if (fs::file_size(file, ec) != text.size() || ec)
    return false;
  try {
    return read_input_file(file.string()) == text;
  } catch (const InputError&) {
    return false;
  }
}

}  // namespace

// combined.csv (one row per point) and, with several seeds, combined_seeds.csv (mean and 95%
// interval over seeds). Returns the number of points without results.
size_t merge(const SweepPlan& plan, const std::string& out, bool quiet)
{
  std::string csv = param_header(plan, true);
  for (const auto& m : kMetrics)
    csv += std::string(",") + m.column;
  csv += "\n";
  size_t missing = 0;
  std::vector<std::string> group_order;
  struct Group {                              // the points that differ only by seed
    size_t first;                             // its first point
    Recorded rec;                             // that point's record: the parameter columns
    std::vector<std::vector<double>> values;  // per metric
  };
  std::map<std::string, Group> groups;
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const SweepPoint& p = plan.points[i];
    if (!point_done(out, p)) {
      ++missing;
      continue;
    }
    // Both checked by point_done.
    const Recorded rec = {load_json_file((point_dir(out, p) / "summary.json").string()),
                          load_json_file((point_dir(out, p) / "point.json").string())["identity"]};
    const Json& s      = rec.summary;
    std::string row;
    param_cells(row, plan, p, rec, true);
    std::string gkey = p.sweep + "/" + p.group;
    auto [it, fresh] = groups.try_emplace(gkey, Group{i, rec, std::vector<std::vector<double>>(std::size(kMetrics))});
    if (fresh)
      group_order.push_back(gkey);
    for (size_t k = 0; k < std::size(kMetrics); ++k) {
      double v = metric(s, kMetrics[k]);
      csv_cell(row, num(v));
      if (std::isfinite(v))
        it->second.values[k].push_back(v);
    }
    csv += row + "\n";
  }
  fs::create_directories(out);
  const fs::path combined = fs::path(out) / "combined.csv";
  const fs::path report   = fs::path(out) / "report";
  std::error_code ec;
  // A report made from other results than these goes: it would be read as this sweep's.
  if (holds_marker(report.string(), kReportMarker) && !same_text(combined, csv) && withdraw(report) && !quiet)
    std::fprintf(stderr, "sweep: %s described other results: removed (`eldrsim report %s` writes it again)\n",
                 report.c_str(), out.c_str());
  write_file_atomically(combined.string(), csv);
  // combined_seeds.csv's columns after the parameters' (its header ends with them).
  std::string seeds_columns = ",seeds";
  for (const auto& m : kMetrics)
    seeds_columns += std::string(",") + m.column + "_mean," + m.column + "_ci95_lo," + m.column + "_ci95_hi";
  const fs::path seeds_table = fs::path(out) / "combined_seeds.csv";
  // Another sweep's into this OUT: not these points' intervals. Only a table eldr-sim wrote goes.
  if (plan.seeds <= 1 && fs::exists(seeds_table, ec)) {
    if (first_line_ends_with(seeds_table, seeds_columns))
      fs::remove(seeds_table, ec);
    else if (!quiet)
      std::fprintf(stderr, "sweep: %s is not a table eldr-sim wrote: left as it is\n", seeds_table.c_str());
  }
  if (plan.seeds > 1) {
    std::string s = param_header(plan, false) + seeds_columns + "\n";
    for (const auto& g : group_order) {
      const Group& group = groups.at(g);
      std::string row;
      param_cells(row, plan, plan.points[group.first], group.rec, false);
      csv_cell(row, std::to_string(group.values[0].size()));
      for (const auto& v : group.values) {
        MeanInterval mi = mean_ci95(v);
        csv_cell(row, mi.n ? num(mi.mean) : "");
        csv_cell(row, mi.n ? num(mi.lo) : "");
        csv_cell(row, mi.n ? num(mi.hi) : "");
      }
      s += row + "\n";
    }
    write_file_atomically(seeds_table.string(), s);
  }
  if (!quiet)
    std::fprintf(
        stderr, "sweep: %s -> %s%s%s\n", count_of(plan.points.size() - missing, "point").c_str(),
        (fs::path(out) / "combined.csv").c_str(), plan.seeds > 1 ? " and combined_seeds.csv" : "",
        missing ? (" (" + count_of(missing, "point") + (missing == 1 ? " has" : " have") + " no results yet)").c_str()
                : "");
  return missing;
}

}  // namespace eldr::app
