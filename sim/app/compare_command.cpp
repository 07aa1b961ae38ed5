// eldrsim compare BASELINE CURRENT: TPOT distributions of the runs present in both, side by side,
// with a two-sample Kolmogorov-Smirnov test; exit 1 when one got worse beyond the tolerances.
#include "sim/app/commands.hpp"
#include "sim/common/csv.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/percentiles.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/experiments/sample_stats.hpp"
#include "sim/metrics/result_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

namespace eldr::app {

namespace fs = std::filesystem;

namespace {

struct CompareOptions {
  std::string baseline, current;
  double tol_p50 = 2, tol_p95 = 3, tol_p99 = 5;  // percent
  double tol_abs_ms = 0.05;                      // changes below this never count
  double ks_alpha = 0.01, ks_d = 0.1;
  bool require_all     = false;
  bool allow_different = false;
};

struct Run {
  std::string router;
  std::vector<double> tpot;
  std::string dir;
  Json identity;  // what must match for two runs to be comparable (comparable_fields)
};

// What makes two runs one configuration: compare is a regression check of one configuration across
// builds (or one deliberate change), so runs that differ in any of these are not comparable unless
// --allow-different. Top-level summary.json fields (present in the committed baseline too), and from
// the resolved config, when both summaries have it, the workload kind and trace (by its directory
// name: paths differ between machines).
const char* const kIdentityFields[] = {
    "router", "model", "hardware", "seed", "rate_rps", "prefill_instances", "decode_instances", "requests"};
const char kIdentityHelp[] =
    "Runs are comparable when they agree on router (for a composition: its plugins, parameters and name), model, "
    "hardware, seed, rate_rps, prefill and decode "
    "instances, the number of measured requests, and (when both summaries hold their config) workload kind and "
    "trace; otherwise compare names the differences and exits 2 (--allow-different compares anyway)";

Json run_identity(const Json& s)
{
  Json id = Json::object();
  for (const char* k : kIdentityFields)
    id[k] = s.contains(k) ? s[k] : Json(nullptr);
  // Two compositions are two policies: named by what they are, and the same name with other plugins
  // or weights differs too.
  if (const std::string hash = composition_hash(s); !hash.empty()) {
    id["router"]      = run_router_label(s);
    id["composition"] = hash;
  }
  if (s.contains("config") && s["config"].is_object() && s["config"].contains("workload") &&
      s["config"]["workload"].is_object()) {
    const Json& w        = s["config"]["workload"];
    id["workload.kind"]  = w.contains("kind") ? w["kind"] : Json("task");
    id["workload.trace"] = w.contains("trace") && w["trace"].is_string()
                               ? Json(fs::path(w["trace"].get<std::string>()).lexically_normal().filename().string())
                               : Json(nullptr);
    if (id["workload.trace"] == Json(""))  // "traces/x/": the directory's own name
      id["workload.trace"] =
          fs::path(w["trace"].get<std::string>()).lexically_normal().parent_path().filename().string();
  }
  return id;
}

// "router jsq vs round_robin, seed 1 vs 2": the fields in which two runs differ (empty: comparable).
std::string differences(const Json& a, const Json& b)
{
  std::string out;
  for (const auto& [k, v] : a.items()) {
    if (!b.contains(k))
      continue;  // a config-derived field only one side has
    const Json& w = b[k];
    if (v == w)
      continue;
    auto text = [](const Json& j) {
      if (j.is_number_float()) {  // 20, not 20.0
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.9g", j.get<double>());
        return std::string(buf);
      }
      return j.is_string() ? j.get<std::string>() : j.dump(-1, ' ', false, Json::error_handler_t::replace);
    };
    out += (out.empty() ? "" : ", ") + k + " " + text(v) + " vs " + text(w);
  }
  return out;
}

// Measured requests' TPOT from requests.csv (the same rows as summary.json's percentiles); `measured`
// counts the measured rows, finished or not.
std::vector<double> read_tpot(const std::string& file, long& measured_rows)
{
  measured_rows = 0;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw InputError(file, "", "cannot open");
  std::vector<std::string> header, cells;
  long lines      = 0;
  bool open_quote = false;
  if (!csv_read_record(in, header, lines, open_quote))
    throw InputError(file, "", "empty file");
  auto col = [&](const char* name) {
    auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end())
      throw InputError(file, name, "column missing");
    return size_t(it - header.begin());
  };
  size_t measured = col("measured"), tpot = col("tpot_ms");
  std::vector<double> v;
  for (long row = lines + 1; csv_read_record(in, cells, lines, open_quote); row = lines + 1) {
    if (open_quote)
      throw InputError(file, "line " + std::to_string(row), "a quoted field is never closed: cut short");
    if (cells.size() == 1 && cells[0].empty())
      continue;  // a blank line
    if (cells.size() != header.size())
      throw InputError(file, "line " + std::to_string(row),
                       std::to_string(cells.size()) + " cells, header has " + std::to_string(header.size()));
    measured_rows += cells[measured] == "1";
    if (cells[measured] != "1" || cells[tpot].empty())
      continue;
    char* end = nullptr;
    double x  = std::strtod(cells[tpot].c_str(), &end);
    if (end == cells[tpot].c_str() || *end || !std::isfinite(x))
      throw InputError(file, "line " + std::to_string(row), "tpot_ms '" + cells[tpot] + "' is not a number");
    v.push_back(x);
  }
  return v;
}

// Every run (a directory with summary.json and requests.csv) under `root`, by path relative to it.
std::map<std::string, Run> find_runs(const std::string& root)
{
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw InputError(root, "", "not a directory of results");
  std::map<std::string, Run> runs;
  // A directory holding any result file is a run and must be a complete one (an incomplete run is an
  // error, not "only in the baseline").
  auto add = [&](const fs::path& d) {
    const bool summary  = fs::is_regular_file(d / "summary.json", ec),
               requests = fs::is_regular_file(d / "requests.csv", ec);
    if (!summary && !requests)
      return;
    if (!requests)
      throw InputError((d / "requests.csv").string(), "", "missing: compare needs each run's requests.csv");
    std::string key = fs::relative(d, root, ec).lexically_normal().string();
    Json s          = read_verified_summary(d.string());
    Run r;
    r.router   = s.contains("router") && s["router"].is_string() ? run_router_label(s) : key;
    r.dir      = d.string();
    r.identity = run_identity(s);
    long rows  = 0;
    r.tpot     = read_tpot((d / "requests.csv").string(), rows);
    if (!s.contains("requests") || !s["requests"].is_number_integer() || s["requests"].get<long>() != rows)
      throw InputError((d / "requests.csv").string(), "",
                       std::to_string(rows) + " measured rows, summary.json counts " +
                           (s.contains("requests") ? s["requests"].dump() : "none") +
                           ": cut short or from another run");
    runs[key] = std::move(r);
  };
  add(root);
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename().string().starts_with(".")) {  // temporaries, fits
      if (it->is_directory(ec))
        it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory(ec))
      add(it->path());
  }
  if (runs.empty())
    throw InputError(root, "", "no runs (directories with summary.json and requests.csv)");
  return runs;
}

double change_pct(double base, double cur)
{
  return base != 0 ? (cur - base) / base * 100 : 0;
}

int compare(const CompareOptions& o)
{
  auto base = find_runs(o.baseline);
  auto cur  = find_runs(o.current);
  std::vector<std::string> common, only_base, only_cur;
  for (const auto& [k, r] : base)
    (cur.contains(k) ? common : only_base).push_back(k);
  for (const auto& [k, r] : cur)
    if (!base.contains(k))
      only_cur.push_back(k);
  if (common.empty())
    throw InputError(o.current, "", "no run in common with " + o.baseline + " (runs are matched by their path)");
  // Runs of different configurations are no regression check: refused unless asked for.
  std::vector<std::string> notes;
  for (const auto& k : common) {
    const std::string diff = differences(base[k].identity, cur[k].identity);
    if (diff.empty())
      continue;
    if (!o.allow_different) {
      size_t others = 0;
      for (const auto& j : common)
        others += j != k && !differences(base[j].identity, cur[j].identity).empty();
      throw InputError(cur[k].dir, "",
                       "not comparable with " + base[k].dir + ": " + diff +
                           (others ? " (and " + std::to_string(others) + " more runs differ)" : "") +
                           "; compare checks one configuration for regressions: pass --allow-different "
                           "to compare different ones");
    }
    notes.push_back("note: " + (k == "." ? std::string("the runs") : k) + " differ: " + diff);
  }
  for (const auto& n : notes)
    std::printf("%s\n", n.c_str());
  size_t width = 6;
  for (const auto& k : common)
    width = std::max(width, k.size());
  std::printf("%-*s %17s %17s %17s %7s %9s  %s\n", int(width), "run", "TPOT P50 (ms)", "TPOT P95 (ms)", "TPOT P99 (ms)",
              "KS D", "KS p", "verdict");
  int regressions = 0;
  for (const auto& k : common) {
    const Run& b   = base[k];
    const Run& c   = cur[k];
    Percentiles pb = summarize(b.tpot), pc = summarize(c.tpot);
    double d = ks_statistic(b.tpot, c.tpot);
    double p = ks_pvalue(d, b.tpot.size(), c.tpot.size());
    std::vector<std::string> why;
    auto check = [&](const char* name, double vb, double vc, double tol) {
      if (vc - vb > o.tol_abs_ms && change_pct(vb, vc) > tol) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s +%.1f%% > %g%%", name, change_pct(vb, vc), tol);
        why.push_back(buf);
      }
    };
    check("P50", pb.p50, pc.p50, o.tol_p50);
    check("P95", pb.p95, pc.p95, o.tol_p95);
    check("P99", pb.p99, pc.p99, o.tol_p99);
    if (p < o.ks_alpha && d > o.ks_d && pc.mean > pb.mean) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "distribution shifted up (D %.3f > %g, p %.2g < %g)", d, o.ks_d, p, o.ks_alpha);
      why.push_back(buf);
    }
    if (b.tpot.empty() || c.tpot.empty())
      why.push_back("no measured TPOT");
    std::string verdict = why.empty() ? "ok" : "REGRESSION:";
    for (const auto& w : why)
      verdict += " " + w;
    regressions += why.empty() ? 0 : 1;
    auto cell = [](double vb, double vc) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.2f>%.2f %+5.1f%%", vb, vc, change_pct(vb, vc));
      return std::string(buf);
    };
    std::string label = k == "." ? b.router : k;
    std::printf("%-*s %17s %17s %17s %7.3f %9.2g  %s\n", int(width), label.c_str(), cell(pb.p50, pc.p50).c_str(),
                cell(pb.p95, pc.p95).c_str(), cell(pb.p99, pc.p99).c_str(), d, p, verdict.c_str());
  }
  for (const auto& k : only_base)
    std::printf("%s: only in the baseline\n", k.c_str());
  for (const auto& k : only_cur)
    std::printf("%s: only in the current results\n", k.c_str());
  if (o.require_all && !only_base.empty()) {
    std::printf("FAIL: %s missing from the current results\n", count_of(only_base.size(), "baseline run").c_str());
    return 1;
  }
  std::printf(
      "%s: %d of %zu runs regressed (tolerances: P50 %g%%, P95 %g%%, P99 %g%%, above %g ms; KS D > %g at p < %g)\n",
      regressions ? "FAIL" : "PASS", regressions, common.size(), o.tol_p50, o.tol_p95, o.tol_p99, o.tol_abs_ms, o.ks_d,
      o.ks_alpha);
  return regressions ? 1 : 0;
}

}  // namespace

Command add_compare_command(CLI::App& app)
{
  auto o = std::make_shared<CompareOptions>();
  auto* sub =
      app.add_subcommand("compare", "Compare the TPOT distributions of two result sets run by run (P50/P95/P99 and a "
                                    "two-sample KS test); exit 1 on a regression beyond the tolerances");
  sub->add_option("baseline", o->baseline, "Baseline results: a run directory or a directory of runs (e.g. a sweep's)")
      ->required();
  sub->add_option("current", o->current, "Current results, laid out as the baseline (runs match by relative path)")
      ->required();
  sub->add_option("--tol-p50", o->tol_p50, "Allowed TPOT P50 increase, percent")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tol-p95", o->tol_p95, "Allowed TPOT P95 increase, percent")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tol-p99", o->tol_p99, "Allowed TPOT P99 increase, percent")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tol-abs", o->tol_abs_ms, "Increases below this many ms never count")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--ks-alpha", o->ks_alpha, "KS significance level")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--ks-d", o->ks_d, "KS statistic above which a significant upward shift is a regression")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_flag("--require-all", o->require_all, "Also fail when a baseline run is missing from the current results");
  sub->add_flag("--allow-different", o->allow_different,
                "Compare runs of different configurations (another router, model, seed, ...), printing the "
                "differences as a note, instead of exit 2");
  sub->footer(std::string(kIdentityHelp) + ".\n\n" + kExitCodesHelp);
  return {sub, [o] { return compare(*o); }};
}

}  // namespace eldr::app
