#pragma once
// Runs child processes (argv lists) N at a time: fork/exec with output to a log file, each child
// killed if this process dies (PR_SET_PDEATHSIG), completions reported in order of finishing.
#include <functional>
#include <string>
#include <vector>

namespace eldr::app {

struct ChildTask {
  std::function<void()> prepare;  // runs just before the child starts (makes its directory, say)
  std::vector<std::string> argv;
  std::string log;  // stdout and stderr of the child
  // Exit code (or 128 + signal), the child's CPU time (user + system) and wall time, in seconds.
  std::function<void(int exit_code, double cpu_s, double wall_s)> done;
};

// Runs `tasks` with at most `jobs` at once; returns when all are done. On SIGINT, SIGTERM or SIGHUP
// it starts no more tasks, passes the signal to the running ones, waits for them (their `done` sees
// 130 or so) and returns false; the signals are held while it runs. True when every task ran.
bool run_tasks(std::vector<ChildTask> tasks, int jobs);

// Points (or processes) that may run at once: the CPUs this process may use (its affinity mask,
// and a cgroup v2 cpu.max quota), at least 1.
int usable_cpus();

// This executable's path (/proc/self/exe).
std::string self_executable();

}  // namespace eldr::app
