// eldrsim sweep: running the points, each its own `eldrsim run` process, N at a time, after the
// router fits they share; progress lines and failure logs.
#include "sim/app/commands.hpp"
#include "sim/app/process_pool.hpp"
#include "sim/app/sweep_parts.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/gating/generated_gating.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
namespace eldr::app {

namespace fs = std::filesystem;

namespace {

// The generated routing sources the points build, shared through files for the length of one sweep
// (GeneratedGating: a source is loaded only for exactly the same inputs, so results do not change):
// most points of a grid have the same model, workload and seed, and building the palettes is a fixed
// ~6% of a point. Removed when the sweep ends; a killed sweep's by the next (remove_stale_temporaries).
// Before each child starts, this process reads the files there that it has not read yet
// (preload_routing_cache): the child, forked from it, finds them in memory.
struct RoutingCache {
  std::string dir;
  void preload() const
  {
    if (!dir.empty())
      preload_routing_cache(dir);
  }
  explicit RoutingCache(const std::string& out) : dir((fs::path(out) / (".routing-cache" + owner_suffix())).string())
  {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      dir.clear();  // no sharing, every point builds its own
  }
  ~RoutingCache()
  {
    std::error_code ec;
    if (!dir.empty())
      fs::remove_all(dir, ec);
  }
};

std::vector<std::string> run_argv(const std::string& self, const SweepPoint& p, const std::string& tmp,
                                  const std::string& model_file, const std::string& routing_cache)
{
  std::vector<std::string> a = {self, "run", p.config};
  for (const auto& [k, v] : p.overrides) {
    a.push_back("--set");
    a.push_back(k + "=" + v);
  }
  if (!model_file.empty()) {
    a.push_back("--set");
    a.push_back(std::string(fit_of(p).file_key) + "=" + model_file);
  }
  a.insert(a.end(), {"--out", tmp, "-q"});
  if (!routing_cache.empty())
    a.insert(a.end(), {"--routing-cache", routing_cache});
  return a;
}

std::vector<std::string> fit_argv(const std::string& self, const SweepPoint& p, const std::string& file,
                                  const std::string& routing_cache)
{
  std::vector<std::string> a = {self, "fit", p.config, "--fit", p.fit, "--out", file};
  for (const auto& [k, v] : p.overrides) {
    a.push_back("--set");
    a.push_back(k + "=" + v);
  }
  if (!routing_cache.empty())
    a.insert(a.end(), {"--routing-cache", routing_cache});
  return a;
}

std::string fmt_duration(double s)
{
  if (!std::isfinite(s) || s < 0)
    return "?";
  long t = std::lround(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

// Whether the progress line (on a terminal, rewritten in place) is open: anything else printed to
// stderr ends it first (end_progress_line), so nothing is glued onto it.
bool g_progress_open = false;

}  // namespace

void end_progress_line()
{
  if (g_progress_open)
    std::fputc('\n', stderr);
  g_progress_open = false;
}

namespace {

// On a terminal one line rewritten in place; elsewhere (a log file, a pipe) a whole line per point.
// Failures are printed even when quiet: errors never are.
class Progress {
 public:
  Progress(size_t total, size_t skipped, bool quiet)
      : total_(total), done_(skipped), quiet_(quiet), tty_(::isatty(2)), start_(std::chrono::steady_clock::now())
  {
    if (!quiet_ && skipped > 0)
      std::fprintf(stderr, "sweep: %zu of %zu points already done (resuming)\n", skipped, total);
  }
  void finished(bool ok, const std::string& what)
  {
    ++done_;
    ++now_;
    failed_ += ok ? 0 : 1;
    if (quiet_) {
      if (!ok)
        std::fprintf(stderr, "sweep: %s\n", what.c_str());
      return;
    }
    double el              = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double eta             = double(total_ - done_) * el / double(now_);
    const std::string line = "sweep: " + std::to_string(done_) + "/" + std::to_string(total_) + " done" +
                             (failed_ ? ", " + std::to_string(failed_) + " failed" : "") + ", elapsed " +
                             fmt_duration(el) + ", ETA " + fmt_duration(eta) + "  " + what;
    if (!tty_) {
      std::fprintf(stderr, "%s\n", line.c_str());
      return;
    }
    if (!ok) {  // a failure stays on the screen, on its own line
      end_progress_line();
      std::fprintf(stderr, "%s\n", line.c_str());
      return;
    }
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    g_progress_open = true;
    if (done_ == total_)
      end_progress_line();
  }
  void note(const std::string& line, bool error = false)
  {
    if (quiet_ && !error)
      return;
    end_progress_line();
    std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  size_t total_, done_, now_ = 0, failed_ = 0;
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point start_;
};

// How a child ended, for a failure line and its log: "exit 1", or "killed by SIGKILL (signal 9):
// usually the kernel's out-of-memory killer".
std::string how_it_ended(const ChildExit& e)
{
  if (e.signal == 0)
    return "exit " + std::to_string(e.code);
  const std::string meaning = signal_meaning(e.signal), name = signal_name(e.signal);
  return "killed by " + name + (name.starts_with("SIG") ? " (signal " + std::to_string(e.signal) + ")" : "") +
         (meaning.empty() ? "" : ": " + meaning);
}

// Appends `line` to the log file `path` (a child's log, which may not exist).
void append_line(const fs::path& path, const std::string& line)
{
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

// A child's exit code (or 128 + signal) after an interrupt.
bool interrupted(int code)
{
  return code == 130 || code == 128 + SIGINT || code == 128 + SIGTERM || code == 128 + SIGHUP;
}

// A shared fit on disk that reads back whole; one that does not (damaged: its checksum fails) is
// removed with a note, to be fitted again.
bool usable_fit(const RouterFit& fit, const fs::path& file, Progress& progress)
{
  if (!fs::exists(file))
    return false;
  try {
    fit.check_file(file.string());
    return true;
  } catch (const InputError& e) {
    progress.note(std::string("sweep: fitting ") + fit.label + " again: " + e.what(), true);
    std::error_code ec;
    fs::remove(file, ec);
    return false;
  }
}

// A point that ran again and failed: its earlier directory recorded other inputs (or failed its check).
const char kWithdrawn[] = "; its earlier results, of other inputs, removed";

}  // namespace

// Runs the given points (indices into plan.points) that are not done yet. Returns the failures.
size_t run_points(const SweepPlan& plan, const std::vector<size_t>& which, const std::string& out, int jobs, bool fit,
                  bool quiet)
{
  const std::string self = self_executable();
  remove_stale_temporaries(out, plan);
  std::vector<size_t> todo;
  std::vector<std::string> redo;  // points whose results are there but fail the check
  for (size_t i : which) {
    std::string why;
    if (!point_done(out, plan.points[i], &why)) {
      todo.push_back(i);
      if (!why.empty())
        redo.push_back("sweep: " + plan.points[i].sweep + "/" + plan.points[i].name + ": running it again: " + why);
    }
  }
  Progress progress(which.size(), which.size() - todo.size(), quiet);
  for (const auto& line : redo)
    progress.note(line, true);  // even when quiet: a result went bad since it was written
  if (todo.empty())
    return 0;
  const RoutingCache cache(out);

  // Each router fit once per distinct fit input, shared by the points (and the sweeps) that use it.
  auto shared_key = [](const SweepPoint& p) { return p.fit + "/" + p.fit_key; };
  std::map<std::string, size_t> fits;  // fit and key -> first point needing it
  for (size_t i : todo) {
    const SweepPoint& p = plan.points[i];
    if (fit && !p.fit.empty() && !usable_fit(fit_of(p), fit_file(out, p), progress))
      fits.emplace(shared_key(p), i);
  }
  std::map<std::string, std::string> failed_fits;  // fit and key -> how it failed and where its log is
  if (!fits.empty()) {
    std::vector<ChildTask> tasks;
    std::map<std::string, size_t> per_label;  // how many fits of each kind run
    for (const auto& [key, i] : fits) {
      const SweepPoint& p = plan.points[i];
      const char* label   = fit_of(p).label;
      ++per_label[label];
      fs::create_directories(fits_dir(out, p));
      std::string file = fit_file(out, p).string();
      std::string log  = file.substr(0, file.size() - 5) + ".log";
      tasks.push_back({[&cache] { cache.preload(); }, fit_argv(self, p, file, cache.dir), log,
                       [&, key, log, label](const ChildExit& e) {
                         if (e.code != 0 && !interrupted(e.code)) {
                           const std::string how = how_it_ended(e);
                           if (e.signal != 0)
                             append_line(log, "eldrsim sweep: the fit was " + how);
                           failed_fits[key] = how + ", see " + log;
                           progress.note(std::string("sweep: ") + label + " fit failed (" + how + "), see " + log,
                                         true);
                         }
                       }});
    }
    if (!quiet)
      for (const auto& [label, n] : per_label)
        std::fprintf(stderr, "sweep: fitting %s %s for %s\n", label.c_str(), count_of(n, "time").c_str(),
                     count_of(todo.size(), "point").c_str());
    if (int sig = run_tasks(std::move(tasks), jobs))
      throw Interrupted{sig};
  }

  size_t failures  = 0;
  double cpu_total = 0;
  auto started     = std::chrono::steady_clock::now();
  std::vector<ChildTask> tasks;
  for (size_t i : todo) {
    const SweepPoint& p = plan.points[i];
    fs::path final_dir  = point_dir(out, p);
    fs::path failed_log = final_dir.parent_path() / (p.name + ".failed.log");
    if (fit && !p.fit.empty() && failed_fits.contains(shared_key(p))) {
      ++failures;
      // The point's own log says where the fit's is, so "<point>.failed.log" is always there.
      const std::string why =
          std::string("its ") + fit_of(p).label + " fit failed (" + failed_fits[shared_key(p)] + ")";
      std::error_code ec;
      fs::create_directories(failed_log.parent_path(), ec);
      write_file_atomically(failed_log.string(), "not run: " + why + "\n");
      progress.finished(false, p.sweep + "/" + p.name + " FAILED: " + why + (withdraw(final_dir) ? kWithdrawn : ""));
      continue;
    }
    fs::path tmp      = final_dir.parent_path() / (".tmp." + p.name + owner_suffix());
    std::string model = fit && !p.fit.empty() ? fit_file(out, p).string() : "";
    std::string log   = (tmp / "run.log").string();
    // The temporary directory is made when the point starts, not up front.
    auto prepare = [tmp, out, &cache] {
      cache.preload();
      std::error_code ec;
      fs::remove_all(tmp, ec);
      if (!fs::create_directories(tmp, ec) && ec)
        throw InputError(out, "", "cannot create a point's directory: " + ec.message());
    };
    tasks.push_back({prepare, run_argv(self, p, tmp.string(), model, cache.dir), log,
                     [&, tmp, final_dir, failed_log, i](const ChildExit& e) {
                       const SweepPoint& q = plan.points[i];
                       const int code      = e.code;
                       const double cpu = e.cpu_s, wall = e.wall_s;
                       std::error_code ec;
                       if (interrupted(code)) {  // Ctrl-C: neither a result nor a failure
                         fs::remove_all(tmp, ec);
                         return;
                       }
                       // 0: done; 3: done, but some measured requests did not finish (kept, flagged in the CSV).
                       if ((code == 0 || code == 3) && fs::is_regular_file(tmp / "summary.json", ec)) {
                         // Timings stay here, out of combined.csv (which is byte-identical across runs).
                         Json rec = {{"identity", q.identity()}, {"exit_code", code}, {"cpu_s", cpu}, {"wall_s", wall}};
                         cpu_total += cpu;
                         write_file_atomically((tmp / "point.json").string(),
                                               rec.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
                         publish(tmp, final_dir);
                         fs::remove(failed_log, ec);
                         progress.finished(true, q.sweep + "/" + q.name);
                       } else {
                         ++failures;
                         fs::copy_file(tmp / "run.log", failed_log, fs::copy_options::overwrite_existing, ec);
                         fs::remove_all(tmp, ec);
                         const std::string how = code == 0 || code == 3
                                                     ? "exit " + std::to_string(code) + " without summary.json"
                                                     : how_it_ended(e);
                         // A killed run wrote nothing about it: the log says what happened.
                         append_line(failed_log, "eldrsim sweep: the run ended: " + how);
                         progress.finished(false, q.sweep + "/" + q.name + " FAILED (" + how + "), see " +
                                                      failed_log.string() + (withdraw(final_dir) ? kWithdrawn : ""));
                       }
                     }});
  }
  size_t ran = tasks.size();
  if (int sig = run_tasks(std::move(tasks), jobs))
    throw Interrupted{sig};
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!quiet && ran > 0)
    std::fprintf(stderr, "sweep: ran %s in %.1f s wall, %.1f s CPU (%.2f s per point), %d at a time\n",
                 count_of(ran, "point").c_str(), wall, cpu_total, cpu_total / double(ran), jobs);
  return failures;
}

}  // namespace eldr::app
