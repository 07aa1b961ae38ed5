#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/metrics/result_check.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

// A number of summary.json as a table cell; null (no data: no measured request finished) is "-".
std::string field(const Json& j, const std::string& file, const char* fmt, const char* a, const char* b = nullptr)
{
  const Json* v = &j;
  for (const char* k : {a, b}) {
    if (!k)
      break;
    if (!v->is_object() || !v->contains(k))
      throw InputError(file, b ? std::string(a) + "." + b : a, "missing");
    v = &(*v)[k];
  }
  if (v->is_null())
    return "-";
  if (!v->is_number())
    throw InputError(file, b ? std::string(a) + "." + b : a, "must be a number");
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v->get<double>());
  return buf;
}

// A directory of runs (a sweep's OUT) is not one run: the runs in it, and the command for all of them.
void refuse_directory_of_runs(const std::string& dir)
{
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::exists(fs::path(dir) / "summary.json", ec))
    return;
  std::string first;
  long runs = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it.depth() > 3 || it->path().filename().string().starts_with(".")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->path().filename() == "summary.json") {
      if (first.empty() || it->path().parent_path().string() < first)
        first = it->path().parent_path().string();
      ++runs;
    }
  }
  if (runs > 0)
    throw InputError(dir, "",
                     "a directory of " + std::to_string(runs) + (runs == 1 ? " run" : " runs") +
                         " (a sweep's results?), not one run: give the runs' directories (e.g. " + first +
                         "), or see them all with `eldrsim report " + dir + "`");
}

int table(const std::vector<std::string>& dirs)
{
  // Everything is read and checked before the first line is printed.
  std::vector<std::string> rows;
  for (const auto& d : dirs) {
    refuse_directory_of_runs(d);
    std::string file   = (std::filesystem::path(d) / "summary.json").string();
    Json j             = read_verified_summary(d);
    std::string router = j.contains("router") && j["router"].is_string() ? run_router_label(j) : d;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-14s %10s %10s %10s %10s %9s %9s", router.c_str(),
                  field(j, file, "%.2f", "tpot_ms", "p50").c_str(), field(j, file, "%.2f", "tpot_ms", "p99").c_str(),
                  field(j, file, "%.1f", "ttft_ms", "p50").c_str(),
                  field(j, file, "%.1f", "distinct_experts_per_layer_mean").c_str(),
                  field(j, file, "%.1f", "decode_batch_mean").c_str(), field(j, file, "%.0f", "requests").c_str());
    rows.push_back(buf);
  }
  std::printf("%-14s %10s %10s %10s %10s %9s %9s\n", "router", "TPOT p50", "TPOT p99", "TTFT p50", "distinct", "batch",
              "requests");
  std::printf("%-14s %10s %10s %10s %10s %9s %9s\n", "", "(ms)", "(ms)", "(ms)", "/layer", "mean", "");
  for (const auto& r : rows)
    std::printf("%s\n", r.c_str());
  return 0;
}

}  // namespace

Command add_table_command(CLI::App& app)
{
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("table", "Print TPOT/TTFT of finished runs side by side");
  sub->add_option("results", *dirs, "Run output directories (each with a summary.json)")->required();
  return {sub, [dirs] { return table(*dirs); }};
}

}  // namespace eldr::app
