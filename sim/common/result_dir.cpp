#include "sim/common/result_dir.hpp"
#include "sim/common/input_error.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <filesystem>
#include <set>
#include <unistd.h>

namespace eldr {

namespace fs = std::filesystem;

const std::vector<std::string> kResultFiles = {"requests.csv", "steps.csv", "windows.csv", "decisions.csv",
                                               "summary.json"};

namespace {

// What the signal handler removes and prints: built before it is published, never changed after.
struct Cleanup {
  std::vector<std::string> files;  // staged files and their write_file_atomically temporaries
  std::string dir;
  std::string message;
};
std::atomic<const Cleanup*> g_cleanup{nullptr};
const char kInterrupted[] = "eldrsim: error: interrupted\n";

extern "C" void on_interrupt(int)
{
  const Cleanup* c = g_cleanup.load();
  if (c) {
    for (const auto& f : c->files)
      ::unlink(f.c_str());
    ::rmdir(c->dir.c_str());
  }
  const char* msg = c ? c->message.c_str() : kInterrupted;
  size_t len      = c ? c->message.size() : sizeof kInterrupted - 1;
  while (len > 0) {
    ssize_t n = ::write(2, msg, len);
    if (n <= 0)
      break;
    msg += n;
    len -= size_t(n);
  }
  ::_exit(130);
}

sigset_t interrupt_signals()
{
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&s, sig);
  return s;
}

// A staging directory's name is "[.NAME].eldr-tmp@HOST@PID". Its pid when the name is one and HOST
// is this host, else 0.
long staging_pid(const std::string& name)
{
  const auto at = name.rfind(".eldr-tmp@");
  if (!name.starts_with(".") || at == std::string::npos)
    return 0;
  const std::string mine = owner_suffix(), host = mine.substr(0, mine.rfind('@') + 1);  // "@HOST@"
  if (name.compare(at + 9, host.size(), host) != 0)
    return -1;  // another host's: a staging directory, but not ours to judge
  return std::atol(name.c_str() + at + 9 + host.size());
}

// Removes the staging directories in `dir` left by runs that were killed (SIGKILL: no cleanup).
void remove_stale_staging(const fs::path& dir)
{
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const long pid = staging_pid(e.path().filename().string());
    if (pid > 0 && pid != long(::getpid()) && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      fs::remove_all(e.path(), ec);
  }
}

bool only_results(const fs::path& dir)
{
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (staging_pid(name) == 0 && std::find(kResultFiles.begin(), kResultFiles.end(), name) == kResultFiles.end())
      return false;
  }
  return !ec;
}

// Swaps in what the handler cleans up, with the signals blocked (so it never sees a freed one).
void set_cleanup(const Cleanup* c)
{
  const sigset_t block = interrupt_signals();
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &block, &old);
  delete g_cleanup.exchange(c);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

std::string owner_suffix()
{
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string("@") + host + "@" + std::to_string(::getpid());
}

void install_interrupt_handler()
{
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
}

StagedDirectory::StagedDirectory(const std::string& target) : target_(target)
{
  std::error_code ec;
  const fs::path t = fs::absolute(fs::path(target), ec).lexically_normal();
  fs::path dir     = t.has_filename() ? t : t.parent_path();  // "out/" -> "out"
  const auto st    = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw InputError(target, "", "exists and is not a directory");
  const std::string pid = std::to_string(::getpid()), tag = ".eldr-tmp" + owner_suffix();
  if (fs::is_directory(st)) {
    // A symbolic link to a directory is written through (swapping would replace the link).
    mode_    = only_results(dir) && !fs::is_symlink(fs::symlink_status(dir, ec)) ? Mode::swap : Mode::in_place;
    staging_ = mode_ == Mode::swap ? (dir.parent_path() / ("." + dir.filename().string() + tag)).string()
                                   : (dir / tag).string();
  } else {
    mode_ = Mode::absent;
    fs::create_directories(dir.parent_path(), ec);
    if (ec)
      throw InputError(target, "", "cannot create the directory above it: " + ec.message());
    staging_ = (dir.parent_path() / ("." + dir.filename().string() + tag)).string();
  }
  remove_stale_staging(fs::path(staging_).parent_path());
  fs::remove_all(staging_, ec);
  if (::mkdir(staging_.c_str(), 0755) != 0)
    throw InputError(target, "", std::string("cannot write results here: ") + std::strerror(errno));
  target_ = dir.string();
  auto* c = new Cleanup;
  for (const auto& f : kResultFiles) {
    c->files.push_back(staging_ + "/" + f);
    c->files.push_back(staging_ + "/" + f + ".tmp." + pid);
  }
  c->dir     = staging_;
  // On a terminal the run's progress line has no newline yet.
  c->message = std::string(::isatty(2) ? "\n" : "") + "eldrsim: error: " + target +
               ": interrupted, no results written (earlier ones are intact)\n";
  set_cleanup(c);
}

StagedDirectory::~StagedDirectory()
{
  set_cleanup(nullptr);
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

void StagedDirectory::commit()
{
  const sigset_t block = interrupt_signals();
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &block, &old);
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    throw InputError(target_, "", what + ": " + std::strerror(err));
  };
  std::error_code ec;
  switch (mode_) {
  case Mode::absent:
    if (std::rename(staging_.c_str(), target_.c_str()) != 0)
      fail("cannot move the results into place");
    break;
  case Mode::swap:
    if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
      // A file system without the exchange: the old directory goes aside, the new one takes its name.
      const std::string aside = staging_ + ".old";
      if (std::rename(target_.c_str(), aside.c_str()) != 0)
        fail("cannot move the old results aside");
      if (std::rename(staging_.c_str(), target_.c_str()) != 0)
        fail("cannot move the results into place");
      fs::remove_all(aside, ec);
    }
    fs::remove_all(staging_, ec);  // the old results, after the exchange
    break;
  case Mode::in_place: {
    const fs::path t(target_), s(staging_);
    fs::remove(t / "summary.json", ec);  // the old result is incomplete from here on
    std::set<std::string> staged;
    for (const auto& e : fs::directory_iterator(s, ec))
      staged.insert(e.path().filename().string());
    for (const auto& f : kResultFiles) {
      if (f == "summary.json")
        continue;
      if (!staged.contains(f))
        fs::remove(t / f, ec);  // an older run's file this one did not write (steps.csv, say)
      else if (std::rename((s / f).c_str(), (t / f).c_str()) != 0)
        fail("cannot move " + f + " into place");
    }
    if (std::rename((s / "summary.json").c_str(), (t / "summary.json").c_str()) != 0)
      fail("cannot move summary.json into place");
    fs::remove_all(s, ec);
    break;
  }
  }
  committed_ = true;
  delete g_cleanup.exchange(nullptr);  // the signals are blocked
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

void ensure_writable_directory(const std::string& dir)
{
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw InputError(dir, "", "exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec)
    throw InputError(dir, "", "cannot create directory: " + ec.message());
  const std::string probe = (fs::path(dir) / (".eldr-probe." + std::to_string(::getpid()))).string();
  if (::mkdir(probe.c_str(), 0755) != 0)
    throw InputError(dir, "", std::string("cannot write here: ") + std::strerror(errno));
  ::rmdir(probe.c_str());
}

void check_output_file(const std::string& path)
{
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw InputError(path, "", "is a directory, not a file");
  const fs::path parent = fs::path(path).parent_path();
  ensure_writable_directory(parent.empty() ? "." : parent.string());
}

std::string fnv1a64_hex(const std::string& text)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace eldr
