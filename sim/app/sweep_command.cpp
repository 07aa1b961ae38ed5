// eldrsim sweep: a grid of experiments, each point its own `eldrsim run` process (SimGrid allows one
// engine per process), N at a time, resumable, with a combined CSV; or a Slurm job array doing the same.
#include "sim/app/commands.hpp"
#include "sim/app/process_pool.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/csv.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/output_lock.hpp"
#include "sim/common/output_place.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/experiments/sample_stats.hpp"
#include "sim/experiments/sweep_plan.hpp"
#include "sim/metrics/result_check.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "sim/routing/router_fit.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <unistd.h>

namespace eldr::app {

namespace fs = std::filesystem;

namespace {

struct SweepCli {
  std::string file;
  std::string out;
  int jobs  = 0;
  int seeds = 0;
  std::vector<std::string> sets;
  bool quiet  = false;
  bool list   = false;
  bool merge  = false;
  bool no_fit = false;
  bool report = false;  // then eldrsim report OUT
  long point  = -1;
  std::string emit_slurm;
  std::string slurm_options;
};

std::string out_dir(const SweepCli& o)
{
  return o.out.empty() ? "results/" + fs::path(o.file).stem().string() : o.out;
}

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
bool point_done(const std::string& out, const SweepPoint& p, std::string* why = nullptr)
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

// The generated routing sources the points build, shared through files for the length of one sweep
// (GeneratedGating: a source is loaded only for exactly the same inputs, so results do not change):
// most points of a grid have the same model, workload and seed, and building the palettes is a fixed
// ~6% of a point. Removed when the sweep ends; a killed sweep's by the next (remove_stale_temporaries).
struct RoutingCache {
  std::string dir;
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

fs::path aside(const fs::path& final_dir)
{
  return final_dir.parent_path() / (".old." + final_dir.filename().string() + owner_suffix());
}

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

void end_progress_line()
{
  if (g_progress_open)
    std::fputc('\n', stderr);
  g_progress_open = false;
}

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

// Thrown when Ctrl-C stopped the points (their temporaries are gone); sweep() reports it.
struct Interrupted {
  int signal;
};
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
      tasks.push_back({nullptr, fit_argv(self, p, file, cache.dir), log, [&, key, log, label](const ChildExit& e) {
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
    auto prepare = [tmp, out] {
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
  if (plan.seeds <= 1)  // another sweep's into this OUT: not these points' intervals
    fs::remove(fs::path(out) / "combined_seeds.csv", ec);
  if (plan.seeds > 1) {
    std::string s = param_header(plan, false) + ",seeds";
    for (const auto& m : kMetrics)
      s += std::string(",") + m.column + "_mean," + m.column + "_ci95_lo," + m.column + "_ci95_hi";
    s += "\n";
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
    write_file_atomically((fs::path(out) / "combined_seeds.csv").string(), s);
  }
  if (!quiet)
    std::fprintf(
        stderr, "sweep: %s -> %s%s%s\n", count_of(plan.points.size() - missing, "point").c_str(),
        (fs::path(out) / "combined.csv").c_str(), plan.seeds > 1 ? " and combined_seeds.csv" : "",
        missing ? (" (" + count_of(missing, "point") + (missing == 1 ? " has" : " have") + " no results yet)").c_str()
                : "");
  return missing;
}

std::string shell_quote(const std::string& s)
{
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The sweep's own command line for the cluster (absolute paths; cwd is the submit directory).
std::string sweep_command_line(const SweepCli& o, const std::string& out)
{
  std::string c = shell_quote(self_executable()) + " sweep " + shell_quote(fs::absolute(o.file).string()) + " --out " +
                  shell_quote(fs::absolute(out).string());
  if (o.seeds > 0)
    c += " --seeds " + std::to_string(o.seeds);
  for (const auto& s : o.sets)
    c += " --set " + shell_quote(s);
  if (o.no_fit)
    c += " --no-fit";
  return c;
}

int emit_slurm(const SweepCli& o, const SweepPlan& plan, const std::string& out)
{
  fs::path dir = fs::absolute(o.emit_slurm);
  fs::create_directories(dir / "logs");
  std::string cwd  = fs::current_path().string();
  std::string cmd  = sweep_command_line(o, out);
  std::string head = "#!/bin/bash\n# Written by `eldrsim sweep " + o.file + " --emit-slurm " + o.emit_slurm +
                     "`: submit with " + (dir / "submit.sh").string() + ".\n";
  std::string extra;
  for (size_t b = 0, e; b < o.slurm_options.size(); b = e + 1) {
    e = o.slurm_options.find(';', b);
    if (e == std::string::npos)
      e = o.slurm_options.size();
    if (e > b)
      extra += "#SBATCH " + o.slurm_options.substr(b, e - b) + "\n";
  }
  std::string array = head + "#SBATCH --job-name=eldrsim-" + fs::path(o.file).stem().string() + "\n#SBATCH --array=0-" +
                      std::to_string(plan.points.size() - 1) +
                      "\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n#SBATCH --output=" + (dir / "logs").string() +
                      "/point-%a.out\n" + extra + "set -eu\ncd " + shell_quote(cwd) +
                      "\n# One point per array task: " + std::to_string(plan.points.size()) +
                      " points, written atomically under " + fs::absolute(out).string() + "\nexec " + cmd +
                      " --point \"$SLURM_ARRAY_TASK_ID\" -q\n";
  std::string merge_script = head + "#SBATCH --job-name=eldrsim-" + fs::path(o.file).stem().string() +
                             "-merge\n#SBATCH --ntasks=1\n#SBATCH --output=" + (dir / "logs").string() +
                             "/merge.out\n" + extra + "set -eu\ncd " + shell_quote(cwd) +
                             "\n# After the array: runs any point that failed or is missing, then the combined CSV.\n"
                             "exec " +
                             cmd + " -j 1\n";
  std::string submit =
      "#!/bin/bash\n# Submits the point array, then the merge step once every point has ended.\nset -eu\n"
      "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
      "array=$(sbatch --parsable \"$here/points.sbatch\")\narray=${array%%;*}\n"
      "merge=$(sbatch --parsable --dependency=afterany:$array \"$here/merge.sbatch\")\nmerge=${merge%%;*}\n"
      "echo \"array job $array, merge job $merge\"\n";
  write_file_atomically((dir / "points.sbatch").string(), array);
  write_file_atomically((dir / "merge.sbatch").string(), merge_script);
  write_file_atomically((dir / "submit.sh").string(), submit);
  for (const char* f : {"points.sbatch", "merge.sbatch", "submit.sh"})
    fs::permissions(dir / f, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
  std::printf("%s: %zu-task job array (points.sbatch), merge step (merge.sbatch), submit with %s\n", dir.c_str(),
              plan.points.size(), (dir / "submit.sh").c_str());
  return 0;
}

int sweep(const SweepCli& o)
{
  install_interrupt_handler();  // until run_tasks takes the signals: one line, exit 128 + the signal
  if (o.report && !o.emit_slurm.empty())
    throw InputError("--report", "", "not with --emit-slurm: run `eldrsim report OUT` after the merge step");
  SweepOptions so;
  so.seeds        = o.seeds;
  so.sets         = parse_sets(o.sets);
  std::string out = out_dir(o);
  if (!o.quiet && !o.list) {
    // The plan at once (checking every point's config can take a while on a large grid).
    SweepOptions quick     = so;
    quick.validate_points  = false;
    const SweepPlan sketch = load_sweep(o.file, quick);
    std::fprintf(stderr, "sweep: %s: %s -> %s; checking their configs\n", o.file.c_str(),
                 count_of(sketch.points.size(), "point").c_str(), (o.emit_slurm.empty() ? out : o.emit_slurm).c_str());
  }
  SweepPlan plan = load_sweep(o.file, so);
  if (o.list) {
    for (size_t i = 0; i < plan.points.size(); ++i)
      std::printf("%zu %s/%s%s\n", i, plan.points[i].sweep.c_str(), plan.points[i].name.c_str(),
                  point_done(out, plan.points[i]) ? " (done)" : "");
    return 0;
  }
  if (!o.emit_slurm.empty()) {
    ensure_writable_directory(o.emit_slurm);
    return emit_slurm(o, plan, out);
  }
  check_outputs(plan, out, o.report);
  ensure_writable_directory(out);
  // One sweep writes OUT at a time; the tasks of a Slurm array (--point) and merges share it.
  OutputLock lock(out, "--out", "eldrsim sweep",
                  o.point >= 0 || o.merge ? OutputLock::Mode::shared : OutputLock::Mode::exclusive);
  if (o.merge) {
    const size_t missing = merge(plan, out, o.quiet);
    if (missing == 0 && o.report) {
      lock.release();
      exec_analysis_script(project_root(out), "report.py", {out});
    }
    return missing == 0 ? 0 : 1;
  }
  int jobs = o.jobs > 0 ? o.jobs : usable_cpus();
  if (o.point >= 0) {
    if (size_t(o.point) >= plan.points.size())
      throw InputError("--point", "",
                       std::to_string(o.point) + " is past the last point (" + std::to_string(plan.points.size() - 1) +
                           ")");
  }
  std::vector<size_t> which;
  if (o.point >= 0)
    which.push_back(size_t(o.point));
  for (size_t i = 0; o.point < 0 && i < plan.points.size(); ++i)
    which.push_back(i);
  // Outside run_tasks (which takes the signals itself) the handler says this: points are published
  // whole, so whatever finished is kept.
  const InterruptNote note(out + ": finished points kept (the same command resumes)");
  size_t failures = 0;
  try {
    failures = run_points(plan, which, out, o.point >= 0 ? 1 : jobs, !o.no_fit, o.quiet);
  } catch (const Interrupted& i) {
    size_t done = 0;
    for (size_t k : which)
      done += point_done(out, plan.points[k]);
    end_progress_line();
    std::fprintf(stderr,
                 "eldrsim: error: interrupted by %s: %s: %zu of %zu points done, kept (the same command resumes)\n",
                 signal_name(i.signal).c_str(), out.c_str(), done, which.size());
    return 128 + i.signal;
  } catch (...) {
    end_progress_line();  // main prints the error on a line of its own
    throw;
  }
  if (o.point >= 0)
    return failures == 0 ? 0 : 1;
  size_t missing = merge(plan, out, o.quiet);
  if (failures > 0)  // even when quiet: errors never are
    std::fprintf(stderr, "sweep: %s failed (logs: <point>.failed.log beside their directories)%s\n",
                 count_of(failures, "point").c_str(),
                 o.report ? "; no report written (fix them and rerun; `eldrsim report OUT` reports what finished)"
                          : "");
  if (failures == 0 && missing == 0 && o.report) {
    lock.release();
    exec_analysis_script(project_root(out), "report.py", {out});  // its exit status is the command's
  }
  return failures == 0 && missing == 0 ? 0 : 1;
}

}  // namespace

Command add_sweep_command(CLI::App& app)
{
  auto o    = std::make_shared<SweepCli>();
  auto* sub = app.add_subcommand(
      "sweep", "Run a grid of experiments (a sweep file, docs/experiments.md), each point in its own process, N at a "
               "time; resumable; writes OUT/combined.csv");
  sub->add_option("sweep", o->file, "Sweep file (JSON), e.g. configs/paper/all.json")->required();
  sub->add_option("--out,-o", o->out, "Results directory (default results/<sweep file stem>)");
  sub->add_option("-j,--jobs", o->jobs, "Points run at once (default: the CPUs this process may use)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seeds", o->seeds, "Run every point with seeds 1..N; combined_seeds.csv has mean and 95% interval")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--set", o->sets,
                  "Override a config key in every point, KEY=VALUE (repeatable; the sweep file's own "
                  "set and grid win)")
      ->allow_extra_args(false);
  sub->add_flag("--list", o->list, "List the points (index, directory) and whether they are done; run nothing");
  sub->add_flag("--merge", o->merge, "Only write combined.csv from the results present (exit 1 if some are missing)");
  sub->add_option("--point", o->point, "Run only the point with this index (as a Slurm array task does)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--report", o->report,
                "Once every point is done, write the report (eldrsim report OUT: OUT/report/report.md and .html)")
      ->excludes(sub->get_option("--list"))
      ->excludes(sub->get_option("--point"));
  sub->add_flag("--no-fit", o->no_fit,
                "Do not share routers' offline fits between points: every point fits on its own");
  sub->add_option(
      "--emit-slurm", o->emit_slurm,
      "Write a Slurm job array (points.sbatch), a merge step (merge.sbatch) and submit.sh into DIR; run nothing");
  sub->add_option("--slurm-options", o->slurm_options,
                  "Extra #SBATCH lines for --emit-slurm, separated by ';', e.g. '--partition=cpu;--time=00:10:00'");
  sub->add_flag("--quiet,-q", o->quiet, "No progress lines (failures are still printed)");
  return {sub, [o] { return sweep(*o); }};
}

}  // namespace eldr::app
