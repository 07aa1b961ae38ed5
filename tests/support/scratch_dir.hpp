#pragma once
// A scratch directory for a test's files, removed at the end of the test.
#include <filesystem>
#include <string>
#include <unistd.h>

namespace eldr::test {

struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(const std::string& tag)
  {
    dir = std::filesystem::temp_directory_path() / ("eldr-test-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() { std::filesystem::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  std::string path() const { return dir.string(); }
};

}  // namespace eldr::test
