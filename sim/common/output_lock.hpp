#pragma once
// One writer per output: a command holds an advisory lock (flock) on the file ".<name>.lock" beside
// its output directory while it writes there, so a second command writing the same output is refused
// at once, naming the holder, instead of replacing the first one's output or losing its own work.
// The lock goes with the process (a killed one leaves at most the empty lock file, which the next
// writer takes over). File systems without locks are written unlocked.
#include <string>

namespace eldr {

class OutputLock {
 public:
  enum class Mode {
    exclusive,  // the only writer (run, trace, a whole sweep): "pid@host command" is written into the file
    shared      // one of several cooperating writers (the tasks of one sweep's Slurm array)
  };
  // Takes the lock on `output` (a directory, which need not exist; its parent must). An InputError
  // "OUTPUT: OPTION: being written by COMMAND (pid N on HOST): ..." when another process holds it.
  // `command` names this one to others (empty: "eldrsim <subcommand>" from the command line).
  OutputLock(const std::string& output, const std::string& option, const std::string& command,
             Mode mode = Mode::exclusive);
  ~OutputLock();  // release()
  OutputLock(const OutputLock&)            = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // Lets go: an exclusive holder removes the lock file first (before exec, say).
  void release();
  bool held() const { return fd_ >= 0; }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  int fd_         = -1;
  bool exclusive_ = true;
};

// Names this process's command in the locks it takes from now on ("eldrsim run"), in place of its
// command line: for a child forked to run a command without exec, whose command line is its parent's.
void set_this_command(const std::string& command);

// ".<name>.lock" beside `output` ("out/" and "out" alike).
std::string output_lock_file(const std::string& output);

}  // namespace eldr
