#pragma once
// Results are written to a temporary file in the same directory and renamed into place, so a reader
// never sees a half-written file and an interrupted run leaves the previous result intact.
#include <string>

namespace eldr {

void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace eldr
