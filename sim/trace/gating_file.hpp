#pragma once
// The binary routing file of a trace (docs/trace-format.md): per request record, per token (prompt
// tokens first, then output tokens), per MoE layer, the top_k expert ids the router picked, and
// optionally their gate values. Little-endian:
//
//   header (36 bytes)  magic "ELDRRT\0\0", u32 version (1), u16 layers, u16 experts, u16 top_k,
//                      u16 flags (bit 0: gate values present), u64 record count, u64 index offset
//   records            record r at index[r].offset: tokens x layers x top_k ids (u8 when experts <= 256,
//                      else u16), then, with gates, tokens x layers x top_k float32 gate values in the
//                      same order as the ids
//   index              at the index offset, to the end of the file: per record u64 data offset,
//                      u32 prompt tokens, u32 output tokens
//
// The ids of one (token, layer) are distinct and < experts; their order carries no meaning except
// that gate value j belongs to id j.
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace eldr {

inline constexpr uint32_t kRoutingFileVersion   = 1;
inline constexpr size_t kRoutingHeaderBytes     = 36;
inline constexpr size_t kRoutingIndexEntryBytes = 16;

struct GatingHeader {
  int layers            = 0;
  int experts           = 0;
  int top_k             = 0;
  bool gates            = false;
  uint64_t records      = 0;
  uint64_t index_offset = 0;
  int id_bytes() const { return experts <= 256 ? 1 : 2; }
  // Bytes of one token's ids (and gates) over all layers.
  size_t token_bytes() const { return size_t(layers) * size_t(top_k) * (size_t(id_bytes()) + (gates ? 4 : 0)); }
};

struct GatingRecordInfo {
  uint64_t offset        = 0;
  uint32_t prompt_tokens = 0;
  uint32_t output_tokens = 0;
  uint64_t tokens() const { return uint64_t(prompt_tokens) + output_tokens; }
};

// Reader. load() reads the whole file into one buffer and validates everything: magic, version,
// header values, sizes, truncation, offsets, every id < experts, distinct ids per (token, layer),
// finite gate values. Errors are InputError naming the file, the record, token and layer.
class GatingFile {
 public:
  static GatingFile load(const std::string& path);
  // Header and index only (cheap, whatever the file size); the record data is not read or checked.
  static GatingFile load_index(const std::string& path);

  const std::string& path() const { return path_; }
  const GatingHeader& header() const { return header_; }
  size_t records() const { return index_.size(); }
  const GatingRecordInfo& record(size_t r) const { return index_[r]; }
  bool has_data() const { return !data_.empty() || index_.empty(); }
  // FNV-1a 64 of the whole file (what trace.json's routing_fnv1a64 records). Requires load().
  uint64_t checksum() const;

  // The top_k ids of (record, token, layer), in file order. Requires load().
  void ids(size_t record, uint64_t token, int layer, std::span<uint16_t> out) const;
  // Their gate values (requires gates in the file).
  void gates(size_t record, uint64_t token, int layer, std::span<float> out) const;

 private:
  std::string path_;
  GatingHeader header_;
  std::vector<GatingRecordInfo> index_;
  std::vector<uint8_t> data_;  // the whole file (load()) or nothing (load_index())
};

// Streaming writer: records go to a temporary file next to `path` as they come; close() appends the
// index, fills in the header and renames the file into place, so a reader never sees a partial file.
// Destroying an unclosed writer removes the temporary file. Ids and gates are checked as they come
// (InputError naming `path`, record, token and layer).
class GatingWriter {
 public:
  GatingWriter(std::string path, int layers, int experts, int top_k, bool gates);
  ~GatingWriter();
  GatingWriter(const GatingWriter&)            = delete;
  GatingWriter& operator=(const GatingWriter&) = delete;

  // Token by token: begin_record, then prompt_tokens + output_tokens calls of add_token (ids:
  // layers x top_k, layer-major; gates the same size, or empty when the file has none), then end_record.
  void begin_record(uint32_t prompt_tokens, uint32_t output_tokens);
  void add_token(std::span<const uint16_t> ids, std::span<const float> gates = {});
  // Returns the record's index (what requests.jsonl's "routing_record" refers to).
  uint32_t end_record();
  // A whole record at once: ids of all tokens (tokens x layers x top_k), gates likewise or empty.
  uint32_t add_record(uint32_t prompt_tokens, uint32_t output_tokens, std::span<const uint16_t> ids,
                      std::span<const float> gates = {});
  // Same from u8 ids (experts <= 256).
  uint32_t add_record_u8(uint32_t prompt_tokens, uint32_t output_tokens, std::span<const uint8_t> ids);

  void close();
  uint64_t records() const { return index_.size(); }
  uint64_t bytes_written() const { return pos_; }

 private:
  void write(const void* p, size_t n);
  [[noreturn]] void fail(const std::string& field, const std::string& problem);
  std::string path_, tmp_;
  GatingHeader header_;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;
  std::vector<GatingRecordInfo> index_;
  bool in_record_ = false;
  uint64_t token_ = 0;  // tokens added to the open record
  std::vector<float> record_gates_;
  std::vector<uint8_t> buf_;
  std::vector<uint32_t> seen_;  // per expert: stamp of the last group that used it
  uint32_t stamp_ = 0;
};

}  // namespace eldr
