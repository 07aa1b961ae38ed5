#include "sim/app/commands.hpp"
#include "sim/cluster/sim_log.hpp"
#include "sim/cluster/simulation.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/metrics/invariants.hpp"
#include "sim/metrics/result_writer.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "sim/workload/measured_phase.hpp"
#include "sim/workload/workload_factory.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace eldr::app {

namespace {

struct RunOptions {
  std::string config;
  std::string router;
  std::string scheduler;  // an llm-d EndpointPickerConfig: router composed, composed.scheduler
  double rate   = 0;
  long requests = 0;
  long seed     = -1;
  std::string out;
  std::vector<std::string> sets;
  bool quiet     = false;
  bool steps     = false;
  bool decisions = false;
  std::string routing_cache;
  std::vector<std::string> log;  // SimGrid's --log and --cfg, passed on (sim_log.hpp)
  std::vector<std::string> cfg;
  std::string measured_phases;  // a sweep's group of runs that share their warm-up (run_measured_phases)
};

std::vector<OptionOverride> collect_overrides(const RunOptions& o)
{
  std::vector<OptionOverride> v;
  if (!o.scheduler.empty()) {
    // Relative to where the command runs, like the config's own path.
    v.push_back({"--scheduler", {"router", Json("composed").dump()}});
    const std::string file = std::filesystem::absolute(o.scheduler).string();
    v.push_back({"--scheduler", {"composed.scheduler", Json(file).dump()}});
    // llm-d runs a P/D file's prefill profile too.
    if (has_prefill_profile(file))
      v.push_back({"--scheduler", {"prefill_router.scheduler", Json(file).dump()}});
  }
  if (!o.router.empty())
    v.push_back({"--router", {"router", Json(o.router).dump()}});
  if (o.rate > 0)
    v.push_back({"--rate", {"workload.rate_rps", Json(o.rate).dump()}});
  if (o.requests > 0)
    v.push_back({"--requests", {"workload.measured_requests", Json(o.requests).dump()}});
  if (o.seed >= 0)
    v.push_back({"--seed", {"seed", Json(o.seed).dump()}});
  if (o.steps)
    v.push_back({"--steps", {"output.steps_csv", "true"}});
  if (o.decisions)
    v.push_back({"--decisions", {"output.decision_log", "true"}});
  return option_overrides(o.sets, v);
}

// Checks a finished run, writes its results and prints its summary line; the exit status.
int finish_run(const RunOptions& o, const Experiment& x, const Workload& w, const RunRecorder& rec,
               StagedDirectory& staged, const std::string& out)
{
  if (auto broken = check_run_invariants(x, w, rec, rec.stopped_at_horizon)) {
    std::fprintf(stderr, "eldrsim: internal error: invariant violated: %s (no results written)\n", broken->c_str());
    return 1;
  }
  write_staged(staged.staging(), out, [&] { write_results(staged.staging(), x, w, rec); });
  staged.commit();
  RunSummary s = summarize_run(x, w, rec);
  if (!o.quiet && s.tpot_ms.count == 0)
    std::printf("%s: no measured request finished (%ld unfinished): no TPOT or TTFT -> %s\n", x.router.c_str(),
                s.unfinished, out.c_str());
  else if (!o.quiet)
    std::printf(
        "%s: TPOT p50 %.2f ms p99 %.2f ms, TTFT p50 %.1f ms, %.1f distinct experts/layer, %ld unfinished -> %s\n",
        x.router.c_str(), s.tpot_ms.p50, s.tpot_ms.p99, s.ttft_ms.p50, s.distinct_experts_per_layer_mean, s.unfinished,
        out.c_str());
  return s.unfinished == 0 ? 0 : 3;
}

// Before any work: the interrupt handler, and the SimGrid settings (SimGrid would abort on some of
// them, and only once the simulation starts).
void start_run(const RunOptions& o)
{
  install_interrupt_handler();
  for (const std::string& s : o.log)
    check_log_setting(s);
  for (const std::string& s : o.cfg)
    check_cfg_setting(s);
}

int run(const RunOptions& o)
{
  start_run(o);
  Experiment x    = load_with_options(o.config, collect_overrides(o));
  std::string out = o.out;
  if (out.empty())
    out = "results/" + std::filesystem::path(o.config).stem().string() + "-" + x.router;
  // The output is checked (and its staging directory made) before simulating; results appear whole.
  check_output_apart(out, "--out", experiment_inputs(x));
  StagedDirectory staged(out);
  Workload w   = make_workload(x);
  auto routing = make_gating_source(x, w, o.routing_cache);
  set_gate_cache_dir(o.routing_cache);  // the gate variants' values, kept beside the sources
  long measured = 0;
  for (const Request& r : w.requests)
    measured += r.measured;
  if (!o.quiet)
    std::fprintf(stderr,
                 "eldrsim: %s, %s, %s, %d prefill + %d decode, %.0f req/s, %ld measured + %ld warm-up requests\n",
                 o.config.c_str(), x.model.name.c_str(), x.router.c_str(), x.topology.prefill.instances,
                 x.topology.decode.instances, x.workload.rate_rps, measured, long(w.requests.size()) - measured);
  // The progress line is rewritten in place: on a terminal only (a log would get it \r-joined).
  const bool progress = !o.quiet && ::isatty(2);
  RunRecorder rec     = [&] {
    try {
      return run_simulation(x, w, *routing, {.progress = progress, .log = o.log, .cfg = o.cfg});
    } catch (...) {
      if (progress)
        std::fputc('\n', stderr);  // the error goes on a line of its own, not onto the progress line
      throw;
    }
  }();
  return finish_run(o, x, w, rec, staged, out);
}

// One run of a group that shares its warm-up (--measured-phases).
struct MeasuredPhase {
  std::string out, log;
  Experiment x;
  Workload w;
};

// The child's own log (a sweep point's), headed by what the group printed before the fork.
void redirect_output(const std::string& group_log, const std::string& log)
{
  if (log.empty())
    return;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return;  // the group's log then gets it
  if (FILE* in = group_log.empty() ? nullptr : std::fopen(group_log.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, in)) > 0;)
      if (::write(fd, buf, n) < 0)
        break;
    std::fclose(in);
  }
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  ::close(fd);
}

double cpu_seconds(const struct rusage& ru)
{
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// --measured-phases FILE: the runs FILE lists, which differ only in their measured phase
// (sim/workload/measured_phase.hpp), share one warm-up. FILE: {"log": this process's own output,
// "status": where it records how each run ended, "members": [{"set": ["KEY=VALUE", ...] (after the
// command line's), "out", "log"}, ...]}, all of the command line's config. The warm-up runs with the
// longest member's workload; once it has drained, this process forks a child per member, one at a
// time, which takes its member's measured phase and goes on as that member's `run` (its exit status
// included). This process waits for each, passing an interrupt on, writes the status
// ({"warmup_cpu_s", "members": [{"exit_code", "signal", "cpu_s", "wall_s"}, ...]}: each child's own
// CPU, after the fork) and exits 0 (128 + N when interrupted by signal N).
int run_measured_phases(const RunOptions& o)
{
  start_run(o);
  const std::string& file = o.measured_phases;
  const Json spec         = load_json_file(file);
  auto text               = [&](const Json& j, const char* key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string())
      throw InputError(file, key, "missing, or not a string");
    return j[key].get<std::string>();
  };
  if (!spec.is_object() || !spec.contains("members") || !spec["members"].is_array() || spec["members"].empty())
    throw InputError(file, "members", "missing, or not a list of runs");
  const std::string group_log = text(spec, "log"), status_file = text(spec, "status");
  std::vector<MeasuredPhase> phases;
  for (const Json& m : spec["members"]) {
    MeasuredPhase p;
    p.out = text(m, "out");
    p.log = text(m, "log");
    if (!m.contains("set") || !m["set"].is_array())
      throw InputError(file, "set", "missing, or not a list of KEY=VALUE");
    RunOptions one = o;
    for (const Json& v : m["set"])
      one.sets.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    p.x = load_with_options(o.config, collect_overrides(one));
    check_output_apart(p.out, "--out", experiment_inputs(p.x));
    if (const std::string why = warmup_not_shareable(p.x); !why.empty())
      throw InputError(file, "members", p.out + ": its warm-up is its own: " + why);
    if (!phases.empty() && warmup_config(p.x) != warmup_config(phases[0].x)) {
      std::string keys;
      for (const char* k : kMeasuredPhaseKeys)
        keys += (keys.empty() ? "" : ", ") + std::string(k);
      throw InputError(file, "members",
                       p.out + ": differs from " + phases[0].out + " beyond the measured phase (" + keys + ")");
    }
    p.w = make_workload(p.x);
    phases.push_back(std::move(p));
  }
  size_t longest = 0;
  for (size_t k = 1; k < phases.size(); ++k)
    if (phases[k].w.requests.size() > phases[longest].w.requests.size())
      longest = k;
  Experiment x = phases[longest].x;
  Workload w   = phases[longest].w;
  for (const MeasuredPhase& p : phases)
    if (const std::string why = measured_phase_mismatch(w, p.w); !why.empty())
      throw std::logic_error("the workload of " + p.out +
                             " is not the longest run's with another measured phase: " + why);
  auto routing = make_gating_source(x, w, o.routing_cache);
  set_gate_cache_dir(o.routing_cache);

  size_t me         = phases.size();  // the member this process goes on as, after the fork
  auto fork_members = [&] {
    struct rusage self {};
    ::getrusage(RUSAGE_SELF, &self);
    Json status = {{"warmup_cpu_s", cpu_seconds(self)}, {"members", Json::array()}};
    ::signal(SIGCHLD, SIG_DFL);  // (an ignored SIGCHLD would reap the children before wait4)
    sigset_t held, before;
    sigemptyset(&held);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD})
      sigaddset(&held, sig);
    ::sigprocmask(SIG_BLOCK, &held, &before);
    std::fflush(nullptr);
    const pid_t leader = ::getpid();
    int stop           = 0;  // an interrupt this process passed on: no member starts after it
    for (size_t k = 0; k < phases.size() && stop == 0; ++k) {
      const auto start = std::chrono::steady_clock::now();
      const pid_t pid  = ::fork();
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // stopped if this process dies (or already has)
        if (::getppid() != leader)
          ::_exit(128 + SIGTERM);
        ::sigprocmask(SIG_SETMASK, &before, nullptr);
        redirect_output(group_log, phases[k].log);
        const MeasuredPhase& p             = phases[k];
        x.workload.rate_rps                = p.x.workload.rate_rps;
        x.workload.duration_s              = p.x.workload.duration_s;
        x.workload.measured_requests       = p.x.workload.measured_requests;
        x.workload.measured_requests_given = p.x.workload.measured_requests_given;
        x.resolved                         = p.x.resolved;
        take_measured_phase(w, p.w);
        me = k;
        return;
      }
      Json rec = {{"exit_code", 1}, {"signal", 0}, {"cpu_s", 0.0}, {"wall_s", 0.0}};
      if (pid > 0) {
        int st = 0;
        struct rusage ru {};
        for (;;) {
          siginfo_t info;
          const int sig = ::sigwaitinfo(&held, &info);
          if (sig == SIGCHLD || sig < 0) {
            if (::wait4(pid, &st, WNOHANG, &ru) == pid)
              break;
            continue;
          }
          stop = sig;  // an interrupt: the running member's too
          ::kill(pid, sig);
          ::wait4(pid, &st, 0, &ru);
          break;
        }
        rec["exit_code"] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        rec["signal"]    = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        rec["cpu_s"]     = cpu_seconds(ru);
        rec["wall_s"]    = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      status["members"].push_back(rec);
    }
    write_file_atomically(status_file, status.dump(2) + "\n");  // the runs that ended, however
    if (stop != 0)
      std::fprintf(stderr, "eldrsim: error: interrupted by %s: no run of the shared warm-up started after it\n",
                   signal_name(stop).c_str());
    std::fflush(nullptr);
    ::_exit(stop != 0 ? 128 + stop : 0);
  };
  RunRecorder rec = run_simulation(x, w, *routing, {.log = o.log, .cfg = o.cfg, .at_measured_start = fork_members});
  if (me == phases.size())
    throw std::logic_error("the warm-up ended without its measured phases");
  StagedDirectory staged(phases[me].out);
  return finish_run(o, x, w, rec, staged, phases[me].out);
}

}  // namespace

Command add_run_command(CLI::App& app)
{
  auto o    = std::make_shared<RunOptions>();
  auto* sub = app.add_subcommand("run", "Simulate one experiment and write summary.json and requests.csv");
  sub->add_option("config", o->config, "Experiment config (JSON), e.g. configs/default.json")->required();
  std::string routers;
  for (const auto& n : decode_router_names())
    routers += (routers.empty() ? "" : ", ") + n;
  sub->add_option("--router", o->router,
                  "Decode router: " + routers + " (`eldrsim routers --describe` says what each does)");
  sub->add_option("--scheduler", o->scheduler,
                  "An llm-d EndpointPickerConfig (YAML) whose decode profile routes decode (router composed with "
                  "composed.scheduler) and, in a P/D file, whose prefill profile routes prefill "
                  "(prefill_router.scheduler) (docs/routing-policies.md)");
  sub->add_option("--rate", o->rate, "Measured arrival rate, requests/s (workload.rate_rps)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--requests", o->requests, "Measured requests (workload.measured_requests)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--seed", o->seed, "Run seed")->check(CLI::NonNegativeNumber);
  sub->add_option("--out", o->out, "Output directory (default results/<config>-<router>)");
  sub->add_option("--set", o->sets,
                  "Override a config key by dotted path, KEY=VALUE (repeatable), "
                  "e.g. --set model=gpt-oss-120b --set workload.rate_rps=80")
      ->allow_extra_args(false);
  sub->add_flag("--steps", o->steps, "Also write steps.csv (one row per decode step)");
  sub->add_flag("--decisions", o->decisions,
                "Also write decisions.csv (one row per decode routing decision: loads seen, choice; "
                "for a router that scores the workers: the scores, the band it kept, the candidates)");
  sub->add_flag("--quiet,-q", o->quiet, "No progress or summary line");
  sub->add_option("--routing-cache", o->routing_cache,
                  "Directory where generated routing sources (and their gate values) are kept for other runs with the "
                  "same inputs (sweep "
                  "passes one to its points); results are the same with or without it");
  sub->add_option("--log", o->log,
                  "SimGrid log setting (repeatable), e.g. --log=eldr.thres:verbose: every step of each request "
                  "with its simulated time, on stderr (docs/watching-a-run.md); default: warnings only")
      ->allow_extra_args(false);
  sub->add_option("--cfg", o->cfg, "SimGrid config setting KEY:VALUE (repeatable), e.g. --cfg=network/model:CM02")
      ->allow_extra_args(false);
  sub->add_option("--measured-phases", o->measured_phases,
                  "A sweep's runs that share their warm-up (JSON; internal: see run_measured_phases)")
      ->group("");
  return {sub, [o] { return o->measured_phases.empty() ? run(*o) : run_measured_phases(*o); }};
}

}  // namespace eldr::app
