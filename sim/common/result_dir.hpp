#pragma once
// A results directory appears whole: files are written into a staging directory and moved into
// place at the end, so a reader sees the old results or the new ones, never a mix. Ctrl-C (SIGINT,
// SIGTERM, SIGHUP) removes the staging directory, prints one line and exits 128 + the signal.
#include <csignal>
#include <memory>
#include <string>
#include <vector>

namespace eldr {

class OutputLock;

// The exit statuses of every command, for --help and the docs.
inline constexpr const char kExitCodesHelp[] =
    "Exit status:\n"
    "  0      done\n"
    "  1      a failure the output explains: compare found a regression (or --require-all a missing run),\n"
    "         sweep points failed or have no results, a run broke an internal invariant; or an internal\n"
    "         error (a bug: the line says so)\n"
    "  2      bad input (command line, config, trace, results directory): one line 'eldrsim: error: ...'\n"
    "  3      run: results written, but some measured requests did not finish (see summary.json)\n"
    "  128+N  interrupted by signal N: 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP; one line\n"
    "         'eldrsim: error: interrupted by SIGNAL: ...' says what was kept; no partial output is left\n";

// Interrupts, one convention for every command. SIGINT, SIGTERM and SIGHUP (install_interrupt_handler)
// remove the files and directories the command registered, print one line
//   eldrsim: error: interrupted by SIGTERM: <note>
// ("eldrsim: error: interrupted by SIGTERM" when nothing is registered), and exit 128 + the signal
// number (130, 143, 129). On a terminal the line first clears a progress line left open.
//
// A command registers, before the work starts, an InterruptNote naming its output and what an
// interruption keeps, and the temporaries to remove, and keeps it alive over the work:
//   InterruptNote note(out + ": not written, the earlier file is intact", {atomic_temporary(out)});
//   ... work, then write_file_atomically(out, ...) ...
// Everything is copied and formatted when the note is made and published whole (an atomic pointer,
// swapped with the signals blocked), so the handler only reads finished memory and calls unlink,
// rmdir, write and _exit (async-signal-safe). Notes nest: the newest one is in force, and its
// destructor puts back the one before (destroy them in reverse order, as scopes do).
class InterruptNote {
 public:
  // `files` are unlinked, then `dirs` removed (rmdir: each must be empty by then, so list a
  // directory's files first). Paths as given (relative ones against the working directory).
  explicit InterruptNote(const std::string& note, std::vector<std::string> files = {},
                         std::vector<std::string> dirs = {});
  ~InterruptNote();
  InterruptNote(const InterruptNote&)            = delete;
  InterruptNote& operator=(const InterruptNote&) = delete;

  struct Block;  // what the handler reads

 private:
  const Block* mine_;
  const Block* previous_;
};

// How a staged output directory reaches its target (StagedDirectory; StagedTrace does the same for traces).
enum class StagingMode {
  absent,   // no target yet: the staging directory is renamed to it
  swap,     // a target holding only this kind of output: swapped whole (renameat2 RENAME_EXCHANGE)
  in_place  // a target holding other files too: `marker` removed first, the files moved in, `marker` last
};

// One kind of staged output (results, a trace): what its directory may hold and how it is named.
struct StagedKind {
  const char* tag;                        // the staging directory's name: "[.NAME]TAG@HOST@PID"
  const std::vector<std::string>* files;  // the files such an output may hold
  const char* marker;                     // the file whose presence marks a whole output
  const char* noun;                       // "results", "trace": in errors
  const char* not_a_directory;            // the error for a target that is a file
};

// Where an output is staged: the target (normalised), the staging directory (made, empty), the mode
// its commit will use, and whether the target held a whole output already.
struct StagingPlace {
  std::string target, staging;
  StagingMode mode = StagingMode::absent;
  bool had_output  = false;
  std::vector<std::string> temporaries;  // the staged files and their atomic-write temporaries
  std::shared_ptr<OutputLock> lock;      // held until the output is in place (output_lock.hpp)
};

// Takes the output's lock (another process writing `target`: an InputError naming it), chooses the
// mode for `target` (absent; swap when it holds only `kind`'s files and is no symbolic
// link; else in place), removes staging directories of `kind` that killed processes left beside the
// new one, and makes the staging directory: an InputError naming `target` otherwise.
StagingPlace make_staging(const std::string& target, const StagedKind& kind);

// Moves `staging` into place as `target` with the interrupt signals blocked. `files` are the files
// such an output may hold: in place, one that was not staged is removed from the target (an older
// output's). `marker` is the file whose presence marks a whole output (summary.json, trace.json);
// `noun` names the output in errors ("results", "trace"). On success `note` is released before the
// signals come back. An InputError naming `target` otherwise.
void commit_staging(const std::string& staging, const std::string& target, StagingMode mode,
                    const std::vector<std::string>& files, const std::string& marker, const std::string& noun,
                    std::unique_ptr<InterruptNote>& note);

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
  StagingMode mode_;
  bool committed_ = false;
  std::shared_ptr<OutputLock> lock_;
  std::unique_ptr<InterruptNote> note_;  // removes the staging directory on an interrupt
};

// Creates `dir` if needed and checks that files can be made in it: an InputError naming `dir`
// otherwise (before any work that would write there).
void ensure_writable_directory(const std::string& dir);

// For an output file: not a directory, and its directory writable (ensure_writable_directory).
void check_output_file(const std::string& path);

// Installs the handlers for SIGINT, SIGTERM and SIGHUP (again after SimGrid installs its own).
void install_interrupt_handler();

// Holds the interrupt signals back while it lives; one that arrives meanwhile is delivered when it
// ends. Around code that installs another handler for a moment: SimGrid's engine installs one that
// exits 1 (a failed run, to a sweep, not an interrupted one) until install_interrupt_handler is back.
class InterruptsHeld {
 public:
  InterruptsHeld();
  ~InterruptsHeld();
  InterruptsHeld(const InterruptsHeld&)            = delete;
  InterruptsHeld& operator=(const InterruptsHeld&) = delete;

 private:
  sigset_t before_;
};
// In a child forked to run a command in this image: the parent's registered temporaries are not
// the child's to remove on an interrupt (the parent's note is left as it is, not freed).
void forget_interrupt_note();

// "SIGINT", "SIGTERM", "SIGKILL", ... or "signal N"; and what a signal killing a child usually means
// ("usually the kernel's out-of-memory killer" for SIGKILL), empty when nothing useful can be said.
std::string signal_name(int sig);
std::string signal_meaning(int sig);

// "@HOST@PID": whose temporary a directory is (results directories may be shared between hosts).
std::string owner_suffix();

// FNV-1a 64 of `text` as 16 hex digits.
std::string fnv1a64_hex(const std::string& text);

}  // namespace eldr
