// eldrsim sweep: running the points, each its own `eldrsim run` process, N at a time, after the
// router fits they share; progress lines and failure logs.
#include "sim/app/commands.hpp"
#include "sim/app/process_pool.hpp"
#include "sim/app/sweep_parts.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/build_id.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/gating/generated_gating.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
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

// What a point's result files depend on, as a key: two points of the same key are the same run. The
// resolved config (every value the run uses, after config, includes, overrides and seed: two
// spellings of one value give the same) and the content of every file it reads (the identity's
// hashes), the fit file handed to it (its path is in summary.json) and the executable (its build ID
// is too). Empty (a point never shared) when the plan did not resolve the point.
std::string run_key(const SweepPoint& p, const std::string& model_file)
{
  if (p.resolved_hash.empty())
    return "";
  std::string text = "resolved " + p.resolved_hash + "\nbuild " + executable_build_id() + "\nfit " + model_file + "\n";
  for (const auto& [file, h] : p.input_hashes)
    text += file + " " + h + "\n";
  return hash_hex(text);
}

std::string point_label(const SweepPoint& p)
{
  return p.sweep + "/" + p.name;
}

// The point's record (point.json): its identity, how its run ended, the run's key and, for a point
// that took another's results, which one ran.
Json point_record(const SweepPoint& p, int code, double cpu, double wall, const std::string& key,
                  const std::string& ran_as = "")
{
  Json rec = {{"identity", p.identity()}, {"exit_code", code}, {"cpu_s", cpu}, {"wall_s", wall}, {"run_key", key}};
  if (!ran_as.empty())
    rec["same_run_as"] = ran_as;
  return rec;
}

void write_record(const fs::path& dir, const Json& rec)
{
  write_file_atomically((dir / "point.json").string(), rec.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

// Gives point `p` the result files of the finished point directory `from` (the same run): copied into
// a temporary directory beside p's, its own point.json added, and moved into place whole, as a run's
// are. False (nothing changed) when the copy fails: the point then runs.
bool take_results(const fs::path& from, const SweepPoint& p, const std::string& out, const Json& rec)
{
  const fs::path final_dir = point_dir(out, p);
  const fs::path tmp       = final_dir.parent_path() / (".tmp." + p.name + owner_suffix());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  for (const auto& e : fs::directory_iterator(from, ec)) {
    if (ec || e.path().filename() == "point.json")
      continue;
    fs::copy(e.path(), tmp / e.path().filename(), fs::copy_options::recursive, ec);
    if (ec)
      break;
  }
  if (ec) {
    fs::remove_all(tmp, ec);
    return false;
  }
  write_record(tmp, rec);
  publish(tmp, final_dir);
  fs::remove(final_dir.parent_path() / (p.name + ".failed.log"), ec);
  return true;
}

// The point.json of a finished point directory; null when it does not read.
Json read_record(const fs::path& dir)
{
  try {
    return load_json_file((dir / "point.json").string());
  } catch (const InputError&) {
    return Json();
  }
}

}  // namespace

// Runs the given points (indices into plan.points) that are not done yet, each distinct run once:
// a point of the same run key as another takes that one's results (see run_key). Returns the failures.
size_t run_points(const SweepPlan& plan, const std::vector<size_t>& which, const std::string& out, int jobs, bool fit,
                  bool share_warmups, bool quiet)
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
        redo.push_back("sweep: " + point_label(plan.points[i]) + ": running it again: " + why);
    }
  }
  Progress progress(which.size(), which.size() - todo.size(), quiet);
  for (const auto& line : redo)
    progress.note(line, true);  // even when quiet: a result went bad since it was written
  if (todo.empty())
    return 0;

  auto model_of = [&](const SweepPoint& p) { return fit && !p.fit.empty() ? fit_file(out, p).string() : ""; };
  std::vector<std::string> keys(plan.points.size());
  for (size_t i = 0; i < plan.points.size(); ++i)
    keys[i] = run_key(plan.points[i], model_of(plan.points[i]));
  // A point whose twin is done (an earlier sweep's, or another array task's) takes its results now.
  std::set<std::string> wanted;  // the run keys of the points to do
  for (size_t i : todo)
    wanted.insert(keys[i]);
  std::map<std::string, std::pair<size_t, Json>> done_runs;  // run key -> a done point of it, its record
  for (size_t i = 0; i < plan.points.size(); ++i) {
    if (keys[i].empty() || !wanted.contains(keys[i]) || done_runs.contains(keys[i]) ||
        std::find(todo.begin(), todo.end(), i) != todo.end() || !point_done(out, plan.points[i]))
      continue;
    Json rec = read_record(point_dir(out, plan.points[i]));
    if (rec.is_object() && rec.value("run_key", "") == keys[i])
      done_runs[keys[i]] = {i, std::move(rec)};
  }
  std::vector<size_t> runners;                  // the points that run
  std::map<size_t, std::vector<size_t>> twins;  // a runner -> the points that take its results
  std::map<std::string, size_t> runner_of;      // run key -> its runner
  size_t taken = 0;
  for (size_t i : todo) {
    const SweepPoint& p = plan.points[i];
    if (auto d = done_runs.find(keys[i]); d != done_runs.end()) {
      const auto& [from, ran] = d->second;
      const std::string first = ran.value("same_run_as", point_label(plan.points[from]));  // the point that ran
      if (take_results(point_dir(out, plan.points[from]), p, out,
                       point_record(p, ran.value("exit_code", 0), 0, 0, keys[i], first))) {
        ++taken;
        progress.finished(true, point_label(p) + " (the same run as " + point_label(plan.points[from]) + ")");
        continue;
      }
    }
    if (auto r = runner_of.find(keys[i]); !keys[i].empty() && r != runner_of.end()) {
      twins[r->second].push_back(i);
      continue;
    }
    runner_of.emplace(keys[i], i);
    runners.push_back(i);
  }
  size_t shared = 0;
  for (const auto& [r, t] : twins)
    shared += t.size();
  if (!quiet && shared > 0)
    std::fprintf(stderr,
                 "sweep: %zu of %zu points are the same run as another (same resolved config and inputs): "
                 "each run once, its twins take its results\n",
                 shared, todo.size() - taken);
  if (runners.empty())
    return 0;
  const RoutingCache cache(out);
  std::vector<ChildTask> tasks;

  // Each router fit once per distinct fit input, shared by the points (and the sweeps) that use it;
  // a point starts as soon as its fit is done (the fits first in the list, so they start first).
  auto shared_key = [](const SweepPoint& p) { return p.fit + "/" + p.fit_key; };
  std::map<std::string, size_t> fits;  // fit and key -> first point needing it
  for (size_t i : runners) {
    const SweepPoint& p = plan.points[i];
    if (fit && !p.fit.empty() && !usable_fit(fit_of(p), fit_file(out, p), progress))
      fits.emplace(shared_key(p), i);
  }
  std::map<std::string, std::string> failed_fits;  // fit and key -> how it failed and where its log is
  std::map<std::string, size_t> fit_task;          // fit and key -> its task
  if (!fits.empty()) {
    std::map<std::string, size_t> per_label;  // how many fits of each kind run
    for (const auto& [key, i] : fits) {
      const SweepPoint& p = plan.points[i];
      const char* label   = fit_of(p).label;
      ++per_label[label];
      fs::create_directories(fits_dir(out, p));
      std::string file = fit_file(out, p).string();
      std::string log  = file.substr(0, file.size() - 5) + ".log";
      fit_task[key]    = tasks.size();
      tasks.push_back({[&cache] {
                         cache.preload();
                         return true;
                       },
                       fit_argv(self, p, file, cache.dir),
                       log,
                       [&, key, log, label](const ChildExit& e) {
                         if (e.code != 0 && !interrupted(e.code)) {
                           const std::string how = how_it_ended(e);
                           if (e.signal != 0)
                             append_line(log, "eldrsim sweep: the fit was " + how);
                           failed_fits[key] = how + ", see " + log;
                           progress.note(std::string("sweep: ") + label + " fit failed (" + how + "), see " + log,
                                         true);
                         }
                       },
                       {}});
    }
    if (!quiet)
      for (const auto& [label, n] : per_label)
        std::fprintf(stderr, "sweep: fitting %s %s for %s\n", label.c_str(), count_of(n, "time").c_str(),
                     count_of(todo.size(), "point").c_str());
  }

  size_t failures  = 0;
  double cpu_total = 0;
  auto started     = std::chrono::steady_clock::now();
  // A point that is not there: its failure log, a line, its earlier results withdrawn.
  auto fail = [&](const SweepPoint& q, const std::string& log_text, const std::string& line) {
    ++failures;
    const fs::path final_dir = point_dir(out, q), failed_log = final_dir.parent_path() / (q.name + ".failed.log");
    std::error_code ec;
    fs::create_directories(failed_log.parent_path(), ec);
    write_file_atomically(failed_log.string(), log_text);
    progress.finished(false, point_label(q) + " FAILED: " + line + (withdraw(final_dir) ? kWithdrawn : ""));
  };
  // The runner's twins, once it has failed: they fail with it.
  auto fail_twins = [&](size_t runner, const std::string& why) {
    for (size_t t : twins[runner])
      fail(plan.points[t], "not run: the same run as " + point_label(plan.points[runner]) + ", which " + why + "\n",
           "the same run as " + point_label(plan.points[runner]) + ", which " + why);
  };
  // Where a point's run writes (a directory beside its final one) and its log.
  auto tmp_of = [&](size_t i) {
    const fs::path final_dir = point_dir(out, plan.points[i]);
    return final_dir.parent_path() / (".tmp." + plan.points[i].name + owner_suffix());
  };
  // A point's fit failed: it is not run (its own log says where the fit's is, so "<point>.failed.log"
  // is always there), and neither are its twins.
  auto fit_failed = [&](size_t i) {
    const SweepPoint& q = plan.points[i];
    if (!fit || q.fit.empty() || !failed_fits.contains(shared_key(q)))
      return false;
    const std::string why = std::string("its ") + fit_of(q).label + " fit failed (" + failed_fits[shared_key(q)] + ")";
    fail(q, "not run: " + why + "\n", why);
    fail_twins(i, "was not run: " + why);
    return true;
  };
  // The temporary directory is made when the point starts, not up front.
  auto make_tmp = [&](size_t i) {
    std::error_code ec;
    const fs::path tmp = tmp_of(i);
    fs::remove_all(tmp, ec);
    if (!fs::create_directories(tmp, ec) && ec)
      throw InputError(out, "", "cannot create a point's directory: " + ec.message());
  };
  // How point i's run ended: its results published (and given to its twins), or its failure recorded.
  auto finish_point = [&](size_t i, const ChildExit& e, const Json& shared_warmup) {
    const SweepPoint& q      = plan.points[i];
    const fs::path final_dir = point_dir(out, q), tmp = tmp_of(i);
    const fs::path failed_log = final_dir.parent_path() / (q.name + ".failed.log");
    const int code            = e.code;
    std::error_code ec;
    if (interrupted(code)) {  // Ctrl-C: neither a result nor a failure
      fs::remove_all(tmp, ec);
      return;
    }
    // 0: done; 3: done, but some measured requests did not finish (kept, flagged in the CSV).
    if ((code == 0 || code == 3) && fs::is_regular_file(tmp / "summary.json", ec)) {
      // Timings stay here, out of combined.csv (which is byte-identical across runs).
      Json rec = point_record(q, code, e.cpu_s, e.wall_s, keys[i]);
      if (!shared_warmup.is_null())
        rec["shared_warmup"] = shared_warmup;
      write_record(tmp, rec);
      publish(tmp, final_dir);
      fs::remove(failed_log, ec);
      progress.finished(true, point_label(q));
      for (size_t t : twins[i]) {
        const SweepPoint& twin = plan.points[t];
        if (take_results(final_dir, twin, out, point_record(twin, code, 0, 0, keys[i], point_label(q))))
          progress.finished(true, point_label(twin) + " (the same run as " + point_label(q) + ")");
        else
          fail(twin, "not written: copying the results of " + point_label(q) + " failed\n",
               "copying the results of " + point_label(q) + " failed");
      }
      return;
    }
    ++failures;
    fs::copy_file(tmp / "run.log", failed_log, fs::copy_options::overwrite_existing, ec);
    fs::remove_all(tmp, ec);
    const std::string how =
        code == 0 || code == 3 ? "exit " + std::to_string(code) + " without summary.json" : how_it_ended(e);
    // A killed run wrote nothing about it: the log says what happened.
    append_line(failed_log, "eldrsim sweep: the run ended: " + how);
    progress.finished(false, point_label(q) + " FAILED (" + how + "), see " + failed_log.string() +
                                 (withdraw(final_dir) ? kWithdrawn : ""));
    fail_twins(i, "failed (" + how + "), see " + failed_log.string());
  };

  // Points that differ only in their measured phase run as one task that simulates their warm-up once
  // (run --measured-phases, sim/workload/measured_phase.hpp): results are the same. How many share a
  // task: warmup_batches.
  std::vector<std::vector<size_t>> batches;
  {
    std::vector<std::string> keys;
    for (size_t i : runners) {
      const SweepPoint& p = plan.points[i];
      keys.push_back(!share_warmups || p.warmup_key.empty() ? "" : p.warmup_key + "\n" + model_of(p));
    }
    for (std::vector<size_t>& b : warmup_batches(keys, jobs)) {
      for (size_t& k : b)
        k = runners[k];
      batches.push_back(std::move(b));
    }
  }
  if (!quiet && batches.size() < runners.size()) {
    size_t grouped = 0, groups = 0;
    for (const auto& b : batches)
      if (b.size() > 1) {
        grouped += b.size();
        ++groups;
      }
    std::fprintf(stderr,
                 "sweep: %zu of %zu points share %s (they differ only in rate, duration or measured requests)\n",
                 grouped, runners.size(), count_of(groups, "warm-up").c_str());
  }
  for (const std::vector<size_t>& batch : batches) {
    const size_t i      = batch.front();
    const SweepPoint& p = plan.points[i];
    ChildTask task;
    if (batch.size() == 1) {
      task = {[&, i] {
                if (fit_failed(i))
                  return false;
                cache.preload();
                make_tmp(i);
                return true;
              },
              run_argv(self, p, tmp_of(i).string(), model_of(p), cache.dir),
              (tmp_of(i) / "run.log").string(),
              [&, i](const ChildExit& e) {
                if (!interrupted(e.code))
                  cpu_total += e.cpu_s;
                finish_point(i, e, Json());
              },
              {}};
    } else {
      // The group's files beside its first point's: what to run, how each ended, the warm-up's log.
      const fs::path base = tmp_of(i).parent_path() / (".tmp." + p.name + ".warmup" + owner_suffix());
      const fs::path spec = base.string() + ".json", status = base.string() + ".status.json",
                     log = base.string() + ".log";
      auto remove_group  = [spec, status, log] {
        std::error_code ec;
        for (const fs::path& f : {spec, status, log})
          fs::remove(f, ec);
      };
      std::vector<std::string> argv = {self, "run", p.config, "--measured-phases", spec.string(), "-q"};
      if (!cache.dir.empty())
        argv.insert(argv.end(), {"--routing-cache", cache.dir});
      task = {[&, batch, spec, status, log] {
                if (fit_failed(batch.front())) {
                  for (size_t k = 1; k < batch.size(); ++k)
                    fit_failed(batch[k]);
                  return false;
                }
                cache.preload();
                Json members = Json::array();
                for (size_t k : batch) {
                  make_tmp(k);
                  Json sets = Json::array();
                  for (const auto& [key, v] : plan.points[k].overrides)
                    sets.push_back(key + "=" + v);
                  if (const std::string m = model_of(plan.points[k]); !m.empty())
                    sets.push_back(std::string(fit_of(plan.points[k]).file_key) + "=" + m);
                  members.push_back(
                      {{"set", sets}, {"out", tmp_of(k).string()}, {"log", (tmp_of(k) / "run.log").string()}});
                }
                write_file_atomically(
                    spec.string(),
                    Json{{"log", log.string()}, {"status", status.string()}, {"members", members}}.dump(2) + "\n");
                return true;
              },
              argv,
              log.string(),
              [&, batch, status, log, remove_group](const ChildExit& e) {
                Json st;
                try {
                  st = fs::exists(status) ? load_json_file(status.string()) : Json();
                } catch (const InputError&) {
                }
                const Json* members = st.is_object() && st.contains("members") ? &st["members"] : nullptr;
                if (!interrupted(e.code))
                  cpu_total += e.cpu_s;
                const Json shared = {{"points", batch.size()},
                                     {"first", point_label(plan.points[batch.front()])},
                                     {"warmup_cpu_s", st.is_object() ? st.value("warmup_cpu_s", 0.0) : 0.0}};
                for (size_t k = 0; k < batch.size(); ++k) {
                  ChildExit ek = e;  // a member the group never reached ends as the group did
                  if (members && k < members->size()) {
                    const Json& m = (*members)[k];
                    ek = {m.value("exit_code", 1), m.value("signal", 0), m.value("cpu_s", 0.0), m.value("wall_s", 0.0)};
                  } else {
                    if (ek.code == 0)
                      ek.code = 1;
                    std::error_code ec;
                    fs::copy_file(log, tmp_of(batch[k]) / "run.log", fs::copy_options::overwrite_existing, ec);
                  }
                  finish_point(batch[k], ek, shared);
                }
                remove_group();
              },
              {}};
    }
    if (auto f = fit_task.find(shared_key(p)); fit && !p.fit.empty() && f != fit_task.end())
      task.after.push_back(f->second);
    tasks.push_back(std::move(task));
  }
  if (int sig = run_tasks(std::move(tasks), jobs))
    throw Interrupted{sig};
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!quiet)
    std::fprintf(stderr, "sweep: ran %s in %.1f s wall, %.1f s CPU (%.2f s per point), %d at a time%s\n",
                 count_of(runners.size(), "point").c_str(), wall, cpu_total, cpu_total / double(runners.size()), jobs,
                 shared + taken > 0 ? ("; " + count_of(shared + taken, "point") + " took a twin's results").c_str()
                                    : "");
  return failures;
}

}  // namespace eldr::app
