#include "sim/common/output_place.hpp"
#include "sim/common/input_error.hpp"

#include <filesystem>

namespace eldr {

namespace fs = std::filesystem;

namespace {

// Absolute, with symbolic links and "." / ".." resolved as far as the path exists.
fs::path resolved(const std::string& p)
{
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  if (ec)
    a = fs::path(p);
  fs::path c = fs::weakly_canonical(a, ec);
  return (ec ? a.lexically_normal() : c);
}

// `inner` is `outer` or lies below it (component by component: /a/bc is not below /a/b).
bool within(const fs::path& inner, const fs::path& outer)
{
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty() && std::next(o) == outer.end())
      break;  // a trailing separator
    if (i == inner.end() || *i != *o)
      return false;
  }
  return true;
}

}  // namespace

void check_output_apart(const std::string& output, const std::string& option, const std::vector<CommandInput>& inputs)
{
  const fs::path out = resolved(output);
  std::error_code ec;
  for (const auto& in : inputs) {
    if (in.path.empty())
      continue;
    const fs::path p = resolved(in.path);
    const bool same =
        out == p || (fs::exists(output, ec) && fs::exists(in.path, ec) && fs::equivalent(output, in.path, ec));
    const char* where = same ? "is" : within(p, out) ? "holds" : within(out, p) ? "lies inside" : nullptr;
    if (!where)
      continue;
    throw InputError(output, option,
                     std::string(where) + " an input of this command, " + in.what + " (" + in.path +
                         "): give a path apart from the inputs");
  }
}

bool holds_marker(const std::string& dir, const std::string& marker)
{
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(fs::path(dir) / marker, ec);
}

void check_replaceable_directory(const std::string& dir, const std::string& option, const std::string& marker,
                                 const std::string& noun)
{
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (st.type() == fs::file_type::not_found)
    return;
  if (st.type() == fs::file_type::symlink)
    throw InputError(dir, option,
                     "is a symbolic link; eldr-sim replaces a directory whole and does not follow it: give the "
                     "directory itself or a new path");
  if (st.type() != fs::file_type::directory)
    throw InputError(dir, option, "exists and is not a directory: give a directory to write " + noun + " in");
  if (holds_marker(dir, marker))
    return;
  if (fs::is_empty(dir, ec) && !ec)
    return;
  throw InputError(dir, option,
                   "exists and is not " + noun + " eldr-sim wrote (no " + marker +
                       " in it) and would be replaced whole: move it away, or give another path");
}

}  // namespace eldr
