#include "sim/trace/trace_staging.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/trace/trace_format.hpp"

#include <filesystem>
#include <vector>

namespace eldr {

namespace fs = std::filesystem;

namespace {

// The files a trace directory holds (the routing file as the writers name it).
const std::vector<std::string> kTraceFiles = {kTraceRequestsName, "routing.bin", kTraceManifestName};
const StagedKind kTrace                    = {".eldr-trace-tmp", &kTraceFiles, kTraceManifestName, "a trace",
                                              "exists and is not a directory: give a trace directory"};

}  // namespace

StagedTrace::StagedTrace(const std::string& target) : target_(target)
{
  if (target.empty())
    throw InputError("--out", "", "an empty path: give the trace directory to write");
  StagingPlace p = make_staging(target, kTrace);
  staging_       = p.staging;
  mode_          = p.mode;
  target_        = p.target;
  lock_          = p.lock;
  // An interrupt removes the staged files (and their temporaries), then the staging directory.
  note_ = std::make_unique<InterruptNote>(
      target_ + (p.had_output ? ": no trace written, the earlier one is intact" : ": no trace written"),
      std::move(p.temporaries), std::vector<std::string>{staging_});
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
