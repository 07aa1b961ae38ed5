// sim/common/input_file.hpp (what every reader of a user's file opens it through) and the trace
// integrity keys and whole-trace writes built on it (trace_format.hpp, trace_staging.hpp).
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_staging.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace eldr;

namespace {

std::string error_of(const std::function<void()>& f)
{
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / ("eldr-test-input-" + name + "-" + std::to_string(::getpid())))
  {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string file(const std::string& name, const std::string& text) const
  {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

const char kSpecial[] = "is not a regular file (a device, FIFO or socket): give a file";

Trace small_trace(const std::string& dir)
{
  TraceManifest m;
  m.labels = {"chat"};
  std::vector<TraceRequest> reqs(3);
  for (uint32_t i = 0; i < 3; ++i) {
    reqs[i].id            = i;
    reqs[i].arrival_s     = i;
    reqs[i].prompt_tokens = 10 + int(i);
    reqs[i].output_tokens = 4;
  }
  write_trace(dir, m, reqs);
  return read_trace(dir);
}

}  // namespace

TEST_CASE("input files: regular files are read whole, special files, directories and missing files are one error")
{
  Scratch s("read");
  const std::string f = s.file("a.txt", std::string("hello\0world", 11));
  CHECK(read_input_file(f) == std::string("hello\0world", 11));
  CHECK(read_input_bytes(f).size() == 11);
  CHECK(error_of([&] { read_input_file(f, 10); }).find("a.txt: 11 bytes: larger than 10 bytes") != std::string::npos);
  CHECK(error_of([&] { read_input_file("/dev/zero"); }) == std::string("/dev/zero: ") + kSpecial);
  CHECK(error_of([&] { check_input_file("/dev/null"); }) == std::string("/dev/null: ") + kSpecial);
  const std::string fifo = (s.dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { read_input_file(fifo); }) == fifo + ": " + kSpecial);  // returns: no writer is waited for
  CHECK(error_of([&] { open_input_file(fifo); }) == fifo + ": " + kSpecial);
  CHECK(error_of([&] { read_input_file(s.dir.string()); }) == s.dir.string() + ": is a directory, not a file");
  CHECK(error_of([&] { read_input_file((s.dir / "nope").string()); }) ==
        (s.dir / "nope").string() + ": file not found");
  fs::create_symlink(s.dir / "gone", s.dir / "dangling");
  CHECK(error_of([&] { check_input_file((s.dir / "dangling").string()); }).find("file not found (a symbolic link") !=
        std::string::npos);
  CHECK(error_of([&] { read_input_file(""); }).find("give a file") != std::string::npos);
}

TEST_CASE("input files: the streaming FNV-1a 64 is fnv1a64_hex's, in pieces too")
{
  const std::string text = "requests.jsonl\n{\"id\":0}\n";
  CHECK(fnv1a64_text(fnv1a64(text.data(), text.size())) == fnv1a64_hex(text));
  CHECK(fnv1a64(text.data() + 5, text.size() - 5, fnv1a64(text.data(), 5)) == fnv1a64(text.data(), text.size()));
  CHECK(fnv1a64_text(fnv1a64(nullptr, 0)) == "cbf29ce484222325");
}

TEST_CASE("trace integrity: the manifest records the count and checksum, a cut or edited requests.jsonl is refused")
{
  Scratch s("integrity");
  const std::string dir = (s.dir / "t").string();
  const Trace t         = small_trace(dir);
  CHECK(t.manifest.request_count == 3);
  CHECK(t.manifest.requests_fnv1a64.size() == 16);
  CHECK(t.manifest.routing_fnv1a64.empty());
  std::string text = read_input_file(t.requests_path());
  SUBCASE("cut at a line boundary")
  {
    std::ofstream(t.requests_path(), std::ios::trunc) << text.substr(0, text.find('\n') + 1);
    CHECK(error_of([&] { read_trace(dir); })
              .find("requests.jsonl: 1 requests, not the 3 recorded in trace.json: the file "
                    "was cut or edited") != std::string::npos);
  }
  SUBCASE("one byte edited")
  {
    text[text.find("\"prompt_tokens\":11") + 17] = '2';
    std::ofstream(t.requests_path(), std::ios::trunc) << text;
    CHECK(error_of([&] { read_trace(dir); }).find("requests.jsonl: contents differ from the checksum") !=
          std::string::npos);
  }
  SUBCASE("a manifest without the keys is read unchecked")
  {
    std::string m = read_input_file(t.manifest_path());
    m             = m.substr(0, m.find(",\n  \"request_count\"")) + "\n}\n";
    std::ofstream(t.manifest_path(), std::ios::trunc) << m;
    std::ofstream(t.requests_path(), std::ios::trunc) << text.substr(0, text.find('\n') + 1);
    CHECK(read_trace(dir).requests.size() == 1);
  }
  SUBCASE("a routing checksum")
  {
    TraceManifest m   = t.manifest;
    m.routing_fnv1a64 = fnv1a64_text(42);
    CHECK_NOTHROW(check_routing_checksum(m, "routing.bin", 42));
    CHECK(error_of([&] { check_routing_checksum(m, "routing.bin", 43); }).find("routing.bin: contents differ") !=
          std::string::npos);
  }
}

TEST_CASE("staged traces: written beside the target, swapped in whole, uncommitted ones leave nothing")
{
  Scratch s("staged");
  const std::string target = (s.dir / "t").string();
  {
    StagedTrace st(target);
    CHECK(fs::path(st.dir()).parent_path() == s.dir);
    small_trace(st.dir());
    CHECK(!fs::exists(target));
  }  // not committed
  CHECK(!fs::exists(target));
  CHECK(fs::is_empty(s.dir));
  {
    StagedTrace st(target);
    small_trace(st.dir());
    std::ofstream(fs::path(st.dir()) / "routing.bin") << "x";  // stands for a routing file
    st.commit();
  }
  CHECK(fs::exists(fs::path(target) / "routing.bin"));
  {
    StagedTrace st(target);  // a new trace without routing over one with it
    small_trace(st.dir());
    st.commit();
  }
  CHECK(!fs::exists(fs::path(target) / "routing.bin"));
  CHECK(fs::exists(fs::path(target) / "trace.json"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(s.dir))
    left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"t"});
  // A directory with other files: written in place, the other files kept.
  std::ofstream(fs::path(target) / "notes.txt") << "mine";
  std::ofstream(fs::path(target) / "routing.bin") << "stale";
  {
    StagedTrace st(target);
    CHECK(fs::path(st.dir()).parent_path() == fs::path(target));
    small_trace(st.dir());
    st.commit();
  }
  CHECK(fs::exists(fs::path(target) / "notes.txt"));
  CHECK(!fs::exists(fs::path(target) / "routing.bin"));
  CHECK(read_trace(target).requests.size() == 3);
  CHECK(error_of([&] { StagedTrace st(""); }).find("--out: an empty path") != std::string::npos);
  CHECK(error_of([&] {
          StagedTrace st((fs::path(target) / "notes.txt").string());
        }).find("exists and is not a directory") != std::string::npos);
}
