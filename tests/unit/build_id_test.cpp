#include "sim/common/build_id.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <unistd.h>

using namespace eldr;

TEST_CASE("build id: the running executable's GNU build ID, as readelf reads it from the file")
{
  // Independent method: binutils' readelf on the executable's file (binutils comes with the compiler).
  const std::string cmd = "readelf -n /proc/" + std::to_string(::getpid()) + "/exe 2>/dev/null";
  std::FILE* p          = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  ::pclose(p);
  const size_t at = out.find("Build ID: ");
  REQUIRE_MESSAGE(at != std::string::npos, "readelf found no build-ID note (is binutils installed?)");
  const std::string from_file = out.substr(at + 10, out.find('\n', at) - at - 10);
  CHECK(from_file.size() == 40);  // SHA-1, the linker's default
  CHECK(executable_build_id() == from_file);
}
