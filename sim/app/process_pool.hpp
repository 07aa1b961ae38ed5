#pragma once
// Runs child processes (argv lists) N at a time: fork/exec with output to a log file, each child
// killed if this process dies (PR_SET_PDEATHSIG), completions reported in order of finishing.
#include <functional>
#include <string>
#include <vector>

namespace eldr::app {

struct ChildTask {
  std::vector<std::string> argv;
  std::string log;  // stdout and stderr of the child
  // Exit code (or 128 + signal), the child's CPU time (user + system) and wall time, in seconds.
  std::function<void(int exit_code, double cpu_s, double wall_s)> done;
};

// Runs `tasks` with at most `jobs` at once; returns when all are done.
void run_tasks(std::vector<ChildTask> tasks, int jobs);

// This executable's path (/proc/self/exe).
std::string self_executable();

}  // namespace eldr::app
