// Inputs that once broke an input reader under fuzzing (fuzz/README.md), replayed through the same
// readers: each must now load or be rejected with a one-line InputError.
#include "sim/common/input_error.hpp"
#include "sim/config/cluster_spec.hpp"
#include "sim/config/experiment.hpp"
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/routing/compose/composition.hpp"
#include "sim/routing/compose/endpoint_picker_config.hpp"
#include "sim/routing/registry/plugin_table.hpp"
#include "sim/trace/gating_file.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_importers.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <unistd.h>

using namespace eldr;
namespace fs = std::filesystem;

TEST_CASE("fuzz regressions: every saved finding is now a clean accept or a one-line input error")
{
  const std::string scratch = (fs::temp_directory_path() / ("eldr-fuzz-regress-" + std::to_string(getpid()))).string();
  TraceManifest manifest;
  manifest.labels              = {"code", "math", "medical", "legal"};
  manifest.prefix_block_tokens = 16;
  manifest.model               = TraceModel{"qwen3-30b-a3b", 48, 128, 8};
  manifest.routing_file        = "routing.bin";
  auto import_options          = [&](const std::string& path) {
    RequestTraceImportOptions o;
    o.input   = path;
    o.out_dir = scratch;
    return o;
  };
  const std::map<std::string, std::function<void(const std::string&)>> readers = {
      {"config", [](const std::string& p) { load_experiment(p); }},
      {"model", [](const std::string& p) { load_model(p); }},
      {"hardware", [](const std::string& p) { load_hardware(p); }},
      {"cluster", [](const std::string& p) { load_cluster(p); }},
      {"trace_manifest", [](const std::string& p) { read_trace_manifest(p); }},
      {"trace_requests", [&](const std::string& p) { read_trace_requests(p, manifest); }},
      {"routing_file", [](const std::string& p) { GatingFile::load(p); }},
      {"azure", [&](const std::string& p) { import_azure(import_options(p)); }},
      {"mooncake", [&](const std::string& p) { import_mooncake(import_options(p)); }},
      {"vllm",
       [&](const std::string& p) {
         VllmImportOptions o;
         o.input      = p;
         o.out_dir    = scratch;
         o.model_file = "models/deepseek-v2-lite.json";
         import_vllm(o);
       }},
      {"scheduler",
       [](const std::string& p) {
         Json section    = read_endpoint_picker_config(p);
         section["name"] = "composed";
         read_composition(section, p);
       }},
  };
  // The saved findings must be there (the test runs from the project root): a missing directory or an
  // empty harness directory would otherwise pass without replaying anything.
  REQUIRE_MESSAGE(fs::is_directory("fuzz/regressions"), "run from the project root: no fuzz/regressions here");
  long replayed = 0, accepted = 0, rejected = 0;
  for (const auto& dir : fs::directory_iterator("fuzz/regressions")) {
    const std::string harness = dir.path().filename().string();
    REQUIRE_MESSAGE(readers.count(harness), "fuzz/regressions/" << harness << ": no such harness");
    long here = 0;
    for (const auto& f : fs::directory_iterator(dir.path())) {
      CAPTURE(f.path().string());
      ++replayed, ++here;
      try {
        readers.at(harness)(f.path().string());
        ++accepted;
      } catch (const InputError& e) {
        ++rejected;
        const std::string what = e.what();
        CHECK(!what.empty());
        CHECK(what.find('\n') == std::string::npos);
      }
    }
    CHECK_MESSAGE(here > 0, "fuzz/regressions/" << harness << " holds no finding");
  }
  fs::remove_all(scratch);
  MESSAGE(replayed << " saved findings replayed: " << accepted << " accepted, " << rejected << " rejected");
  // At least the nine saved when this test was written (findings are only ever added).
  CHECK(replayed >= 9);
}
