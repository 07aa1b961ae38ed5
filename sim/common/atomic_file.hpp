#pragma once
// Results are written to a temporary file in the same directory and renamed into place, so a reader
// never sees a half-written file and an interrupted run leaves the previous result intact.
#include <string>

namespace eldr {

void write_file_atomically(const std::string& path, const std::string& contents);

// The temporary write_file_atomically(path, ...) writes before the rename (PATH.tmp.PID): for an
// InterruptNote (result_dir.hpp) to remove.
std::string atomic_temporary(const std::string& path);

}  // namespace eldr
