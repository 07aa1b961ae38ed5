// ELDR signatures and the layer mask (sim/routing/eldr/signature.hpp, layer_mask.hpp) on the default
// scenario's routing (Qwen3-30B-A3B, 48 layers x 128 experts, top-8, generated task routing):
//   - counting one 1024-token prompt into a profile (counts only, and with both gate sums; all layers
//     or a 12-layer mask);
//   - building one counts x IDF signature on a 12-layer mask;
//   - counting the 1000 calibration prompts on an 8-layer mask, from the copy of those layers or not;
//   - the offline fit's signature part for 1000 calibration requests: the profiles (prompt and decode
//     counts), IDF, the 30,000 pairs, the greedy layer mask per variant, and all of it end to end.
#include "bench/bench_common.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/routing/eldr/layer_mask.hpp"
#include "sim/routing/eldr/signature.hpp"
#include "sim/workload/workload_factory.hpp"

#include <benchmark/benchmark.h>

#include <memory>

namespace eldr::bench {
namespace {

struct Calibration {
  Experiment x;
  Workload w;
  std::unique_ptr<GatingSource> routing;
  std::unique_ptr<GateSource> gates;
  std::vector<PromptProfile> prompts;  // counts and both gate sums
  std::vector<std::vector<uint16_t>> decode;
  IdfTable idf;
};

// The default config's 1000 calibration requests and their profiles, built once.
const Calibration& calibration()
{
  static const Calibration c = [] {
    Calibration c;
    c.x       = load_experiment(source_path("configs/default.json"), {{"workload.warmup_requests", "0"},
                                                                      {"workload.measured_requests", "100"},
                                                                      {"workload.calibration_requests", "1000"}});
    c.w       = make_workload(c.x);
    c.routing = make_gating_source(c.x, c.w);
    c.gates   = make_gate_source(*c.routing);
    for (const Request& r : c.w.calibration) {
      c.prompts.push_back(count_prompt(*c.routing, r, {true, true}, c.gates.get()));
      c.decode.push_back(count_decode(*c.routing, r));
    }
    c.idf = fit_idf(c.prompts);
    return c;
  }();
  return c;
}

Request long_prompt()
{
  Request r       = calibration().w.calibration[0];
  r.prompt_tokens = 1024;
  return r;
}

const std::vector<int> kMask12{24, 30, 18, 36, 12, 27, 21, 33, 15, 39, 9, 42};

// One 1024-token prompt: counts only (gates:0) or with both gate sums (gates:1), on all 48 layers or
// on a 12-layer mask (what a router needs).
void BM_CountPrompt(benchmark::State& state)
{
  const Calibration& c            = calibration();
  const Request r                 = long_prompt();
  const bool gates                = state.range(0) != 0;
  const std::span<const int> only = state.range(1) == 12 ? std::span<const int>(kMask12) : std::span<const int>();
  for (auto _ : state) {
    PromptProfile p = count_prompt(*c.routing, r, {gates, gates}, c.gates.get(), only);
    benchmark::DoNotOptimize(p.counts.data());
  }
  state.SetItemsProcessed(state.iterations() * r.prompt_tokens);
  state.counters["tokens"] = r.prompt_tokens;
}
BENCHMARK(BM_CountPrompt)
    ->ArgNames({"gates", "layers"})
    ->ArgsProduct({{0, 1}, {48, 12}})
    ->Unit(benchmark::kMicrosecond);

void BM_MakeSignature(benchmark::State& state)
{
  const Calibration& c         = calibration();
  const std::vector<int>& mask = kMask12;
  Signature s(mask.size() * size_t(c.routing->shape().experts));
  size_t i = 0;
  for (auto _ : state) {
    make_signature(c.prompts[i++ % c.prompts.size()], SignatureVariant::counts_idf, &c.idf, mask, s);
    benchmark::DoNotOptimize(s.data());
  }
  state.counters["mask_layers"] = double(mask.size());
}
BENCHMARK(BM_MakeSignature)->Unit(benchmark::kMicrosecond);

void BM_Dot(benchmark::State& state)
{
  std::vector<float> a(size_t(state.range(0)), 0.5f), b(size_t(state.range(0)), 0.25f);
  for (auto _ : state)
    benchmark::DoNotOptimize(dot(a, b));
}
BENCHMARK(BM_Dot)->ArgName("floats")->Arg(1536)->Arg(6144);

// The source without its copy of a mask's layers (distinct_layer_masks): counting reads whole records.
class WholeRecords : public GatingSource {
 public:
  explicit WholeRecords(const GatingSource& s) : s_(s) {}
  const GatingShape& shape() const override { return s_.shape(); }
  std::span<const uint64_t> token_experts(const Request& r, int t) const override { return s_.token_experts(r, t); }
  bool distinct_masks(const Request& r, int b, int e, std::vector<MaskCount>& out) const override
  {
    return s_.distinct_masks(r, b, e, out);
  }

 private:
  const GatingSource& s_;
};

// The 1000 calibration prompts, each counted on an 8-layer mask as a router counts a run's prompts
// (their records spread over the palette pool): from the copy of those layers (copy:1) or from whole
// records (copy:0).
void BM_MaskPrompts(benchmark::State& state)
{
  const Calibration& c = calibration();
  const std::vector<int> mask{24, 30, 18, 36, 12, 27, 21, 33};
  const WholeRecords whole(*c.routing);
  const GatingSource& src = state.range(0) ? *c.routing : static_cast<const GatingSource&>(whole);
  long tokens             = 0;
  for (const Request& r : c.w.calibration)
    tokens += r.prompt_tokens;
  for (auto _ : state)
    for (const Request& r : c.w.calibration) {
      PromptProfile p = count_prompt(src, r, {}, nullptr, mask);
      benchmark::DoNotOptimize(p.counts.data());
    }
  state.SetItemsProcessed(state.iterations() * tokens);
  state.counters["requests"] = double(c.w.calibration.size());
}
BENCHMARK(BM_MaskPrompts)->ArgName("copy")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Prompt and decode counts of the 1000 calibration requests: what the fit reads from the routing.
void BM_CalibrationProfiles(benchmark::State& state)
{
  const Calibration& c = calibration();
  long tokens          = 0;
  for (const Request& r : c.w.calibration)
    tokens += r.prompt_tokens + r.output_tokens - 1;
  for (auto _ : state)
    for (const Request& r : c.w.calibration) {
      PromptProfile p         = count_prompt(*c.routing, r);
      std::vector<uint16_t> d = count_decode(*c.routing, r);
      benchmark::DoNotOptimize(p.counts.data());
      benchmark::DoNotOptimize(d.data());
    }
  state.SetItemsProcessed(state.iterations() * tokens);
  state.counters["requests"] = double(c.w.calibration.size());
  state.counters["tokens"]   = double(tokens);
}
BENCHMARK(BM_CalibrationProfiles)->Unit(benchmark::kMillisecond);

void BM_FitIdf(benchmark::State& state)
{
  const Calibration& c = calibration();
  for (auto _ : state) {
    IdfTable t = fit_idf(c.prompts);
    benchmark::DoNotOptimize(t.idf.data());
  }
}
BENCHMARK(BM_FitIdf)->Unit(benchmark::kMillisecond);

void BM_MaskPairs(benchmark::State& state)
{
  const Calibration& c = calibration();
  for (auto _ : state) {
    MaskPairs p = make_mask_pairs(c.decode, 30000, 1);
    benchmark::DoNotOptimize(p.target.data());
  }
}
BENCHMARK(BM_MaskPairs)->Unit(benchmark::kMillisecond);

// The greedy mask of one variant on pairs drawn beforehand (the pairs and target are shared by all
// variants; BM_MaskPairs times them), with the default screening (screen:1) and without (screen:0,
// every candidate on all 30,000 pairs). Counters: layers chosen, final Spearman on the pairs.
void BM_FitLayerMask(benchmark::State& state)
{
  const Calibration& c         = calibration();
  static const MaskPairs pairs = make_mask_pairs(c.decode, 30000, 1);
  const auto v                 = SignatureVariant(state.range(0));
  LayerMaskOptions opt;
  if (state.range(1) == 0)
    opt.screen_pairs = 0;
  LayerMask m;
  for (auto _ : state) {
    m = fit_layer_mask(c.prompts, pairs, v, &c.idf, opt);
    benchmark::DoNotOptimize(m.layers.data());
  }
  state.SetLabel(std::string(to_string(v)));
  state.counters["layers"]   = double(m.layers.size());
  state.counters["spearman"] = m.score();
}
BENCHMARK(BM_FitLayerMask)
    ->ArgNames({"variant", "screen"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1, 0}})
    ->Unit(benchmark::kMillisecond);

// The signature half of the offline fit of 1000 calibration requests, from the routing source to the
// mask, as `eldrsim fit` would run it for the default variant: prompt and decode profiles, IDF, the
// 30,000 pairs and the greedy mask. (Balanced K-means comes on top.)
void BM_OfflineFitSignatures(benchmark::State& state)
{
  const Calibration& c = calibration();
  LayerMask m;
  for (auto _ : state) {
    std::vector<PromptProfile> prompts;
    std::vector<std::vector<uint16_t>> decode;
    prompts.reserve(c.w.calibration.size());
    decode.reserve(c.w.calibration.size());
    for (const Request& r : c.w.calibration) {
      prompts.push_back(count_prompt(*c.routing, r));
      decode.push_back(count_decode(*c.routing, r));
    }
    const IdfTable idf = fit_idf(prompts);
    m                  = fit_layer_mask(prompts, decode, SignatureVariant::counts_idf, &idf);
    benchmark::DoNotOptimize(m.layers.data());
  }
  state.counters["layers"]   = double(m.layers.size());
  state.counters["spearman"] = m.score();
}
BENCHMARK(BM_OfflineFitSignatures)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eldr::bench
