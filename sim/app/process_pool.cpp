#include "sim/app/process_pool.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <chrono>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace eldr::app {

std::string self_executable()
{
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("eldrsim") : p.string();
}

static pid_t spawn(const ChildTask& t, pid_t parent)
{
  std::vector<char*> argv;
  for (const auto& a : t.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
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
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "exec %s failed: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

void run_tasks(std::vector<ChildTask> tasks, int jobs)
{
  if (jobs < 1)
    jobs = 1;
  const pid_t self = ::getpid();
  std::deque<size_t> queue;
  for (size_t i = 0; i < tasks.size(); ++i)
    queue.push_back(i);
  std::map<pid_t, std::pair<size_t, std::chrono::steady_clock::time_point>> running;
  while (!queue.empty() || !running.empty()) {
    while (!queue.empty() && int(running.size()) < jobs) {
      size_t i = queue.front();
      queue.pop_front();
      running[spawn(tasks[i], self)] = {i, std::chrono::steady_clock::now()};
    }
    int status = 0;
    rusage ru{};
    pid_t pid = ::wait4(-1, &status, 0, &ru);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      throw std::runtime_error(std::string("wait4 failed: ") + std::strerror(errno));
    }
    auto it = running.find(pid);
    if (it == running.end())
      continue;
    auto [i, start] = it->second;
    running.erase(it);
    int code    = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    double cpu  = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (tasks[i].done)
      tasks[i].done(code, cpu, wall);
  }
}

}  // namespace eldr::app
