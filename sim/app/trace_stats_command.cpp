#include "sim/app/commands.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/config/experiment.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/gating_stats.hpp"
#include "sim/workload/workload_factory.hpp"

#include <cstdio>
#include <memory>

namespace eldr::app {

namespace {

struct StatsOptions {
  std::string config;
  std::vector<std::string> sets;
  int requests = 400;
  long seed    = 1;
  std::string json;
};

std::string range(std::pair<double, double> r, double scale = 1.0, int digits = 2)
{
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f-%.*f", digits, r.first * scale, digits, r.second * scale);
  return buf;
}

int stats(const StatsOptions& o)
{
  if (!o.json.empty())
    check_output_file(o.json);
  Experiment x = load_with_options(o.config, option_overrides(o.sets, {}));
  if (!o.json.empty())
    check_output_apart(o.json, "--json", experiment_inputs(x));
  Workload w  = make_workload(x);
  auto source = make_gating_source(x, w);
  GatingStatsOptions opt;
  opt.requests                      = o.requests;
  opt.seed                          = uint64_t(o.seed);
  std::unique_ptr<GateSource> gates = make_gate_source(*source);
  if (gates)
    opt.token_gates = [&gates](const Request& r, int token) { return gates->token_gates(r, token).prob; };
  const bool subtopics = source->has_subtopics();
  if (subtopics)
    opt.subtopic = [&source](const Request& r) { return source->primary_subtopic(r); };
  GatingStats s = measure_routing(w.requests, w.calibration, *source, opt);

  const bool has_targets  = x.workload.routing == ExpertRouting::generated;
  const GatingTargets& tg = x.routing_profile.targets;
  const std::string kind(to_string(x.workload.kind));
  std::printf("routing statistics: %s, %s workload, %s routing, %d sampled requests\n", x.model.name.c_str(),
              kind.c_str(), std::string(to_string(x.workload.routing)).c_str(), s.sampled_requests);
  std::printf("\nsame-label vs mixed batches, one random decode token per sequence, distinct experts per layer\n"
              "(tiles of %d: the reduction counted in the fused-MoE kernel's tiles of that many tokens per expert)\n",
              opt.tile_tokens);
  std::printf("%8s %12s %12s %11s %12s %12s", "batch", "same label", "mixed", "reduction", "target",
              ("tiles of " + std::to_string(opt.tile_tokens)).c_str());
  if (subtopics)
    std::printf("   %s", "same sub-topic vs same label (expected unions)");
  std::printf("\n");
  auto red = tg.distinct_reduction.find(kind);
  for (const auto& b : s.locality) {
    std::printf("%8d %12.1f %12.1f %10.1f%% %12s %11.1f%%", b.batch, b.distinct_same, b.distinct_mixed,
                100 * b.reduction(),
                has_targets && red != tg.distinct_reduction.end() ? (range(red->second, 100) + "%").c_str() : "-",
                100 * b.tile_reduction());
    if (subtopics)
      std::printf("   %.1f vs %.1f: %.1f%% fewer", b.expected_subtopic, b.expected_same, 100 * b.subtopic_reduction());
    std::printf("\n");
  }
  auto target = [&](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return has_targets && v != 0 ? std::string(buf) : std::string("-");
  };
  std::printf("\n%-58s %9s %9s\n", "statistic", "measured", "target");
  std::printf("%-58s %9.3f %9s\n", "prefill vs decode expert frequencies, Pearson per request",
              s.pearson_prefill_decode, target(tg.pearson_prefill_decode).c_str());
  std::printf("%-58s %9.3f %9s\n", "signature vs decode profile, Spearman: counts x IDF", s.spearman_counts_idf,
              target(tg.spearman_counts_idf).c_str());
  std::printf("%-58s %9.3f %9s\n", "                                      binary", s.spearman_binary,
              target(tg.spearman_binary).c_str());
  std::printf("%-58s %9.3f %9s\n", "                                      raw counts", s.spearman_counts, "-");
  std::printf("%-58s %9.3f %9s\n", "                                      sqrt counts", s.spearman_sqrt, "-");
  if (s.has_gate_prob)
    std::printf("%-58s %9.3f %9s\n", "                                      gate probabilities", s.spearman_gate_prob,
                target(tg.spearman_gate_prob).c_str());
  if (s.has_gate_prob) {
    auto gt = tg.gate_per_pick.find(kind);
    std::printf("%-58s %4.3f/%.3f/%.3f %s\n", "gate value per pick of a (label, layer, expert), P5/P50/P95",
                s.gate_per_pick_p5, s.gate_per_pick_p50, s.gate_per_pick_p95,
                has_targets && gt != tg.gate_per_pick.end() ? ("P5-P95 " + range(gt->second, 1.0, 3)).c_str() : "-");
  }
  std::printf("%-58s %9.3f %9s\n", "top expert's share of a layer's picks, mean over layers", s.top_share_mean,
              has_targets ? range(tg.top_expert_share).c_str() : "-");
  std::printf("%-58s %4.3f-%.3f %9s\n", "                                      min-max over layers", s.top_share_min,
              s.top_share_max, "-");
  std::printf("%-58s %9.4f %9s\n", "                                      uniform", s.top_share_uniform, "-");
  std::printf("%-58s %9.3f %9s\n", "label divergence (Jensen-Shannon, bits), mean over layers", s.label_js_mean, "-");
  std::printf("%-58s %4.3f-%.3f %9s\n", "                                      min-max over layers",
              s.label_js_min_layer, s.label_js_max_layer, "-");
  std::printf("%-58s %9d %9s\n", "                                      most divergent layer", s.label_js_max_at, "-");

  if (!o.json.empty()) {
    Json j;
    j["model"]            = x.model.name;
    j["workload"]         = kind;
    j["routing"]          = x.workload.routing;
    j["sampled_requests"] = s.sampled_requests;
    Json loc              = Json::array();
    for (const auto& b : s.locality) {
      Json e = {{"batch", b.batch},
                {"distinct_same", b.distinct_same},
                {"distinct_mixed", b.distinct_mixed},
                {"reduction", b.reduction()},
                {"tiles_same", b.tiles_same},
                {"tiles_mixed", b.tiles_mixed},
                {"tile_reduction", b.tile_reduction()}};
      if (subtopics) {
        e["expected_same_label"]    = b.expected_same;
        e["expected_same_subtopic"] = b.expected_subtopic;
        e["subtopic_reduction"]     = b.subtopic_reduction();
      }
      loc.push_back(e);
    }
    j["locality"]               = loc;
    j["tile_tokens"]            = opt.tile_tokens;
    j["pearson_prefill_decode"] = s.pearson_prefill_decode;
    j["spearman"]               = {{"counts", s.spearman_counts},
                                   {"counts_idf", s.spearman_counts_idf},
                                   {"sqrt_counts", s.spearman_sqrt},
                                   {"binary", s.spearman_binary}};
    if (s.has_gate_prob) {
      j["spearman"]["gate_prob"] = s.spearman_gate_prob;
      j["gate_per_pick"] = {{"p5", s.gate_per_pick_p5}, {"p50", s.gate_per_pick_p50}, {"p95", s.gate_per_pick_p95}};
    }
    j["top_expert_share"]    = {{"mean", s.top_share_mean},
                                {"min", s.top_share_min},
                                {"max", s.top_share_max},
                                {"uniform", s.top_share_uniform}};
    j["label_divergence_js"] = {{"mean", s.label_js_mean},
                                {"min_layer", s.label_js_min_layer},
                                {"max_layer", s.label_js_max_layer},
                                {"most_divergent_layer", s.label_js_max_at}};
    write_file_atomically(o.json, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

Command add_trace_stats_command(CLI::App& trace)
{
  auto o    = std::make_shared<StatsOptions>();
  auto* sub = trace.add_subcommand("stats", "Measure the expert-routing locality of an experiment's workload "
                                            "(generated or replayed) against the calibration targets");
  sub->add_option("config", o->config, "Experiment config (JSON); its workload and workload.routing are measured")
      ->required();
  sub->add_option("--set", o->sets, "Override a config key, KEY=VALUE (repeatable), e.g. --set workload.kind=language");
  sub->add_option("--requests", o->requests, "Requests sampled (default 400)")->check(CLI::Range(2, 1000000));
  sub->add_option("--seed", o->seed, "Sampling seed (default 1)")->check(CLI::NonNegativeNumber);
  sub->add_option("--json", o->json, "Also write the statistics as JSON to this file");
  return {sub, [o] { return stats(*o); }};
}

}  // namespace eldr::app
