// The gate values of generated routing, kept per palette in this process and in a cache directory
// (a sweep's points and fits share one): values taken from the cache are the ones drawn, and a
// source with other inputs never takes another's.
#include "sim/config/experiment.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/workload/workload_factory.hpp"
#include "tests/support/scratch_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace eldr;

namespace {

Experiment small(const std::string& model)
{
  return load_experiment("configs/default.json", {{"workload.routing", "generated"},
                                                  {"model", model},
                                                  {"workload.kind", "task"},
                                                  {"workload.warmup_requests", "0"},
                                                  {"workload.measured_requests", "40"},
                                                  {"workload.calibration_requests", "0"}});
}

// Every gate value (probability and score) of the first tokens of each request, in order.
std::vector<float> gate_values(const GeneratedGating& g, const Workload& w)
{
  auto gates = make_gate_source(g);
  REQUIRE(gates);
  std::vector<float> v;
  for (const Request& r : w.requests)
    for (int t = 0; t < std::min(r.prompt_tokens, 4); ++t) {
      const TokenGates tg = gates->token_gates(r, t);
      v.insert(v.end(), tg.prob.begin(), tg.prob.end());
      v.insert(v.end(), tg.score.begin(), tg.score.end());
    }
  return v;
}

size_t cache_files(const std::string& dir)
{
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    n += e.path().filename().string().starts_with("gates-");
  return n;
}

// Each case starts as a fresh process would, and leaves no directory set for the next.
struct FreshGates {
  FreshGates() { forget_gate_tables(); }
  ~FreshGates()
  {
    set_gate_cache_dir("");
    forget_gate_tables();
  }
};

}  // namespace

TEST_CASE("gate cache: values read back from the directory are the ones drawn, bit for bit")
{
  const FreshGates fresh;
  const test::ScratchDir scratch("gate-cache");
  const Experiment x = small("qwen3-30b-a3b");
  const Workload w   = make_workload(x);
  const GeneratedGating g(x.model, x.routing_profile, "task", w.labels, x.seed);

  const std::vector<float> alone = gate_values(g, w);  // no directory: drawn here
  CHECK(gate_palettes_drawn() > 0);
  forget_gate_tables();
  set_gate_cache_dir(scratch.path());
  const size_t before = gate_palettes_drawn();
  CHECK(gate_values(g, w) == alone);  // drawn again, and kept in the directory
  const size_t palettes = gate_palettes_drawn() - before;
  CHECK(cache_files(scratch.path()) == palettes);

  forget_gate_tables();  // a later process: every palette from the directory, none drawn
  CHECK(gate_values(g, w) == alone);
  CHECK(gate_palettes_drawn() == before + palettes);

  // Within a process a palette is drawn once, whichever gate source reads it.
  set_gate_cache_dir("");
  CHECK(gate_values(g, w) == alone);
  CHECK(gate_palettes_drawn() == before + palettes);
}

TEST_CASE("gate cache: a source with other inputs draws its own values beside another's files")
{
  const FreshGates fresh;
  const test::ScratchDir scratch("gate-cache-keys");
  Experiment x     = small("qwen3-30b-a3b");
  const Workload w = make_workload(x);
  set_gate_cache_dir(scratch.path());
  const GeneratedGating g(x.model, x.routing_profile, "task", w.labels, x.seed);
  const std::vector<float> first = gate_values(g, w);

  // Each of these changes what the values are drawn from but not the palettes' count or shape: a
  // cache keyed by less (the palette index, the shape) would hand them the first source's values.
  auto drawn_apart = [&](const GeneratedGating& other) {
    set_gate_cache_dir("");
    forget_gate_tables();
    const std::vector<float> own = gate_values(other, w);
    forget_gate_tables();
    set_gate_cache_dir(scratch.path());
    const std::vector<float> cached = gate_values(other, w);
    CHECK(cached == own);
    CHECK(cached != first);
  };
  drawn_apart(GeneratedGating(x.model, x.routing_profile, "task", w.labels, x.seed + 1));  // another seed
  ModelSpec renormalized      = x.model;  // the same palettes, weights over the picks instead of all experts
  renormalized.norm_topk_prob = !x.model.norm_topk_prob;
  drawn_apart(GeneratedGating(renormalized, x.routing_profile, "task", w.labels, x.seed));
  GatingProfile sharper = x.routing_profile;  // the same seed and shape, other logits
  sharper.kinds.at("task").label_strength *= 2;
  drawn_apart(GeneratedGating(x.model, sharper, "task", w.labels, x.seed));
}

TEST_CASE("gate cache: a damaged or foreign file is drawn again and replaced, same values")
{
  const FreshGates fresh;
  const test::ScratchDir scratch("gate-cache-damaged");
  const Experiment x = small("qwen3-30b-a3b");
  const Workload w   = make_workload(x);
  set_gate_cache_dir(scratch.path());
  const GeneratedGating g(x.model, x.routing_profile, "task", w.labels, x.seed);
  const std::vector<float> drawn = gate_values(g, w);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(scratch.path()))
    files.push_back(e.path());
  REQUIRE(files.size() >= 2);
  {  // one file damaged in place (same size, a byte of its values changed), one cut short
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    const char c = char(f.get());
    f.seekp(-100, std::ios::end);
    f.put(char(~c));
  }
  std::filesystem::resize_file(files[1], std::filesystem::file_size(files[1]) / 2);
  forget_gate_tables();
  const size_t before = gate_palettes_drawn();
  CHECK(gate_values(g, w) == drawn);
  CHECK(gate_palettes_drawn() == before + 2);
  forget_gate_tables();  // replaced whole: read back now
  CHECK(gate_values(g, w) == drawn);
  CHECK(gate_palettes_drawn() == before + 2);
}
