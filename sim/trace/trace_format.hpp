#pragma once
// A trace directory (docs/trace-format.md, version 1):
//   trace.json      manifest: format, version, model (or null), labels, routing file (or null),
//                   prefix block size (or null), source (free-text provenance), request count and
//                   checksums of the other files
//   requests.jsonl  one request per line: id, arrival_s, prompt_tokens, output_tokens, label,
//                   optional calibration, prefix_hashes, routing_record
//   routing.bin     optional per-token expert routing (sim/trace/gating_file.hpp)
// Readers validate everything and throw InputError naming the file, the record ("line 17:
// prompt_tokens") and the problem. Writers validate the same rules before writing anything, and
// write each file atomically (trace.json last, so an interrupted write never looks like a trace).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace eldr {

inline constexpr int kTraceFormatVersion        = 1;
inline constexpr const char* kTraceManifestName = "trace.json";
inline constexpr const char* kTraceRequestsName = "requests.jsonl";

struct TraceModel {
  std::string name;
  int layers  = 0;
  int experts = 0;
  int top_k   = 0;
};

struct TraceManifest {
  std::optional<TraceModel> model;  // the model whose routing the routing file holds (null without one)
  std::vector<std::string> labels;  // request labels; requests refer to them by name
  std::string routing_file;         // relative to the trace directory; empty: no routing
  int prefix_block_tokens = 0;      // tokens per prefix_hashes block; 0: requests carry no hashes
  std::string source;               // provenance, free text
  // What the writer wrote, so that a file cut or edited afterwards is caught (older traces lack
  // them and are read unchecked): the request count and FNV-1a 64 (16 hex digits) of
  // requests.jsonl, and of the routing file when there is one. Empty/-1: not recorded.
  long request_count = -1;
  std::string requests_fnv1a64;
  std::string routing_fnv1a64;
};

struct TraceRequest {
  uint32_t id       = 0;  // 0..n-1 in file order
  double arrival_s  = 0;  // seconds, non-decreasing
  int prompt_tokens = 0;  // >= 1
  int output_tokens = 0;  // >= 2: the first is sampled by prefill, the rest by decode steps
  uint16_t label    = 0;  // index into TraceManifest::labels
  bool calibration  = false;
  std::vector<uint64_t> prefix_hashes;  // block hashes of the prompt, leading block first
  int32_t routing_record = -1;          // record in the routing file, -1 without one
};

struct Trace {
  std::string dir;
  TraceManifest manifest;
  std::vector<TraceRequest> requests;
  std::string manifest_path() const;
  std::string requests_path() const;
  std::string routing_path() const;  // empty without a routing file
};

TraceManifest read_trace_manifest(const std::string& path);
std::vector<TraceRequest> read_trace_requests(const std::string& path, const TraceManifest& manifest);
// Manifest and requests, and, with a routing file, its header and index checked against both: the
// model dimensions, every routing_record in range, with the request's prompt length and its output
// length or one less (the last output token is never fed through the model, so engines cannot
// record its routing). The record data is not read (ReplayGating does that, and
// check_routing_checksum checks it).
Trace read_trace(const std::string& dir);
// InputError naming `routing_path` when the manifest records a checksum of the routing file that
// `checksum` (fnv1a64 of its bytes) is not: the file was cut or edited.
void check_routing_checksum(const TraceManifest& manifest, const std::string& routing_path, uint64_t checksum);

// Writes requests.jsonl then trace.json into `dir` (created if needed), after checking the requests
// against the manifest with the reader's rules (and against the routing file if it already exists in
// `dir`). The manifest records the request count and the files' checksums (the given manifest's are
// ignored). Returns nothing; throws InputError naming the target file on a rule violation. Callers
// writing a trace for a user write into a StagedTrace's directory (trace_staging.hpp).
// named_dir: the directory the errors name, when `dir` is a staging directory (its target).
void write_trace(const std::string& dir, const TraceManifest& manifest, const std::vector<TraceRequest>& requests,
                 const std::string& named_dir = "");

}  // namespace eldr
