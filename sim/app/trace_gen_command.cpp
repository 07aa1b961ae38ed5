#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/gating/gate_source.hpp"
#include "sim/gating/gating_source_factory.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/gating/shared_prefix_gating.hpp"
#include "sim/trace/gating_file.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_staging.hpp"
#include "sim/workload/workload_factory.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

struct GenOptions {
  std::string config;
  std::string out;
  std::vector<std::string> sets;
  bool routing          = false;
  double max_routing_mb = 512;
  bool quiet            = false;
};

// The ids a token picked per layer (ascending) and, with a gate source, their gate probabilities
// (the generator's: each token's own, sim/gating/pick_gates.hpp).
void token_ids(const GatingSource& src, const GateSource* gate_source, const Request& r, int t,
               std::vector<uint16_t>& ids, std::vector<float>& gates)
{
  const GatingShape& s = src.shape();
  auto masks           = src.token_experts(r, t);
  ids.clear();
  for (int l = 0; l < s.layers; ++l)
    for (int w = 0; w < s.words_per_layer; ++w)
      for (uint64_t bits = masks[size_t(l * s.words_per_layer + w)]; bits; bits &= bits - 1)
        ids.push_back(uint16_t(w * 64 + std::countr_zero(bits)));
  gates.clear();
  if (gate_source) {
    std::span<const float> prob = gate_source->token_gates(r, t).prob;
    gates.assign(prob.begin(), prob.end());
  }
}

int gen(const GenOptions& o)
{
  Experiment x = load_with_options(o.config, option_overrides(o.sets, {}));
  if (x.workload.kind == WorkloadKind::trace)
    throw InputError(o.config, "workload.kind", "trace gen generates a workload: use kind 'task' or 'language'");
  check_output_apart(o.out, "--out", experiment_inputs(x));
  StagedTrace stage(o.out);  // before generating: the trace appears whole, or not at all
  Workload w               = make_workload(x);
  auto source              = make_gating_source(x, w);
  auto* shared             = dynamic_cast<const SharedPrefixGating*>(source.get());
  auto* gen                = dynamic_cast<const GeneratedGating*>(shared ? &shared->inner() : source.get());
  const GatingShape& shape = source->shape();

  // One timeline: calibration requests at 0, warm-up from 0, measured after the last warm-up arrival.
  TraceManifest m;
  m.labels              = w.labels;
  m.prefix_block_tokens = w.prefix_block_tokens;
  m.source = "eldrsim trace gen " + o.config + ": " + std::string(to_string(x.workload.kind)) + " workload, " +
             std::string(to_string(x.workload.routing)) + " routing for " + x.model.name + ", seed " +
             std::to_string(x.seed);
  std::vector<TraceRequest> out;
  std::vector<const Request*> order;
  for (const Request& r : w.calibration)
    order.push_back(&r);
  double warm_end = 0;
  for (const Request& r : w.requests) {
    order.push_back(&r);
    if (!r.measured)
      warm_end = std::max(warm_end, r.arrival_s);
  }
  double tokens = 0;
  for (const Request* r : order)
    tokens += r->prompt_tokens + r->output_tokens - 1;  // the last output token is never run
  const double mb = tokens * shape.layers * shape.top_k * ((shape.experts <= 256 ? 1 : 2) + (gen ? 4 : 0)) / 1e6;
  if (o.routing && mb > o.max_routing_mb)
    throw InputError("--routing", "",
                     "the routing file would take " + std::to_string(long(mb)) + " MB (limit --max-routing-mb " +
                         std::to_string(long(o.max_routing_mb)) + "): generate fewer requests");

  std::unique_ptr<GatingWriter> writer;
  namespace fs = std::filesystem;
  if (o.routing) {
    m.model        = TraceModel{x.model.name, shape.layers, shape.experts, shape.top_k};
    m.routing_file = "routing.bin";
    writer         = std::make_unique<GatingWriter>((fs::path(stage.dir()) / "routing.bin").string(), shape.layers,
                                            shape.experts, shape.top_k, gen != nullptr);
  }
  std::vector<uint16_t> ids;
  std::vector<float> gates;
  const auto gate_source   = gen ? make_gate_source(*source) : nullptr;  // the shared-prefix remapping included
  const size_t calibration = w.calibration.size();
  for (size_t i = 0; i < order.size(); ++i) {
    const Request& r = *order[i];
    TraceRequest t;
    t.id              = uint32_t(i);
    t.calibration     = i < calibration;
    t.arrival_s       = t.calibration ? 0.0 : r.measured ? warm_end + r.arrival_s : r.arrival_s;
    t.prompt_tokens   = r.prompt_tokens;
    t.output_tokens   = r.output_tokens;
    t.label           = r.label;
    const auto hashes = w.hashes(r);
    t.prefix_hashes.assign(hashes.begin(), hashes.end());
    if (writer) {
      writer->begin_record(uint32_t(r.prompt_tokens), uint32_t(r.output_tokens - 1));
      for (int tok = 0; tok < r.prompt_tokens + r.output_tokens - 1; ++tok) {
        token_ids(*source, gate_source.get(), r, tok, ids, gates);
        writer->add_token(ids, gates);
      }
      t.routing_record = int32_t(writer->end_record());
    }
    out.push_back(std::move(t));
  }
  if (writer)
    writer->close();
  write_staged(stage.dir(), o.out, [&] { write_trace(stage.dir(), m, out, o.out); });
  stage.commit();
  if (!o.quiet)
    std::printf("trace gen: %zu requests (%zu calibration) -> %s%s\n", out.size(), calibration, o.out.c_str(),
                writer ? (", routing " + std::to_string(long(mb)) + " MB").c_str() : "");
  return 0;
}

}  // namespace

Command add_trace_gen_command(CLI::App& trace)
{
  auto o    = std::make_shared<GenOptions>();
  auto* sub = trace.add_subcommand("gen", "Write an experiment's generated workload as a trace directory");
  sub->add_option("config", o->config, "Experiment config (JSON): its workload (task or language) and routing")
      ->required();
  sub->add_option("--out", o->out, "Trace directory to write")->required();
  sub->add_option("--set", o->sets, "Override a config key, KEY=VALUE (repeatable)");
  sub->add_flag("--routing", o->routing,
                "Also write routing.bin: every token's experts (and, for generated routing, gate probabilities), so "
                "the trace replays the exact routing");
  sub->add_option("--max-routing-mb", o->max_routing_mb, "Refuse a larger routing file (default 512)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--quiet,-q", o->quiet, "No summary line");
  return {sub, [o] { return gen(*o); }};
}

}  // namespace eldr::app
