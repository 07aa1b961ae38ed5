#include "sim/trace/trace_staging.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/trace/trace_format.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace eldr {

namespace fs = std::filesystem;

namespace {

// The files a trace directory holds (the routing file as the writers name it).
const std::vector<std::string> kTraceFiles = {kTraceRequestsName, "routing.bin", kTraceManifestName};
constexpr const char* kStagingTag          = ".eldr-trace-tmp";

// A staging directory's name ends in ".eldr-trace-tmp@HOST@PID": its pid when HOST is this host.
long staging_pid(const std::string& name)
{
  const auto at = name.rfind(std::string(kStagingTag) + "@");
  if (!name.starts_with(".") || at == std::string::npos)
    return 0;
  const std::string mine = owner_suffix(), host = mine.substr(0, mine.rfind('@') + 1);  // "@HOST@"
  const size_t from = at + std::strlen(kStagingTag);
  if (name.compare(from, host.size(), host) != 0)
    return -1;  // another host's
  return std::atol(name.c_str() + from + host.size());
}

// Removes the staging directories in `dir` of imports that were killed (SIGKILL: no cleanup).
void remove_stale_staging(const fs::path& dir)
{
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const long pid = staging_pid(e.path().filename().string());
    if (pid > 0 && pid != long(::getpid()) && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      fs::remove_all(e.path(), ec);
  }
}

bool only_trace_files(const fs::path& dir)
{
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (staging_pid(name) == 0 && std::find(kTraceFiles.begin(), kTraceFiles.end(), name) == kTraceFiles.end())
      return false;
  }
  return !ec;
}

}  // namespace

StagedTrace::StagedTrace(const std::string& target) : target_(target)
{
  if (target.empty())
    throw InputError("--out", "", "an empty path: give the trace directory to write");
  std::error_code ec;
  const fs::path t   = fs::absolute(fs::path(target), ec).lexically_normal();
  const fs::path dir = t.has_filename() ? t : t.parent_path();  // "out/" -> "out"
  const auto st      = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw InputError(target, "", "exists and is not a directory: give a trace directory");
  const std::string tag = kStagingTag + owner_suffix();
  if (fs::is_directory(st)) {
    // A symbolic link to a directory is written through (swapping would replace the link).
    mode_    = only_trace_files(dir) && !fs::is_symlink(fs::symlink_status(dir, ec)) ? StagingMode::swap
                                                                                     : StagingMode::in_place;
    staging_ = mode_ == StagingMode::swap ? (dir.parent_path() / ("." + dir.filename().string() + tag)).string()
                                          : (dir / tag).string();
  } else {
    mode_ = StagingMode::absent;
    fs::create_directories(dir.parent_path(), ec);
    if (ec)
      throw InputError(target, "", "cannot create the directory above it: " + ec.message());
    staging_ = (dir.parent_path() / ("." + dir.filename().string() + tag)).string();
  }
  remove_stale_staging(fs::path(staging_).parent_path());
  fs::remove_all(staging_, ec);
  if (::mkdir(staging_.c_str(), 0755) != 0)
    throw InputError(target, "", std::string("cannot write a trace here: ") + std::strerror(errno));
  const bool had_trace = mode_ != StagingMode::absent && fs::exists(dir / kTraceManifestName, ec);
  target_              = dir.string();
  // An interrupt removes the staged files (and their temporaries), then the staging directory.
  std::vector<std::string> files;
  for (const auto& f : kTraceFiles) {
    files.push_back(staging_ + "/" + f);
    files.push_back(atomic_temporary(staging_ + "/" + f));
  }
  note_ = std::make_unique<InterruptNote>(
      target_ + (had_trace ? ": no trace written, the earlier one is intact" : ": no trace written"), std::move(files),
      std::vector<std::string>{staging_});
}

StagedTrace::~StagedTrace()
{
  if (!committed_) {
    note_.reset();
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

void StagedTrace::commit()
{
  commit_staging(staging_, target_, mode_, kTraceFiles, kTraceManifestName, "trace", note_);
  committed_ = true;
}

}  // namespace eldr
