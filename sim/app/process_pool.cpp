#include "sim/app/process_pool.hpp"
#include "sim/common/output_lock.hpp"
#include "sim/common/result_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <sched.h>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace eldr::app {

std::string self_executable()
{
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("eldrsim") : p.string();
}

namespace {
EntryPoint g_entry = nullptr;
}

void set_entry_point(EntryPoint entry)
{
  g_entry = entry;
}

// In a forked child that runs the command in this image: what exec would have reset. The
// interrupt signals back to their defaults (the command installs its own handler) and this
// process's interrupt note dropped (its temporaries are the parent's), the command named after
// the child's arguments (lock files say who holds them; ps shows it as the process's name, its
// command line staying the parent's).
[[noreturn]] static void run_in_image(std::vector<char*>& argv)
{
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::signal(sig, SIG_DFL);
  forget_interrupt_note();
  const std::string command =
      std::filesystem::path(argv[0]).filename().string() + (argv[1] ? std::string(" ") + argv[1] : "");
  set_this_command(command);
  ::prctl(PR_SET_NAME, command.c_str());  // what ps -o comm and top show (15 characters)
  const int code = g_entry(int(argv.size() - 1), argv.data());
  std::fflush(nullptr);
  ::_exit(code);  // the parent's atexit handlers and static objects are not this child's to run
}

static sigset_t pool_signals()
{
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP})
    sigaddset(&s, sig);
  return s;
}

static pid_t spawn(const ChildTask& t, pid_t parent, const sigset_t& child_mask)
{
  std::vector<char*> argv;
  for (const auto& a : t.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const bool in_image = g_entry != nullptr && !t.argv.empty() && t.argv[0] == self_executable();
  std::fflush(nullptr);  // nothing buffered here is written twice, once by the child
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);  // the child's signals as they were before run_tasks
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);
    int fd = ::open(t.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) {
      ::dup2(null, 0);
      ::close(null);
    }
    if (in_image)
      run_in_image(argv);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "exec %s failed: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

// The first queued task whose `after` tasks have all ended; queue.end() when none may start yet.
static std::deque<size_t>::iterator next_ready(std::deque<size_t>& queue, const std::vector<ChildTask>& tasks,
                                               const std::vector<bool>& ended)
{
  return std::find_if(queue.begin(), queue.end(), [&](size_t i) {
    return std::all_of(tasks[i].after.begin(), tasks[i].after.end(), [&](size_t a) { return ended.at(a); });
  });
}

int run_tasks(std::vector<ChildTask> tasks, int jobs)
{
  if (jobs < 1)
    jobs = 1;
  const pid_t self = ::getpid();
  std::deque<size_t> queue;
  for (size_t i = 0; i < tasks.size(); ++i)
    queue.push_back(i);
  std::vector<bool> ended(tasks.size(), false);
  // The signals are taken synchronously (sigwaitinfo): no race between a child ending, Ctrl-C and
  // the wait. SIGCHLD is not ignored by default, so it stays pending while blocked.
  const sigset_t wanted = pool_signals();
  ::signal(SIGCHLD, SIG_DFL);  // an ignored SIGCHLD (inherited) would reap the children behind our back
  sigset_t before;
  ::sigprocmask(SIG_BLOCK, &wanted, &before);
  int interrupted = 0;  // the signal that stopped the pool
  std::map<pid_t, std::pair<size_t, std::chrono::steady_clock::time_point>> running;
  try {
    while ((!queue.empty() && !interrupted) || !running.empty()) {
      while (!interrupted && int(running.size()) < jobs) {
        auto next = next_ready(queue, tasks, ended);
        if (next == queue.end())
          break;
        size_t i = *next;
        queue.erase(next);
        if (tasks[i].prepare && !tasks[i].prepare()) {
          ended[i] = true;
          continue;
        }
        running[spawn(tasks[i], self, before)] = {i, std::chrono::steady_clock::now()};
      }
      if (running.empty() && !queue.empty() && !interrupted && next_ready(queue, tasks, ended) == queue.end())
        throw std::logic_error("run_tasks: a task comes after one that never ends");
      // Reap whoever has ended; wait for a signal when nobody has.
      int status = 0;
      rusage ru{};
      pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
      if (pid < 0 && errno != ECHILD && errno != EINTR)
        throw std::runtime_error(std::string("wait4 failed: ") + std::strerror(errno));
      if (pid <= 0) {
        if (running.empty())
          continue;
        siginfo_t info{};
        int sig = ::sigwaitinfo(&wanted, &info);
        if (sig > 0 && sig != SIGCHLD && !interrupted) {
          interrupted = sig;
          for (const auto& [child, task] : running)
            ::kill(child, SIGINT);
        }
        continue;
      }
      auto it = running.find(pid);
      if (it == running.end())
        continue;
      auto [i, start] = it->second;
      running.erase(it);
      ChildExit e;
      e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      e.code   = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + e.signal;
      e.cpu_s =
          double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
      e.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ended[i] = true;
      if (tasks[i].done)
        tasks[i].done(e);
    }
  } catch (...) {
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    throw;
  }
  // Drop the SIGCHLDs still pending, then restore the mask.
  timespec zero{};
  const sigset_t chld = [] {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGCHLD);
    return s;
  }();
  while (::sigtimedwait(&chld, nullptr, &zero) > 0) {
  }
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  return interrupted;
}

int usable_cpus()
{
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : int(std::thread::hardware_concurrency());
  // CPU quotas of this process's cgroup and those above it: v2 ("0::/PATH" in /proc/self/cgroup,
  // cpu.max "QUOTA PERIOD" or "max PERIOD") and v1 ("N:cpu,cpuacct:/PATH", cpu.cfs_quota_us, -1: none).
  auto limit = [&n](const std::string& quota_text, long period) {
    const long q = std::atol(quota_text.c_str());
    if (quota_text != "max" && q > 0 && period > 0)
      n = std::min(n, int(std::max(1L, (q + period - 1) / period)));
  };
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const bool v2 = controllers == ",,", v1 = controllers.find(",cpu,") != std::string::npos;
    if (!v1 && !v2)
      continue;
    for (std::filesystem::path g = line.substr(b + 1);; g = g.parent_path()) {
      const std::filesystem::path dir =
          std::filesystem::path(v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu") / g.relative_path();
      std::string quota;
      long period = 0;
      if (v2) {
        std::ifstream in(dir / "cpu.max");
        if (in >> quota >> period)
          limit(quota, period);
      } else {
        std::ifstream q(dir / "cpu.cfs_quota_us"), p(dir / "cpu.cfs_period_us");
        if (q >> quota && p >> period)
          limit(quota, period);
      }
      if (g.empty() || g == g.root_path())
        break;
    }
  }
  return std::max(1, n);
}

}  // namespace eldr::app
