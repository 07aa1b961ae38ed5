#pragma once
// A results directory appears whole: files are written into a staging directory and moved into
// place at the end, so a reader sees the old results or the new ones, never a mix. Ctrl-C (SIGINT,
// SIGTERM, SIGHUP) removes the staging directory, prints one line and exits 130.
#include <string>
#include <vector>

namespace eldr {

// The files a run writes; summary.json is always moved last (its presence marks a complete result).
extern const std::vector<std::string> kResultFiles;

class StagedDirectory {
public:
  // Checks that `target` can take results (absent, or a directory; its parent can be created) and
  // makes the staging directory: an InputError naming `target` otherwise. Call before simulating.
  explicit StagedDirectory(const std::string& target);
  ~StagedDirectory();  // removes the staging directory unless committed
  StagedDirectory(const StagedDirectory&)            = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  const std::string& staging() const { return staging_; }
  const std::string& target() const { return target_; }
  // Moves the staged files into place with the interrupt signals blocked. A target holding only
  // results is swapped whole (renameat2 RENAME_EXCHANGE); one that holds other files too (a sweep's
  // run.log, say) loses its summary.json first, gets the new files, then the new summary.json.
  void commit();

private:
  std::string target_, staging_;
  enum class Mode { absent, swap, in_place } mode_;
  bool committed_ = false;
};

// Creates `dir` if needed and checks that files can be made in it: an InputError naming `dir`
// otherwise (before any work that would write there).
void ensure_writable_directory(const std::string& dir);

// For an output file: not a directory, and its directory writable (ensure_writable_directory).
void check_output_file(const std::string& path);

// Installs the handlers for SIGINT, SIGTERM and SIGHUP (again after SimGrid installs its own).
void install_interrupt_handler();

// "@HOST@PID": whose temporary a directory is (results directories may be shared between hosts).
std::string owner_suffix();

// FNV-1a 64 of `text` as 16 hex digits.
std::string fnv1a64_hex(const std::string& text);

}  // namespace eldr
