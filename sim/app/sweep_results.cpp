// eldrsim sweep: the results directory: where each point lives, whether it is done, publishing a
// finished point whole and withdrawing one that no longer describes its inputs.
#include "sim/app/commands.hpp"
#include "sim/app/sweep_parts.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/metrics/result_check.hpp"

#include <csignal>
#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
namespace eldr::app {

namespace fs = std::filesystem;

fs::path point_dir(const std::string& out, const SweepPoint& p)
{
  return fs::path(out) / p.sweep / p.name;
}

// The point's router fit (find_router_fit(p.fit): the plan found it in the table).
const RouterFit& fit_of(const SweepPoint& p)
{
  return *find_router_fit(p.fit);
}

// Shared fits live in OUT/.<fit>-fits/, one file per fit key.
fs::path fits_dir(const std::string& out, const SweepPoint& p)
{
  return fs::path(out) / ("." + p.fit + "-fits");
}

fs::path fit_file(const std::string& out, const SweepPoint& p)
{
  return fs::absolute(fits_dir(out, p) / (p.fit_key + ".json"));
}

// A point is done when its directory (only ever renamed into place whole) records the same run (the
// same content of everything the point reads: SweepPoint::identity) and its files check out as
// `table` and `compare` check them (result_check.hpp): a file cut or edited since is not a result.
// `why`: what is wrong with a directory that is there (empty when the point is simply not there).
bool point_done(const std::string& out, const SweepPoint& p, std::string* why)
{
  fs::path d = point_dir(out, p);
  std::error_code ec;
  if (!fs::is_regular_file(d / "summary.json", ec) || !fs::is_regular_file(d / "point.json", ec))
    return false;
  try {
    Json j           = load_json_file((d / "point.json").string());
    const Json ident = p.identity();
    if (!j.is_object() || !j.contains("identity") || j["identity"] != ident) {
      if (why)
        *why = identity_change(j.is_object() ? j.value("identity", Json()) : Json(), ident);
      return false;  // another run's results: replaced
    }
  } catch (const InputError& e) {
    if (why)
      *why = e.what();
    return false;
  }
  try {
    read_verified_summary(d.string());
    return true;
  } catch (const InputError& e) {
    if (why)
      *why = e.what();
    return false;
  }
}

// Temporaries carry owner_suffix() (result_dir.hpp), "@<host>@<pid>". Point names never hold '@';
// the host matters when array tasks on several nodes share the results directory.

// Leftovers of interrupted sweeps on this host: .tmp.<name>@<host>@<pid> (and .old.) directories
// whose process is gone. Other hosts' are left alone (they may be running).
void remove_stale_temporaries(const std::string& out, const SweepPlan& plan)
{
  const std::string mine = owner_suffix();
  const std::string host = mine.substr(0, mine.rfind('@') + 1);  // "@<host>@"
  std::set<std::string> dirs{out};                               // out: routing caches of killed sweeps
  for (const auto& p : plan.points)
    dirs.insert((fs::path(out) / p.sweep).string());
  std::error_code ec;
  for (const auto& d : dirs) {
    if (!fs::is_directory(d, ec))
      continue;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      std::string n = e.path().filename().string();
      // "..tmp.": what a point's run left beside its output (its staging directory, its lock).
      if (!n.starts_with(".tmp.") && !n.starts_with("..tmp.") && !n.starts_with(".old.") &&
          !n.starts_with(".routing-cache@"))
        continue;
      auto at = n.find('@');
      if (at == std::string::npos || n.compare(at, host.size(), host) != 0)
        continue;  // another host's
      // The sweep's pid (in "..tmp." names, the first: its point's run adds its own after it).
      long pid = std::atol(n.c_str() + at + host.size());
      if (pid > 0 && pid != long(::getpid()) && ::kill(pid_t(pid), 0) == 0)
        continue;  // another sweep still running on this directory
      fs::remove_all(e.path(), ec);
    }
  }
}

// Before any point runs: OUT is apart from the sweep's files and configs, every point directory
// there is a point eldr-sim wrote (publish replaces it whole), and so is the report it will replace.
void check_outputs(const SweepPlan& plan, const std::string& out, bool report)
{
  std::vector<CommandInput> inputs = {{plan.file, "the sweep file"}};
  std::set<std::string> configs;
  for (const auto& p : plan.points)
    if (configs.insert(p.config).second)
      inputs.push_back({p.config, "a config of the sweep"});
  check_output_apart(out, "--out", inputs);
  for (const auto& p : plan.points)
    check_replaceable_directory(point_dir(out, p).string(), "--out", kPointMarker, "a sweep point");
  if (report)
    check_replaceable_directory((fs::path(out) / "report").string(), "--report", kReportMarker, "a report");
}

namespace {

fs::path aside(const fs::path& final_dir)
{
  return final_dir.parent_path() / (".old." + final_dir.filename().string() + owner_suffix());
}

}  // namespace

// Moves a finished temporary directory into place; a previous (stale) result goes away whole.
void publish(const fs::path& tmp, const fs::path& final_dir)
{
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    const fs::path old = aside(final_dir);
    fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    fs::remove_all(old, ec);
  } else
    fs::rename(tmp, final_dir);
}

// A directory of eldr-sim's own (a point, a report) that no longer describes what the sweep's inputs
// give goes away whole (renamed aside first), so that nothing reads it as current: `compare`, the
// report, a reader of combined.csv. True when there was one.
bool withdraw(const fs::path& dir)
{
  std::error_code ec;
  if (!fs::exists(dir, ec))
    return false;
  const fs::path old = aside(dir);
  fs::rename(dir, old, ec);
  fs::remove_all(ec ? dir : old, ec);
  return true;
}

}  // namespace eldr::app
