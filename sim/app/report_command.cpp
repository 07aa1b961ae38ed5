// eldrsim report RESULTS_DIR: the sweep's plots and tables as report.md and report.html
// (analysis/report.py on Debian's python3 with numpy, pandas and matplotlib).
#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <unistd.h>

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
  if (!fs::is_regular_file(fs::path(o.results) / "combined.csv", ec))
    throw InputError(o.results, "combined.csv", "missing: not the results of `eldrsim sweep`");
  std::string script = (fs::path(project_root(o.results)) / "analysis" / "report.py").string();
  if (!fs::is_regular_file(script, ec))
    throw InputError(script, "", "not found (set ELDR_HOME to the project directory)");
  const char* py     = std::getenv("ELDR_PYTHON");
  std::string python = py && *py ? py : "/usr/bin/python3";
  std::vector<std::string> args = {python, script, o.results};
  if (!o.out.empty())
    args.insert(args.end(), {"--out", o.out});
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(python.c_str(), argv.data());
  throw InputError(python, "", std::string("cannot run: ") + std::strerror(errno));
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
