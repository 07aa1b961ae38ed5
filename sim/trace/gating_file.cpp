#include "sim/trace/gating_file.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace eldr {

namespace {

constexpr char kMagic[8] = {'E', 'L', 'D', 'R', 'R', 'T', '\0', '\0'};

uint64_t get_le(const uint8_t* p, int bytes)
{
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

void put_le(uint8_t* p, uint64_t v, int bytes)
{
  for (int i = 0; i < bytes; ++i, v >>= 8)
    p[i] = uint8_t(v);
}

std::string record_field(uint64_t record, uint64_t token, int layer)
{
  return "record " + std::to_string(record) + ": token " + std::to_string(token) + " layer " + std::to_string(layer);
}

// Parses and checks the header against the file size. `bytes` holds at least kRoutingHeaderBytes.
GatingHeader parse_header(const std::string& path, const uint8_t* bytes, uint64_t file_size)
{
  if (std::memcmp(bytes, kMagic, 8) != 0)
    throw InputError(path, "header", "not an eldr routing file (bad magic; expected \"ELDRRT\")");
  const uint32_t version = uint32_t(get_le(bytes + 8, 4));
  if (version != kRoutingFileVersion)
    throw InputError(path, "header",
                     "version " + std::to_string(version) + " is not supported (this eldrsim reads version " +
                         std::to_string(kRoutingFileVersion) + ")");
  GatingHeader h;
  h.layers             = int(get_le(bytes + 12, 2));
  h.experts            = int(get_le(bytes + 14, 2));
  h.top_k              = int(get_le(bytes + 16, 2));
  const unsigned flags = unsigned(get_le(bytes + 18, 2));
  h.gates              = flags & 1u;
  h.records            = get_le(bytes + 20, 8);
  h.index_offset       = get_le(bytes + 28, 8);
  if (h.layers < 1)
    throw InputError(path, "header", "layers must be at least 1");
  if (h.experts < 1)
    throw InputError(path, "header", "experts must be at least 1");
  if (h.top_k < 1 || h.top_k > h.experts)
    throw InputError(path, "header",
                     "top_k " + std::to_string(h.top_k) + " must be between 1 and experts (" +
                         std::to_string(h.experts) + ")");
  if (flags & ~1u)
    throw InputError(
        path, "header", "unknown flags 0x" + [&] {
          char b[8];
          std::snprintf(b, sizeof b, "%x", flags);
          return std::string(b);
        }());
  if (h.index_offset < kRoutingHeaderBytes || h.index_offset > file_size)
    throw InputError(path, "header",
                     "index offset " + std::to_string(h.index_offset) + " outside the file (" +
                         std::to_string(file_size) + " bytes): truncated or corrupt");
  const uint64_t index_room = file_size - h.index_offset;
  if (h.records > index_room / kRoutingIndexEntryBytes)
    throw InputError(path, "index",
                     "truncated: " + std::to_string(h.records) + " records need " +
                         std::to_string((unsigned __int128)h.records * kRoutingIndexEntryBytes > ~0ULL
                                            ? ~0ULL
                                            : h.records * kRoutingIndexEntryBytes) +
                         " index bytes at offset " + std::to_string(h.index_offset) + ", the file has " +
                         std::to_string(index_room));
  if (index_room != h.records * kRoutingIndexEntryBytes)
    throw InputError(path, "index",
                     std::to_string(index_room - h.records * kRoutingIndexEntryBytes) +
                         " unexpected bytes after the index (corrupt, or not written by a v1 writer)");
  return h;
}

std::vector<GatingRecordInfo> parse_index(const std::string& path, const GatingHeader& h, const uint8_t* index)
{
  std::vector<GatingRecordInfo> out(size_t(h.records));
  const unsigned __int128 token_bytes = h.token_bytes();
  for (uint64_t r = 0; r < h.records; ++r) {
    const uint8_t* e        = index + r * kRoutingIndexEntryBytes;
    GatingRecordInfo& info  = out[size_t(r)];
    info.offset             = get_le(e, 8);
    info.prompt_tokens      = uint32_t(get_le(e + 8, 4));
    info.output_tokens      = uint32_t(get_le(e + 12, 4));
    const std::string field = "record " + std::to_string(r);
    if (info.prompt_tokens < 1)
      throw InputError(path, field, "prompt_tokens must be at least 1");
    const unsigned __int128 end = (unsigned __int128)info.offset + token_bytes * info.tokens();
    if (info.offset < kRoutingHeaderBytes || end > h.index_offset)
      throw InputError(path, field,
                       "data [" + std::to_string(info.offset) + ", " +
                           std::to_string(uint64_t(std::min<unsigned __int128>(end, ~0ULL))) +
                           ") lies outside the record area [" + std::to_string(kRoutingHeaderBytes) + ", " +
                           std::to_string(h.index_offset) + ")");
  }
  return out;
}

}  // namespace

GatingFile GatingFile::load_index(const std::string& path)
{
  check_input_file(path);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec)
    throw InputError(path, "", "cannot open routing file: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, "", "cannot open routing file");
  if (size < kRoutingHeaderBytes)
    throw InputError(path, "header",
                     "truncated: " + std::to_string(size) + " bytes, the header alone takes " +
                         std::to_string(kRoutingHeaderBytes));
  uint8_t head[kRoutingHeaderBytes];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  GatingFile f;
  f.path_   = path;
  f.header_ = parse_header(path, head, size);
  std::vector<uint8_t> index(size_t(f.header_.records * kRoutingIndexEntryBytes));
  in.seekg(std::streamoff(f.header_.index_offset));
  in.read(reinterpret_cast<char*>(index.data()), std::streamsize(index.size()));
  if (!in)
    throw InputError(path, "index", "read failed");
  f.index_ = parse_index(path, f.header_, index.data());
  return f;
}

GatingFile GatingFile::load(const std::string& path)
{
  GatingFile f;
  f.path_         = path;
  f.data_         = read_input_bytes(path);
  const auto size = uint64_t(f.data_.size());
  if (size < kRoutingHeaderBytes)
    throw InputError(path, "header",
                     "truncated: " + std::to_string(size) + " bytes, the header alone takes " +
                         std::to_string(kRoutingHeaderBytes));
  f.header_     = parse_header(path, f.data_.data(), size);
  f.index_      = parse_index(path, f.header_, f.data_.data() + f.header_.index_offset);
  const auto& h = f.header_;
  const int k   = h.top_k;
  const int idb = h.id_bytes();
  std::vector<uint32_t> seen(size_t(h.experts), 0);
  uint32_t stamp = 0;
  for (size_t r = 0; r < f.index_.size(); ++r) {
    const GatingRecordInfo& info = f.index_[r];
    const uint8_t* p             = f.data_.data() + info.offset;
    for (uint64_t t = 0; t < info.tokens(); ++t)
      for (int l = 0; l < h.layers; ++l) {
        if (++stamp == 0) {
          std::fill(seen.begin(), seen.end(), 0);
          stamp = 1;
        }
        for (int j = 0; j < k; ++j, p += idb) {
          const unsigned id = unsigned(get_le(p, idb));
          if (id >= unsigned(h.experts))
            throw InputError(path, record_field(r, t, l),
                             "expert id " + std::to_string(id) + " >= " + std::to_string(h.experts));
          if (seen[id] == stamp)
            throw InputError(path, record_field(r, t, l), "expert id " + std::to_string(id) + " appears twice");
          seen[id] = stamp;
        }
      }
    if (h.gates)
      for (uint64_t t = 0; t < info.tokens(); ++t)
        for (int l = 0; l < h.layers; ++l)
          for (int j = 0; j < k; ++j, p += 4) {
            const float g = std::bit_cast<float>(uint32_t(get_le(p, 4)));
            if (!std::isfinite(g))
              throw InputError(path, record_field(r, t, l), "gate value " + std::to_string(g) + " is not finite");
          }
  }
  return f;
}

uint64_t GatingFile::checksum() const
{
  return fnv1a64(data_.data(), data_.size());
}

void GatingFile::ids(size_t record, uint64_t token, int layer, std::span<uint16_t> out) const
{
  const GatingRecordInfo& info = index_[record];
  const int idb                = header_.id_bytes();
  const uint8_t* p             = data_.data() + info.offset +
                     ((token * uint64_t(header_.layers) + uint64_t(layer)) * uint64_t(header_.top_k)) * uint64_t(idb);
  for (int j = 0; j < header_.top_k; ++j, p += idb)
    out[size_t(j)] = uint16_t(get_le(p, idb));
}

void GatingFile::gates(size_t record, uint64_t token, int layer, std::span<float> out) const
{
  const GatingRecordInfo& info = index_[record];
  const uint64_t group         = uint64_t(header_.layers) * uint64_t(header_.top_k);
  const uint8_t* p             = data_.data() + info.offset + info.tokens() * group * uint64_t(header_.id_bytes()) +
                     (token * uint64_t(header_.layers) + uint64_t(layer)) * uint64_t(header_.top_k) * 4;
  for (int j = 0; j < header_.top_k; ++j, p += 4)
    out[size_t(j)] = std::bit_cast<float>(uint32_t(get_le(p, 4)));
}

// ---------------------------------------------------------------------------------------------- writer

GatingWriter::GatingWriter(std::string path, int layers, int experts, int top_k, bool gates) : path_(std::move(path))
{
  if (layers < 1 || layers > 65535 || experts < 1 || experts > 65535 || top_k < 1 || top_k > experts)
    throw InputError(path_, "header",
                     "layers, experts and top_k must be 1..65535 with top_k <= experts (got " + std::to_string(layers) +
                         ", " + std::to_string(experts) + ", " + std::to_string(top_k) + ")");
  header_.layers  = layers;
  header_.experts = experts;
  header_.top_k   = top_k;
  header_.gates   = gates;
  seen_.assign(size_t(experts), 0);
  std::filesystem::path target(path_);
  std::error_code ec;
  if (target.has_parent_path())
    std::filesystem::create_directories(target.parent_path(), ec);
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  f_   = std::fopen(tmp_.c_str(), "wb");
  if (!f_)
    throw InputError(tmp_, "", std::string("cannot write: ") + std::strerror(errno));
  uint8_t zeros[kRoutingHeaderBytes] = {};
  write(zeros, sizeof zeros);  // the real header goes in at close()
}

GatingWriter::~GatingWriter()
{
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void GatingWriter::write(const void* p, size_t n)
{
  if (n && std::fwrite(p, 1, n, f_) != n)
    fail("", std::string("write failed: ") + std::strerror(errno));
  pos_ += n;
}

void GatingWriter::fail(const std::string& field, const std::string& problem)
{
  throw InputError(path_, field, problem);
}

void GatingWriter::begin_record(uint32_t prompt_tokens, uint32_t output_tokens)
{
  if (!f_)
    fail("", "writer is closed");
  if (in_record_)
    fail("record " + std::to_string(index_.size()), "begin_record before the previous record ended");
  if (prompt_tokens < 1)
    fail("record " + std::to_string(index_.size()), "prompt_tokens must be at least 1");
  index_.push_back({pos_, prompt_tokens, output_tokens});
  in_record_ = true;
  token_     = 0;
  record_gates_.clear();
}

void GatingWriter::add_token(std::span<const uint16_t> ids, std::span<const float> gates)
{
  const uint64_t r   = index_.size() - 1;
  const size_t group = size_t(header_.layers) * size_t(header_.top_k);
  if (!in_record_)
    fail("record " + std::to_string(index_.size()), "add_token outside a record");
  if (token_ >= index_.back().tokens())
    fail("record " + std::to_string(r),
         "more tokens than prompt_tokens + output_tokens (" + std::to_string(index_.back().tokens()) + ")");
  if (ids.size() != group)
    fail("record " + std::to_string(r) + ": token " + std::to_string(token_),
         "expected " + std::to_string(group) + " ids (layers x top_k), got " + std::to_string(ids.size()));
  if (header_.gates ? gates.size() != group : !gates.empty())
    fail("record " + std::to_string(r) + ": token " + std::to_string(token_),
         header_.gates ? "expected " + std::to_string(group) + " gate values, got " + std::to_string(gates.size())
                       : std::string("gate values given but the file was opened without gates"));
  const int idb = header_.id_bytes();
  buf_.resize(group * size_t(idb));
  for (int l = 0; l < header_.layers; ++l) {
    if (++stamp_ == 0) {
      std::fill(seen_.begin(), seen_.end(), 0);
      stamp_ = 1;
    }
    for (int j = 0; j < header_.top_k; ++j) {
      const size_t i    = size_t(l) * size_t(header_.top_k) + size_t(j);
      const unsigned id = ids[i];
      if (id >= unsigned(header_.experts))
        fail(record_field(r, token_, l), "expert id " + std::to_string(id) + " >= " + std::to_string(header_.experts));
      if (seen_[id] == stamp_)
        fail(record_field(r, token_, l), "expert id " + std::to_string(id) + " appears twice");
      seen_[id] = stamp_;
      if (header_.gates && !std::isfinite(gates[i]))
        fail(record_field(r, token_, l), "gate value is not finite");
      put_le(&buf_[i * size_t(idb)], id, idb);
    }
  }
  write(buf_.data(), buf_.size());
  record_gates_.insert(record_gates_.end(), gates.begin(), gates.end());
  ++token_;
}

uint32_t GatingWriter::end_record()
{
  if (!in_record_)
    fail("record " + std::to_string(index_.size()), "end_record without begin_record");
  const uint64_t r = index_.size() - 1;
  if (token_ != index_.back().tokens())
    fail("record " + std::to_string(r), std::to_string(token_) + " tokens added, prompt_tokens + output_tokens = " +
                                            std::to_string(index_.back().tokens()));
  if (header_.gates) {
    buf_.resize(record_gates_.size() * 4);
    for (size_t i = 0; i < record_gates_.size(); ++i)
      put_le(&buf_[i * 4], std::bit_cast<uint32_t>(record_gates_[i]), 4);
    write(buf_.data(), buf_.size());
  }
  in_record_ = false;
  if (r > UINT32_MAX)
    fail("record " + std::to_string(r), "too many records");
  return uint32_t(r);
}

uint32_t GatingWriter::add_record(uint32_t prompt_tokens, uint32_t output_tokens, std::span<const uint16_t> ids,
                                  std::span<const float> gates)
{
  const size_t group  = size_t(header_.layers) * size_t(header_.top_k);
  const uint64_t toks = uint64_t(prompt_tokens) + output_tokens;
  if (ids.size() != toks * group || (header_.gates && gates.size() != toks * group))
    fail("record " + std::to_string(index_.size()),
         "add_record: expected " + std::to_string(toks * group) + " ids" + (header_.gates ? " and gate values" : "") +
             " for " + std::to_string(toks) + " tokens, got " + std::to_string(ids.size()));
  begin_record(prompt_tokens, output_tokens);
  for (uint64_t t = 0; t < toks; ++t)
    add_token(ids.subspan(t * group, group),
              header_.gates ? gates.subspan(t * group, group) : std::span<const float>{});
  return end_record();
}

uint32_t GatingWriter::add_record_u8(uint32_t prompt_tokens, uint32_t output_tokens, std::span<const uint8_t> ids)
{
  std::vector<uint16_t> wide(ids.begin(), ids.end());
  return add_record(prompt_tokens, output_tokens, wide);
}

void GatingWriter::close()
{
  if (!f_)
    return;
  if (in_record_)
    fail("record " + std::to_string(index_.size() - 1), "close() inside an unfinished record");
  header_.records      = index_.size();
  header_.index_offset = pos_;
  std::vector<uint8_t> index(index_.size() * kRoutingIndexEntryBytes);
  for (size_t r = 0; r < index_.size(); ++r) {
    uint8_t* e = &index[r * kRoutingIndexEntryBytes];
    put_le(e, index_[r].offset, 8);
    put_le(e + 8, index_[r].prompt_tokens, 4);
    put_le(e + 12, index_[r].output_tokens, 4);
  }
  write(index.data(), index.size());
  uint8_t head[kRoutingHeaderBytes];
  std::memcpy(head, kMagic, 8);
  put_le(head + 8, kRoutingFileVersion, 4);
  put_le(head + 12, uint64_t(header_.layers), 2);
  put_le(head + 14, uint64_t(header_.experts), 2);
  put_le(head + 16, uint64_t(header_.top_k), 2);
  put_le(head + 18, header_.gates ? 1 : 0, 2);
  put_le(head + 20, header_.records, 8);
  put_le(head + 28, header_.index_offset, 8);
  if (std::fseek(f_, 0, SEEK_SET) != 0 || std::fwrite(head, 1, sizeof head, f_) != sizeof head || std::fflush(f_) != 0)
    fail("", std::string("write failed: ") + std::strerror(errno));
  ::fsync(::fileno(f_));
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    fail("", std::string("cannot rename into place: ") + std::strerror(err));
  }
}

}  // namespace eldr
