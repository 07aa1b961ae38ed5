// eldrsim report RESULTS_DIR: the sweep's plots and tables as report.md and report.html
// (analysis/report.py on Debian's python3 with numpy, pandas and matplotlib).
#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"

#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

struct ReportOptions {
  std::string results;
  std::string out;
};

int report(const ReportOptions& o)
{
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(o.results, ec))
    throw InputError(o.results, "",
                     fs::exists(o.results, ec) ? "not a directory: give a sweep's results directory"
                                               : "not found: give a sweep's results directory");
  // A FIFO or a device would block the reader: a regular file is required (analysis/report.py checks again).
  const auto st = fs::status(fs::path(o.results) / "combined.csv", ec);
  if (st.type() == fs::file_type::not_found)
    throw InputError(o.results, "combined.csv", "missing: not the results of `eldrsim sweep`");
  if (st.type() == fs::file_type::directory)
    throw InputError((fs::path(o.results) / "combined.csv").string(), "", "is a directory, not a file");
  if (st.type() != fs::file_type::regular)
    throw InputError((fs::path(o.results) / "combined.csv").string(), "",
                     "is not a regular file (a device, FIFO or socket)");
  // The report reads combined.csv (and the per-seed table) and the sweeps' point directories: it may
  // live beside them (RESULTS/report, the default), never on or above or among them.
  const std::string out = o.out.empty() ? (fs::path(o.results) / "report").string() : o.out;
  std::vector<CommandInput> inputs;
  for (const char* table : {"combined.csv", "combined_seeds.csv"})
    inputs.push_back({(fs::path(o.results) / table).string(), std::string("the sweep's ") + table});
  for (const auto& sweep : fs::directory_iterator(o.results, ec))
    if (sweep.is_directory(ec) && !holds_marker(sweep.path().string(), kReportMarker))
      for (const auto& point : fs::directory_iterator(sweep.path(), ec))
        if (holds_marker(point.path().string(), kPointMarker)) {
          inputs.push_back({sweep.path().string(), "the points of sweep '" + sweep.path().filename().string() + "'"});
          break;
        }
  check_output_apart(out, "--out", inputs);
  check_replaceable_directory(out, "--out", kReportMarker, "a report");
  std::vector<std::string> args = {o.results, "--out", out};
  exec_analysis_script(project_root(o.results), "report.py", args);
}

}  // namespace

Command add_report_command(CLI::App& app)
{
  auto o    = std::make_shared<ReportOptions>();
  auto* sub = app.add_subcommand("report", "Write report.md and report.html (plots and tables) for a sweep's results");
  sub->add_option("results", o->results, "A sweep's results directory (with combined.csv)")->required();
  sub->add_option("--out", o->out, "Directory for the report (default RESULTS/report)");
  return {sub, [o] { return report(*o); }};
}

}  // namespace eldr::app
