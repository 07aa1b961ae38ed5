#pragma once
// Runs child processes (argv lists) N at a time: fork/exec with output to a log file, each child
// killed if this process dies (PR_SET_PDEATHSIG), completions reported in order of finishing. With an
// entry point set (main sets its own), a child whose argv[0] is this executable runs the command in
// the forked image instead of exec'ing a fresh one: no loading, linking and start-up per child.
#include <functional>
#include <string>
#include <vector>

namespace eldr::app {

// How a child ended.
struct ChildExit {
  int code     = 0;              // its exit status, or 128 + the signal that killed it
  int signal   = 0;              // the signal that killed it (WTERMSIG), 0 when it exited
  double cpu_s = 0, wall_s = 0;  // its CPU time (user + system) and wall time
};

struct ChildTask {
  // Runs just before the child starts (makes its directory, say); false: the task ends there, with
  // no child and no `done` (a point whose fit failed).
  std::function<bool()> prepare;
  std::vector<std::string> argv;
  std::string log;  // stdout and stderr of the child
  std::function<void(const ChildExit&)> done;
  std::vector<size_t> after;  // tasks (indices into the same list) that must have ended before it starts
};

// Runs `tasks` with at most `jobs` at once, each as soon as a slot is free and the tasks it comes
// `after` have ended (the first such in the list); returns when all are done. On SIGINT, SIGTERM or SIGHUP
// it starts no more tasks, passes SIGINT to the running ones, waits for them (their `done` sees 130
// or so) and returns that signal's number; the signals are held while it runs. 0 when every task ran.
int run_tasks(std::vector<ChildTask> tasks, int jobs);

// Points (or processes) that may run at once: the CPUs this process may use (its affinity mask,
// and a cgroup v2 cpu.max quota), at least 1.
int usable_cpus();

// This executable's path (/proc/self/exe).
std::string self_executable();

// The command line's entry point (main's body, which parses argv and runs the command). Children
// whose argv[0] is self_executable() call it after fork and exit with what it returns.
using EntryPoint = int (*)(int argc, char** argv);
void set_entry_point(EntryPoint entry);

}  // namespace eldr::app
