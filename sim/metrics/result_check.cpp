#include "sim/metrics/result_check.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace eldr {

namespace fs = std::filesystem;

Json read_verified_summary(const std::string& dir)
{
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec))
    throw InputError(dir, "", "not a directory (give a run's output directory)");
  const std::string file = (d / "summary.json").string();
  if (!fs::is_regular_file(file, ec))
    throw InputError(file, "",
                     fs::exists(d / "requests.csv", ec) ? "missing: the run was interrupted or is still running"
                                                        : "missing: not a run's output directory");
  Json j = load_json_file(file);
  if (!j.is_object())
    throw InputError(file, "", "must be a JSON object");
  if (!j.contains("files"))
    return j;
  const Json& files = j["files"];
  if (!files.is_object())
    throw InputError(file, "files", "must be an object");
  for (const auto& [name, rec] : files.items()) {
    const std::string path = (d / name).string();
    if (name.find('/') != std::string::npos || !rec.is_object() || !rec.contains("bytes") || !rec.contains("fnv1a64"))
      throw InputError(file, "files." + name, "must be {\"bytes\": N, \"fnv1a64\": \"hex\"}");
    std::ifstream in(path, std::ios::binary);
    if (!in)
      throw InputError(path, "", "missing, but summary.json lists it: the directory is incomplete");
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    if (Json(s.size()) != rec["bytes"] || Json(fnv1a64_hex(s)) != rec["fnv1a64"])
      throw InputError(path, "",
                       "does not match summary.json (" + std::to_string(s.size()) + " bytes, summary.json records " +
                           rec["bytes"].dump() + " and another checksum): cut short, edited or from another run");
  }
  return j;
}

}  // namespace eldr
