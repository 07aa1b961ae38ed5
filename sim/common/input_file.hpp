#pragma once
// Every reader of a user's file opens it through here, so that a device, FIFO or socket (/dev/zero,
// a named pipe: endless or blocking input) is refused before anything is read, and a file is never
// slurped beyond a limit. Errors are one InputError naming the file: "file not found", "is a
// directory, not a file", "is not a regular file (a device, FIFO or socket): give a file",
// "cannot open: <reason>", or too large (with the limit).
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace eldr {

// Largest file read whole into memory (docs/trace-format.md, section 4): far above any config,
// manifest or requests file, and above the routing files trace gen and the importers write.
inline constexpr uint64_t kMaxInputFileBytes = uint64_t(16) << 30;  // 16 GiB

// InputError unless `path` (symbolic links followed) is an existing regular file.
void check_input_file(const std::string& path);

// The whole file, after check_input_file; an InputError if it holds more than max_bytes.
std::string read_input_file(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);
std::vector<uint8_t> read_input_bytes(const std::string& path, uint64_t max_bytes = kMaxInputFileBytes);

// A stream over the file (for readers that go line by line), after check_input_file.
std::ifstream open_input_file(const std::string& path, std::ios::openmode mode = std::ios::in);

// FNV-1a 64, streaming: fnv1a64(p, n, fnv1a64(q, m)) hashes q then p. fnv1a64_text gives the
// 16 hex digits that trace manifests and caches store (as fnv1a64_hex in result_dir.hpp).
inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Basis);
std::string fnv1a64_text(uint64_t h);
// fnv1a64 of a whole file, read in pieces (after check_input_file).
uint64_t fnv1a64_file(const std::string& path);

}  // namespace eldr
