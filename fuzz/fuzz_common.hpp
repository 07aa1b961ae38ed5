#pragma once
// What every harness shares: the input goes to a file (the readers take paths, as eldrsim does), the
// reader runs, and a one-line InputError is the only acceptable failure. Anything else (another
// exception, a crash, a sanitizer report, a hang) is a finding: libFuzzer saves the input.
#include "sim/common/input_error.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <unistd.h>

namespace eldr::fuzz {

// A scratch directory of this process (in RAM when /dev/shm exists).
inline const std::string& scratch_dir()
{
  static const std::string dir = [] {
    std::string d =
        (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/eldr-fuzz-") + std::to_string(getpid());
    std::string cmd = "mkdir -p " + d;
    if (std::system(cmd.c_str()) != 0)
      std::abort();
    // Configs name models and clusters relative to the project.
    setenv("ELDR_HOME", ELDR_SOURCE_DIR, 1);
    return d;
  }();
  return dir;
}

inline std::string write_input(const std::string& name, const uint8_t* data, size_t size)
{
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

// Runs `read`; InputError is the expected way to reject an input, everything else aborts.
template <class F> int expect_clean(F&& read)
{
  try {
    read();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    if (msg.empty() || msg.find('\n') != std::string::npos) {
      std::fprintf(stderr, "input error message is not one line: '%s'\n", msg.c_str());
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an InputError: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace eldr::fuzz
