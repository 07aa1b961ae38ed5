#include "sim/common/result_dir.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/output_lock.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace eldr {

namespace fs = std::filesystem;

const std::vector<std::string> kResultFiles = {"requests.csv", "steps.csv", "windows.csv", "decisions.csv",
                                               "summary.json"};

namespace {

std::atomic<const InterruptNote::Block*> g_note{nullptr};
bool g_tty = false;  // stderr is a terminal: a progress line may be open

void write_all(const char* msg, size_t len)
{
  while (len > 0) {
    ssize_t n = ::write(2, msg, len);
    if (n <= 0)
      break;
    msg += n;
    len -= size_t(n);
  }
}

void write_str(const char* s)
{
  write_all(s, std::strlen(s));
}

}  // namespace

// Built whole before it is published, never changed after.
struct InterruptNote::Block {
  std::vector<std::string> files, dirs;
  std::string note;
};

namespace {

extern "C" void on_interrupt(int sig)
{
  const InterruptNote::Block* b = g_note.load();
  if (b) {
    for (const auto& f : b->files)
      ::unlink(f.c_str());
    for (const auto& d : b->dirs)
      ::rmdir(d.c_str());
  }
  if (g_tty)
    write_str("\r\033[K");  // clears a progress line left open
  write_str("eldrsim: error: interrupted by ");
  write_str(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal");
  if (b && !b->note.empty()) {
    write_str(": ");
    write_all(b->note.data(), b->note.size());
  }
  write_str("\n");
  ::_exit(128 + sig);
}

sigset_t interrupt_signals()
{
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&s, sig);
  return s;
}

// A staging directory's name is "[.NAME]TAG@HOST@PID". Its pid when the name is one and HOST is this
// host, -1 for another host's (a staging directory, but not ours to judge), else 0.
long staging_pid(const std::string& name, const std::string& tag)
{
  const auto at = name.rfind(tag + "@");
  if (!name.starts_with(".") || at == std::string::npos)
    return 0;
  const std::string mine = owner_suffix(), host = mine.substr(0, mine.rfind('@') + 1);  // "@HOST@"
  const size_t from = at + tag.size();
  if (name.compare(from, host.size(), host) != 0)
    return -1;
  return std::atol(name.c_str() + from + host.size());
}

// Removes the staging directories in `dir` left by processes that were killed (SIGKILL: no cleanup).
void remove_stale_staging(const fs::path& dir, const std::string& tag)
{
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const long pid = staging_pid(e.path().filename().string(), tag);
    if (pid > 0 && pid != long(::getpid()) && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      fs::remove_all(e.path(), ec);
  }
}

// `dir` holds only `kind`'s files (and staging directories).
bool holds_only(const fs::path& dir, const StagedKind& kind)
{
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (staging_pid(name, kind.tag) == 0 &&
        std::find(kind.files->begin(), kind.files->end(), name) == kind.files->end())
      return false;
  }
  return !ec;
}

// Publishes `b` for the handler with the signals blocked (so it never sees one being freed); the one
// it replaces.
const InterruptNote::Block* publish(const InterruptNote::Block* b)
{
  const sigset_t block = interrupt_signals();
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &block, &old);
  const InterruptNote::Block* before = g_note.exchange(b);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  return before;
}

}  // namespace

std::string owner_suffix()
{
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string("@") + host + "@" + std::to_string(::getpid());
}

InterruptNote::InterruptNote(const std::string& note, std::vector<std::string> files, std::vector<std::string> dirs)
    : mine_(new Block{std::move(files), std::move(dirs), note}), previous_(publish(mine_))
{
}

InterruptNote::~InterruptNote()
{
  publish(previous_);
  delete mine_;
}

std::string signal_name(int sig)
{
  switch (sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  case SIGKILL:
    return "SIGKILL";
  case SIGSEGV:
    return "SIGSEGV";
  case SIGABRT:
    return "SIGABRT";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGILL:
    return "SIGILL";
  case SIGPIPE:
    return "SIGPIPE";
  case SIGXCPU:
    return "SIGXCPU";
  case SIGXFSZ:
    return "SIGXFSZ";
  case SIGQUIT:
    return "SIGQUIT";
  default:
    return "signal " + std::to_string(sig);
  }
}

std::string signal_meaning(int sig)
{
  switch (sig) {
  case SIGKILL:
    return "usually the kernel's out-of-memory killer (or a batch system's memory or time limit)";
  case SIGSEGV:
  case SIGBUS:
  case SIGILL:
  case SIGFPE:
    return "a crash: a bug, please report it with the command line";
  case SIGABRT:
    return "an abort: a failed check or an uncaught error, please report it with the command line";
  case SIGXCPU:
    return "the CPU time limit (ulimit -t or a batch system's)";
  case SIGXFSZ:
    return "the file size limit (ulimit -f)";
  case SIGTERM:
  case SIGINT:
  case SIGHUP:
    return "stopped from outside (kill, a batch system, a closed terminal)";
  default:
    return "";
  }
}

void forget_interrupt_note()
{
  g_note.store(nullptr);
}

InterruptsHeld::InterruptsHeld()
{
  const sigset_t block = interrupt_signals();
  ::sigprocmask(SIG_BLOCK, &block, &before_);
}

InterruptsHeld::~InterruptsHeld()
{
  ::sigprocmask(SIG_SETMASK, &before_, nullptr);
}

void install_interrupt_handler()
{
  g_tty = ::isatty(2);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
}

StagingPlace make_staging(const std::string& target, const StagedKind& kind)
{
  std::error_code ec;
  const fs::path t   = fs::absolute(fs::path(target), ec).lexically_normal();
  const fs::path dir = t.has_filename() ? t : t.parent_path();  // "out/" -> "out"
  const auto st      = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw InputError(target, "", kind.not_a_directory);
  const std::string tag = kind.tag + owner_suffix();
  StagingPlace p;
  if (!fs::is_directory(st)) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec)
      throw InputError(target, "", "cannot create the directory above it: " + ec.message());
  }
  p.lock = std::make_shared<OutputLock>(target, "--out", "");
  if (p.lock->held())  // an interrupt removes it too
    p.temporaries.push_back(p.lock->file());
  if (fs::is_directory(st)) {
    // A symbolic link to a directory is written through (swapping would replace the link).
    p.mode    = holds_only(dir, kind) && !fs::is_symlink(fs::symlink_status(dir, ec)) ? StagingMode::swap
                                                                                      : StagingMode::in_place;
    p.staging = p.mode == StagingMode::swap ? (dir.parent_path() / ("." + dir.filename().string() + tag)).string()
                                            : (dir / tag).string();
  } else {
    p.mode    = StagingMode::absent;
    p.staging = (dir.parent_path() / ("." + dir.filename().string() + tag)).string();
  }
  remove_stale_staging(fs::path(p.staging).parent_path(), kind.tag);
  fs::remove_all(p.staging, ec);
  if (::mkdir(p.staging.c_str(), 0755) != 0)
    throw InputError(target, "", "cannot write " + std::string(kind.noun) + " here: " + std::strerror(errno));
  p.target     = dir.string();
  p.had_output = p.mode != StagingMode::absent && fs::exists(dir / kind.marker, ec);
  for (const auto& f : *kind.files) {
    p.temporaries.push_back(p.staging + "/" + f);
    p.temporaries.push_back(atomic_temporary(p.staging + "/" + f));
  }
  return p;
}

namespace {
const StagedKind kResults = {".eldr-tmp", &kResultFiles, "summary.json", "results", "exists and is not a directory"};
}  // namespace

StagedDirectory::StagedDirectory(const std::string& target) : target_(target)
{
  StagingPlace p = make_staging(target, kResults);
  staging_       = p.staging;
  mode_          = p.mode;
  lock_          = p.lock;
  note_ =
      std::make_unique<InterruptNote>(target + ": no results written" + (p.had_output ? ", earlier ones intact" : ""),
                                      std::move(p.temporaries), std::vector<std::string>{staging_});
  target_ = p.target;
}

StagedDirectory::~StagedDirectory()
{
  note_.reset();
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

void commit_staging(const std::string& staging, const std::string& target, StagingMode mode,
                    const std::vector<std::string>& files, const std::string& marker, const std::string& noun,
                    std::unique_ptr<InterruptNote>& note)
{
  const sigset_t block = interrupt_signals();
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &block, &old);
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    throw InputError(target, "", what + ": " + std::strerror(err));
  };
  std::error_code ec;
  switch (mode) {
  case StagingMode::absent:
    if (std::rename(staging.c_str(), target.c_str()) != 0)
      fail("cannot move the " + noun + " into place");
    break;
  case StagingMode::swap:
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
      // A file system without the exchange: the old directory goes aside, the new one takes its name.
      const std::string aside = staging + ".old";
      if (std::rename(target.c_str(), aside.c_str()) != 0)
        fail("cannot move the old " + noun + " aside");
      if (std::rename(staging.c_str(), target.c_str()) != 0)
        fail("cannot move the " + noun + " into place");
      fs::remove_all(aside, ec);
    }
    fs::remove_all(staging, ec);  // the old output, after the exchange
    break;
  case StagingMode::in_place: {
    const fs::path t(target), s(staging);
    fs::remove(t / marker, ec);  // the old output is incomplete from here on
    for (const auto& f : files) {
      if (f == marker)
        continue;
      if (!fs::exists(s / f, ec))
        fs::remove(t / f, ec);  // an older output's file this one does not have (steps.csv, routing.bin)
      else if (std::rename((s / f).c_str(), (t / f).c_str()) != 0)
        fail("cannot move " + f + " into place");
    }
    if (std::rename((s / marker).c_str(), (t / marker).c_str()) != 0)
      fail("cannot move " + marker + " into place");
    fs::remove_all(s, ec);
    break;
  }
  }
  note.reset();  // the signals are still blocked
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

void StagedDirectory::commit()
{
  commit_staging(staging_, target_, mode_, kResultFiles, "summary.json", "results", note_);
  committed_ = true;
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
  return fnv1a64_text(fnv1a64(text.data(), text.size()));
}

}  // namespace eldr
