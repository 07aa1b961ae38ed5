#pragma once
// Reading a run directory back (table, compare): summary.json must be there and every file it
// records (files: name -> bytes, fnv1a64) must match, so a half-written or mixed directory is an
// error rather than a silently wrong answer.
#include "sim/common/json_reader.hpp"

#include <string>

namespace eldr {

// DIR/summary.json, after checking the files it lists. Summaries from before the "files" record
// are read as they are. InputError naming the file at fault otherwise.
Json read_verified_summary(const std::string& dir);

}  // namespace eldr
