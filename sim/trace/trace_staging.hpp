#pragma once
// A trace directory appears whole: trace gen and every trace import write into a staging directory
// and move it into place at the end, so a reader sees the old trace or the new one, never the new
// routing.bin beside the old requests.jsonl (or a stale routing.bin beside a new trace without one).
// An interrupt while staging removes the staging directory (an InterruptNote, result_dir.hpp) and
// says that no trace was written.
#include "sim/common/result_dir.hpp"

#include <memory>
#include <string>

namespace eldr {

class StagedTrace {
 public:
  // Checks that `target` can take a trace (absent, or a directory; not an empty path) and makes the
  // staging directory: an InputError naming `target` otherwise. Call before reading the inputs.
  explicit StagedTrace(const std::string& target);
  ~StagedTrace();  // removes the staging directory unless committed
  StagedTrace(const StagedTrace&)            = delete;
  StagedTrace& operator=(const StagedTrace&) = delete;

  // Where the trace's files are written.
  const std::string& dir() const { return staging_; }
  const std::string& target() const { return target_; }
  // Moves the staged trace into place with the interrupt signals blocked. A target holding only a
  // trace's files is swapped whole (renameat2 RENAME_EXCHANGE); one that holds other files too, or
  // is a symbolic link, loses its trace.json first, then gets the new files (a trace file the new
  // trace lacks is removed), then the new trace.json.
  void commit();

 private:
  std::string target_, staging_;
  StagingMode mode_;
  bool committed_ = false;
  std::shared_ptr<OutputLock> lock_;  // released after note_ (declared before it)
  std::unique_ptr<InterruptNote> note_;
};

}  // namespace eldr
