#include "sim/common/input_file.hpp"
#include "sim/common/input_error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace eldr {

namespace {

[[noreturn]] void fail_stat(const std::string& path, int err)
{
  if (err == ENOENT || err == ENOTDIR) {
    struct stat l {};
    if (::lstat(path.c_str(), &l) == 0 && S_ISLNK(l.st_mode))
      throw InputError(path, "", "file not found (a symbolic link to a missing file)");
    throw InputError(path, "", "file not found");
  }
  throw InputError(path, "", std::string("cannot open: ") + std::strerror(err));
}

void check_mode(const std::string& path, mode_t mode)
{
  if (S_ISDIR(mode))
    throw InputError(path, "", "is a directory, not a file");
  if (!S_ISREG(mode))
    throw InputError(path, "", "is not a regular file (a device, FIFO or socket): give a file");
}

std::string too_large(uint64_t max_bytes)
{
  return "larger than " + std::to_string(max_bytes) +
         " bytes, the most eldrsim reads of one file "
         "(truncate it, or split the input)";
}

// Reads the file whole into `out` (a std::string or a byte vector).
template <class Buffer> void read_whole(const std::string& path, uint64_t max_bytes, Buffer& out)
{
  if (path.empty())
    throw InputError("<empty path>", "", "give a file");
  // O_NONBLOCK: opening a FIFO never waits for a writer (the fstat below refuses it anyway).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0)
      check_mode(path, st.st_mode);
    fail_stat(path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail_stat(path, err);
  }
  try {
    check_mode(path, st.st_mode);
    if (uint64_t(st.st_size) > max_bytes)
      throw InputError(path, "", std::to_string(uint64_t(st.st_size)) + " bytes: " + too_large(max_bytes));
  } catch (...) {
    ::close(fd);
    throw;
  }
  out.clear();
  out.resize(size_t(st.st_size));
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      // The file grew while being read: read on, within the limit.
      if (out.size() >= max_bytes) {
        char probe;
        const ssize_t n = ::read(fd, &probe, 1);
        ::close(fd);
        if (n > 0)
          throw InputError(path, "", too_large(max_bytes));
        return;
      }
      out.resize(size_t(std::min<uint64_t>(max_bytes, uint64_t(out.size()) * 2 + 65536)));
    }
    const ssize_t n = ::read(fd, reinterpret_cast<char*>(out.data()) + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      const int err = errno;
      ::close(fd);
      throw InputError(path, "", std::string("read failed: ") + std::strerror(err));
    }
    if (n == 0)
      break;
    have += size_t(n);
  }
  ::close(fd);
  out.resize(have);
}

}  // namespace

void check_input_file(const std::string& path)
{
  if (path.empty())
    throw InputError("<empty path>", "", "give a file");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail_stat(path, errno);
  check_mode(path, st.st_mode);
  if (::access(path.c_str(), R_OK) != 0)
    throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno));
}

std::string read_input_file(const std::string& path, uint64_t max_bytes)
{
  std::string out;
  read_whole(path, max_bytes, out);
  return out;
}

std::vector<uint8_t> read_input_bytes(const std::string& path, uint64_t max_bytes)
{
  std::vector<uint8_t> out;
  read_whole(path, max_bytes, out);
  return out;
}

std::ifstream open_input_file(const std::string& path, std::ios::openmode mode)
{
  check_input_file(path);
  errno = 0;
  std::ifstream in(path, mode);
  if (!in)
    throw InputError(path, "", std::string("cannot open: ") + std::strerror(errno ? errno : EIO));
  return in;
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t h)
{
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t fnv1a64_file(const std::string& path)
{
  std::ifstream in = open_input_file(path, std::ios::binary);
  std::vector<char> buf(size_t(1) << 20);
  uint64_t h = kFnv1a64Basis;
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    h = fnv1a64(buf.data(), size_t(in.gcount()), h);
  }
  if (in.bad())
    throw InputError(path, "", "read failed");
  return h;
}

std::string fnv1a64_text(uint64_t h)
{
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace eldr
