#include "sim/common/output_lock.hpp"
#include "sim/common/input_error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace eldr {

namespace fs = std::filesystem;

std::string output_lock_file(const std::string& output)
{
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(output), ec).lexically_normal();
  if (!p.has_filename())
    p = p.parent_path();  // "out/" -> "out"
  return (p.parent_path() / ("." + p.filename().string() + ".lock")).string();
}

namespace {

std::string read_holder(int fd)
{
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? size_t(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0'))
    s.pop_back();
  return s;
}

// "pid@host command" -> "command (pid N on HOST)".
std::string describe_holder(const std::string& text)
{
  const auto at = text.find('@'), space = text.find(' ');
  if (text.empty() || at == std::string::npos || space == std::string::npos || at > space)
    return "another process";
  return text.substr(space + 1) + " (pid " + text.substr(0, at) + " on " + text.substr(at + 1, space - at - 1) + ")";
}

// "eldrsim run": the program's name and its first argument.
std::string g_this_command;  // set_this_command

std::string this_command()
{
  if (!g_this_command.empty())
    return g_this_command;
  std::string args;
  if (FILE* f = std::fopen("/proc/self/cmdline", "rb")) {
    char buf[1024];
    args.assign(buf, std::fread(buf, 1, sizeof buf, f));
    std::fclose(f);
  }
  const auto end0 = args.find('\0');
  if (end0 == std::string::npos)
    return "eldrsim";
  const auto end1 = args.find('\0', end0 + 1);
  return fs::path(args.substr(0, end0)).filename().string() + " " +
         args.substr(end0 + 1, end1 == std::string::npos ? std::string::npos : end1 - end0 - 1);
}

}  // namespace

OutputLock::OutputLock(const std::string& output, const std::string& option, const std::string& command, Mode mode)
    : file_(output_lock_file(output)), exclusive_(mode == Mode::exclusive)
{
  // An exclusive holder removes the file when it ends: a process that opened it before then holds a
  // lock on a file no longer there, so the lock counts only when the path still names what was locked.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return;  // nowhere to lock (a read-only parent): the output's own checks say what is wrong
    if (::flock(fd, (exclusive_ ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) {  // a file system without locks: written unlocked
        ::close(fd);
        return;
      }
      // Held. By cooperating writers when a shared lock is free, else by the one writer it names.
      std::string who;
      if (::flock(fd, LOCK_SH | LOCK_NB) == 0)
        who = "the tasks of an `eldrsim sweep` job array (--point)";
      else
        who = describe_holder(read_holder(fd));
      ::close(fd);
      throw InputError(output, option, "being written by " + who + ": wait for it to end, or write somewhere else");
    }
    struct stat held {
    }, named{};
    if (::fstat(fd, &held) == 0 && ::stat(file_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      fd_ = fd;
      break;
    }
    ::close(fd);  // removed or replaced meanwhile: lock the file that is there now
  }
  if (fd_ >= 0 && exclusive_) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string text =
        std::to_string(::getpid()) + "@" + host + " " + (command.empty() ? this_command() : command) + "\n";
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, text.data(), text.size(), 0) < 0) {
      // The holder's name is only for messages: the lock holds without it.
    }
  }
}

void OutputLock::release()
{
  if (fd_ < 0)
    return;
  if (exclusive_)
    ::unlink(file_.c_str());  // still held: nobody takes the old file meanwhile
  ::close(fd_);
  fd_ = -1;
}

OutputLock::~OutputLock()
{
  release();
}

void set_this_command(const std::string& command)
{
  g_this_command = command;
}

}  // namespace eldr
