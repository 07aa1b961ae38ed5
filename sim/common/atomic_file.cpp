#include "sim/common/atomic_file.hpp"
#include "sim/common/input_error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace eldr {

std::string atomic_temporary(const std::string& path)
{
  return path + ".tmp." + std::to_string(::getpid());
}

void write_file_atomically(const std::string& path, const std::string& contents)
{
  namespace fs = std::filesystem;
  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      throw InputError(target.parent_path().string(), "", "cannot create directory: " + ec.message());
  }
  std::string tmp = atomic_temporary(path);
  int fd          = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    throw InputError(path, "",
                     std::string("cannot write: ") + std::strerror(errno));  // the file asked for, not its temporary
  const char* p = contents.data();
  size_t left   = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw InputError(path, "", std::string("write failed: ") + std::strerror(err));
    }
    p += n;
    left -= size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw InputError(path, "", std::string("cannot rename into place: ") + std::strerror(err));
  }
}

}  // namespace eldr
