// Routing file (sim/trace/gating_file.hpp): byte layout, round trip, and every validation error.
#include "sim/common/input_error.hpp"
#include "sim/trace/gating_file.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <vector>

using namespace eldr;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& tag)
  {
    dir = fs::temp_directory_path() / ("eldr-rt-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

std::vector<uint8_t> read_bytes(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b)
{
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

uint64_t le(const std::vector<uint8_t>& b, size_t at, int n)
{
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | b[at + size_t(i)];
  return v;
}

void put(std::vector<uint8_t>& b, size_t at, uint64_t v, int n)
{
  for (int i = 0; i < n; ++i, v >>= 8)
    b.at(at + size_t(i)) = uint8_t(v);
}

// 2 layers, 8 experts, top-2, no gates: record 0 has 2 prompt + 2 output tokens, record 1 has 1 + 2.
const std::vector<uint16_t> kRec0 = {0, 1, 2, 3,  /* token 0: layer 0 {0,1}, layer 1 {2,3} */
                                     7, 6, 5, 4,  /* token 1 */
                                     1, 0, 3, 2,  /* token 2 (output) */
                                     4, 0, 0, 4}; /* token 3 (output) */
const std::vector<uint16_t> kRec1 = {3, 5, 6, 2, 0, 7, 1, 6, 2, 4, 5, 3};

std::string write_small(const Scratch& s, const std::string& name = "routing.bin")
{
  GatingWriter w(s.file(name), 2, 8, 2, false);
  CHECK(w.add_record(2, 2, kRec0) == 0);
  CHECK(w.add_record(1, 2, kRec1) == 1);
  w.close();
  return s.file(name);
}

std::string error_of(const std::string& path)
{
  try {
    GatingFile::load(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("routing file: the bytes on disk follow the documented layout")
{
  Scratch s("layout");
  const auto path = write_small(s);
  const auto b    = read_bytes(path);
  // 36 header bytes + (16 + 12) records x 2 ids of 1 byte x 2 layers... = 4*2*2 + 3*2*2 = 28 bytes + 2 x 16 index
  // bytes.
  REQUIRE(b.size() == 36 + 28 + 32);
  CHECK(std::memcmp(b.data(), "ELDRRT\0\0", 8) == 0);
  CHECK(le(b, 8, 4) == 1);    // version
  CHECK(le(b, 12, 2) == 2);   // layers
  CHECK(le(b, 14, 2) == 8);   // experts
  CHECK(le(b, 16, 2) == 2);   // top_k
  CHECK(le(b, 18, 2) == 0);   // flags
  CHECK(le(b, 20, 8) == 2);   // records
  CHECK(le(b, 28, 8) == 64);  // index offset
  // Record 0 data right after the header, ids as u8 in token, layer, rank order.
  for (size_t i = 0; i < kRec0.size(); ++i)
    CHECK(b[36 + i] == kRec0[i]);
  CHECK(le(b, 64, 8) == 36);  // index[0]: offset, prompt, output
  CHECK(le(b, 72, 4) == 2);
  CHECK(le(b, 76, 4) == 2);
  CHECK(le(b, 80, 8) == 52);  // index[1]
  CHECK(le(b, 88, 4) == 1);
  CHECK(le(b, 92, 4) == 2);
  CHECK_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST_CASE("routing file: round trip of ids (u8 and u16) and gate values")
{
  Scratch s("roundtrip");
  SUBCASE("u8 ids, no gates")
  {
    GatingFile f = GatingFile::load(write_small(s));
    CHECK(f.header().layers == 2);
    CHECK(f.header().experts == 8);
    CHECK(f.header().top_k == 2);
    CHECK_FALSE(f.header().gates);
    REQUIRE(f.records() == 2);
    CHECK(f.record(0).prompt_tokens == 2);
    CHECK(f.record(0).output_tokens == 2);
    CHECK(f.record(1).prompt_tokens == 1);
    CHECK(f.record(1).output_tokens == 2);
    uint16_t ids[2];
    f.ids(0, 1, 0, ids);
    CHECK(ids[0] == 7);
    CHECK(ids[1] == 6);
    f.ids(0, 3, 1, ids);
    CHECK(ids[0] == 0);
    CHECK(ids[1] == 4);
    f.ids(1, 2, 1, ids);
    CHECK(ids[0] == 5);
    CHECK(ids[1] == 3);
  }
  SUBCASE("u16 ids (more than 256 experts) with gates")
  {
    const std::string path = s.file("wide.bin");
    GatingWriter w(path, 1, 300, 3, true);
    w.begin_record(1, 2);
    const uint16_t t0[] = {299, 0, 256}, t1[] = {1, 2, 3}, t2[] = {257, 258, 5};
    const float g0[] = {0.5f, 0.25f, 0.125f}, g1[] = {-1.5f, 2.0f, 0.0f}, g2[] = {0.1f, 0.2f, 0.3f};
    w.add_token(t0, g0);
    w.add_token(t1, g1);
    w.add_token(t2, g2);
    CHECK(w.end_record() == 0);
    w.close();
    const auto b = read_bytes(path);
    CHECK(le(b, 18, 2) == 1);                    // gates flag
    CHECK(b.size() == 36 + 9 * 2 + 9 * 4 + 16);  // u16 ids, then float gates, then the index
    CHECK(le(b, 36, 2) == 299);                  // first id, little-endian u16
    GatingFile f = GatingFile::load(path);
    CHECK(f.header().id_bytes() == 2);
    uint16_t ids[3];
    float g[3];
    f.ids(0, 0, 0, ids);
    CHECK(ids[0] == 299);
    CHECK(ids[1] == 0);
    CHECK(ids[2] == 256);
    f.ids(0, 2, 0, ids);
    CHECK(ids[0] == 257);
    f.gates(0, 1, 0, g);
    CHECK(g[0] == -1.5f);
    CHECK(g[1] == 2.0f);
    CHECK(g[2] == 0.0f);
    f.gates(0, 2, 0, g);
    CHECK(g[2] == 0.3f);
  }
  SUBCASE("load_index reads the header and index only")
  {
    GatingFile f = GatingFile::load_index(write_small(s));
    CHECK(f.records() == 2);
    CHECK(f.record(1).offset == 52);
  }
}

TEST_CASE("routing file: validation errors name the file, the record and the problem")
{
  Scratch s("errors");
  const auto good       = read_bytes(write_small(s));
  const std::string bad = s.file("bad.bin");
  auto with             = [&](auto mutate) {
    auto b = good;
    mutate(b);
    write_bytes(bad, b);
    return error_of(bad);
  };
  SUBCASE("truncated inside the header")
  {
    const auto e = with([](auto& b) { b.resize(20); });
    CHECK(e.find("bad.bin: header: truncated: 20 bytes") != std::string::npos);
  }
  SUBCASE("truncated inside the index")
  {
    const auto e = with([](auto& b) { b.resize(b.size() - 5); });
    CHECK(e.find("bad.bin: index: truncated") != std::string::npos);
  }
  SUBCASE("truncated record area: the index offset points past the end")
  {
    const auto e = with([](auto& b) { b.resize(50); });
    CHECK(e.find("bad.bin: header: index offset 64 outside the file (50 bytes)") != std::string::npos);
  }
  SUBCASE("trailing bytes")
  {
    const auto e = with([](auto& b) { b.push_back(0); });
    CHECK(e.find("1 unexpected bytes after the index") != std::string::npos);
  }
  SUBCASE("bad magic")
  {
    const auto e = with([](auto& b) { b[0] = 'X'; });
    CHECK(e.find("bad.bin: header: not an eldr routing file (bad magic") != std::string::npos);
  }
  SUBCASE("wrong version")
  {
    const auto e = with([](auto& b) { put(b, 8, 2, 4); });
    CHECK(e.find("bad.bin: header: version 2 is not supported (this eldrsim reads version 1)") != std::string::npos);
  }
  SUBCASE("unknown flags")
  {
    const auto e = with([](auto& b) { put(b, 18, 6, 2); });
    CHECK(e.find("unknown flags 0x6") != std::string::npos);
  }
  SUBCASE("top_k larger than the expert count")
  {
    const auto e = with([](auto& b) { put(b, 16, 9, 2); });
    CHECK(e.find("top_k 9 must be between 1 and experts (8)") != std::string::npos);
  }
  SUBCASE("record data outside the record area")
  {
    const auto e = with([](auto& b) { put(b, 80, 60, 8); });  // record 1 (12 bytes) at 60 would end at 72 > 64
    CHECK(e.find("bad.bin: record 1: data [60, 72) lies outside the record area [36, 64)") != std::string::npos);
  }
  SUBCASE("expert id >= experts")
  {
    // Record 1 starts at byte 52; its token 2 layer 1 holds ids 5, 3 at bytes 62, 63.
    const auto e = with([](auto& b) { b[63] = 70; });
    CHECK(e.find("bad.bin: record 1: token 2 layer 1: expert id 70 >= 8") != std::string::npos);
  }
  SUBCASE("duplicate ids in one (token, layer)")
  {
    const auto e = with([](auto& b) { b[36 + 4 * 1 + 2 + 1] = 5; });  // record 0 token 1 layer 1: {5, 5}
    CHECK(e.find("bad.bin: record 0: token 1 layer 1: expert id 5 appears twice") != std::string::npos);
  }
  SUBCASE("a missing file")
  {
    CHECK(error_of(s.file("nowhere.bin")).find("nowhere.bin: file not found") != std::string::npos);
  }
}

TEST_CASE("routing writer: rejects bad ids and miscounted tokens, and leaves no file behind")
{
  Scratch s("writer");
  const std::string path = s.file("w.bin");
  {
    GatingWriter w(path, 2, 8, 2, false);
    w.begin_record(1, 2);
    const uint16_t ok[] = {0, 1, 2, 3}, big[] = {0, 1, 2, 8}, dup[] = {4, 4, 2, 3};
    w.add_token(ok);
    CHECK_THROWS_WITH_AS(w.add_token(big), doctest::Contains("record 0: token 1 layer 1: expert id 8 >= 8"),
                         InputError);
    CHECK_THROWS_WITH_AS(w.add_token(dup), doctest::Contains("record 0: token 1 layer 0: expert id 4 appears twice"),
                         InputError);
    const uint16_t three[] = {0, 1, 2};
    CHECK_THROWS_WITH_AS(w.add_token(three), doctest::Contains("expected 4 ids"), InputError);
    CHECK_THROWS_WITH_AS(w.end_record(), doctest::Contains("1 tokens added, prompt_tokens + output_tokens = 3"),
                         InputError);
    const float g[] = {1, 2, 3, 4};
    CHECK_THROWS_WITH_AS(w.add_token(ok, g), doctest::Contains("opened without gates"), InputError);
  }
  CHECK_FALSE(fs::exists(path));
  CHECK(fs::is_empty(s.dir));  // the temporary file went with the unclosed writer
}
