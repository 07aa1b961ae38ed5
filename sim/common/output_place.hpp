#pragma once
// Where a command may write: one rule for every output (docs/outputs.md).
//   - An output is never one of the command's inputs, nor a directory above or inside one.
//   - A directory an output replaces whole is absent, empty, or eldr-sim's own output of that kind:
//     it holds that kind's marker file, which eldr-sim writes into every such directory it makes
//     (the analysis scripts write the report's and validate's: analysis/eldr_common.py).
// Both are checked before any long work, so a refused output costs nothing and destroys nothing.
#include <string>
#include <vector>

namespace eldr {

// A file or directory the command reads, and what it is to the user ("the measured data").
struct CommandInput {
  std::string path;
  std::string what;
};

// The marker files of the directories an output replaces whole (analysis/eldr_common.py names the same).
inline constexpr const char kReportMarker[]   = ".eldrsim-report";    // eldrsim report
inline constexpr const char kValidateMarker[] = ".eldrsim-validate";  // eldrsim validate
inline constexpr const char kPointMarker[]    = "point.json";         // one point of eldrsim sweep

// An InputError "OUTPUT: OPTION: ..." when `output` is one of `inputs` (the same file, through a
// symbolic link or a hard link too), a directory above one, or lies inside one. Paths are compared
// absolute, with symbolic links and ".." resolved as far as they exist.
void check_output_apart(const std::string& output, const std::string& option, const std::vector<CommandInput>& inputs);

// An InputError "DIR: OPTION: ..." naming the fix when `dir` exists and is neither an empty directory
// nor one holding `marker` (then it is `noun` that eldr-sim wrote, and may be replaced).
void check_replaceable_directory(const std::string& dir, const std::string& option, const std::string& marker,
                                 const std::string& noun);

// Whether `dir` is a directory holding `marker` (eldr-sim's own output of that kind).
bool holds_marker(const std::string& dir, const std::string& marker);

}  // namespace eldr
