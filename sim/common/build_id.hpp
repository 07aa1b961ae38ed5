#pragma once
// The running executable's GNU build ID: the linker's hash of the linked program, so it changes with
// any change to the code. Caches that outlive a process key their files with it.
#include <string>

namespace eldr {

// Lower-case hex; empty when the executable carries no build-ID note (linked without --build-id).
const std::string& executable_build_id();

// The project's version (CMakeLists.txt's project VERSION).
const char* eldrsim_version();

}  // namespace eldr
