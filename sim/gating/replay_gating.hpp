#pragma once
// Replays a trace's routing file: token t of request r picks the experts that the routing file's
// record r.routing_record holds for its token t (prompt tokens 0..P-1, then output tokens). A request
// may be shorter than its record (it then uses the record's leading prompt and output tokens); the
// routing of its last output token may be missing, since that token is sampled, never fed.
//
// All tokens' masks are built at construction (GatingShape::words() 64-bit words a token: 208 bytes
// for DeepSeek-V2-Lite's 26 layers x 64 experts, 768 bytes for Qwen3-30B-A3B's 48 x 128), so the hot
// path is a pointer into one buffer. The file buffer is released after that; only the masks, and the
// gate values when the file has them (4 x layers x top_k bytes a token), stay in memory.
#include "sim/gating/gating_source.hpp"
#include "sim/trace/gating_file.hpp"

#include <span>
#include <string>
#include <vector>

namespace eldr {

struct Experiment;

class ReplayGating : public GatingSource {
 public:
  explicit ReplayGating(const GatingFile& file);
  // Loads and validates the file.
  explicit ReplayGating(const std::string& routing_file);

  const GatingShape& shape() const override { return shape_; }
  std::span<const uint64_t> token_experts(const Request& r, int token) const override;
  void accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const override;

  bool has_gates() const { return !gates_.empty(); }
  // The top_k ids of token `token` at `layer`, ascending (the file's order is not kept).
  void token_ids(const Request& r, int token, int layer, std::span<uint16_t> out) const;
  // Gate values of token `token`: layers x top_k floats, layer-major, each layer's in the order of
  // token_ids (ascending expert id). Empty when the file has no gates.
  std::span<const float> token_gates(const Request& r, int token) const;

  size_t records() const { return record_start_.size(); }
  uint32_t record_prompt_tokens(size_t record) const { return record_prompt_[record]; }
  uint32_t record_output_tokens(size_t record) const { return record_output_[record]; }
  // InputError (naming `file` and `field`) unless `r` has a record of at least its prompt length and
  // its output length less one.
  void check_request(const Request& r, const std::string& file, const std::string& field) const;
  size_t memory_bytes() const { return masks_.capacity() * 8 + gates_.capacity() * 4; }

 private:
  size_t token_index(const Request& r, int token) const;
  GatingShape shape_;
  std::vector<uint64_t> masks_;         // per token of every record: shape_.words() words
  std::vector<float> gates_;            // per token: layers x top_k, ascending id order per layer
  std::vector<uint64_t> record_start_;  // first token of each record
  std::vector<uint32_t> record_prompt_;
  std::vector<uint32_t> record_output_;
};

// The routing of an experiment's trace (workload.routing "trace"): its manifest's routing file,
// after checking that the trace's model matches the experiment's (InputError naming both files) and
// that every request of `w` (served and calibration) has a record long enough for it.
ReplayGating load_replay_gating(const Experiment& x, const Workload& w);

}  // namespace eldr
