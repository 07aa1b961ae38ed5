// eldrsim trace import {esft,azure,mooncake,vllm}: public data, or routing captured from a vLLM server,
// into trace directories (docs/trace-format.md).
#include "sim/app/commands.hpp"
#include "sim/config/experiment.hpp"
#include "sim/trace/trace_importers.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

namespace fs = std::filesystem;

// Default inputs live under the project root (traces/).
std::string from_root(const std::string& rel)
{
  return (fs::path(project_root(".")) / rel).lexically_normal().string();
}

void print(const char* kind, const ImportReport& rep)
{
  for (const auto& line : rep.summary())
    std::printf("%s: %s\n", kind, line.c_str());
}

// --model: a name is models/NAME.json under the project root (as a config's "model"); a path is used as is.
std::string model_path(const std::string& value)
{
  if (value.find('/') != std::string::npos || value.ends_with(".json"))
    return value;
  return from_root("models/" + value + ".json");
}

struct ImportOptions {
  EsftImportOptions esft;
  RequestTraceImportOptions azure, mooncake;
  VllmImportOptions vllm;
  std::string esft_domains;
  bool no_shuffle = false;
  bool quiet      = false;
};

void add_request_trace_options(CLI::App* sub, RequestTraceImportOptions& o, const std::string& default_input,
                               const std::string& default_label)
{
  sub->add_option("input", o.input, "Input file (default " + default_input + " under the project root)");
  sub->add_option("--out", o.out_dir, "Trace directory to write (created if needed)")->required();
  sub->add_option("--label", o.label, "The requests' label (default " + default_label + ")");
  // Counts of zero are errors, not "all": leaving the option out means all (issue: a zero is a count).
  sub->add_option("--limit", o.limit, "Import only the first N rows (default: all)")->check(CLI::PositiveNumber);
  sub->add_option("--time-scale", o.time_scale, "Multiply arrival times by this (0.5 doubles the rate)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-prompt", o.max_prompt,
                  "Clip prompts longer than N tokens to N (default: keep them; runs need "
                  "serving.prefill_token_budget >= the longest prompt)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--drop-long", o.drop_long, "With --max-prompt: drop such rows instead of clipping them");
}

}  // namespace

Command add_trace_import_command(CLI::App& trace)
{
  auto o    = std::make_shared<ImportOptions>();
  auto* sub = trace.add_subcommand(
      "import",
      "Import public data (ESFT routing, Azure 2023, Mooncake) or captured vLLM routing as a trace directory");
  sub->require_subcommand(1);

  auto* esft = sub->add_subcommand("esft", "ESFT per-token routing of DeepSeek-V2-Lite (4 task domains): requests + "
                                           "routing.bin, for models/deepseek-v2-lite.json");
  esft->add_option("--data", o->esft.data_dir,
                   "ESFT routing directory (default traces/routing/esft_deepseek_v2_lite under the project root)");
  esft->add_option("--out", o->esft.out_dir, "Trace directory to write (created if needed)")->required();
  esft->add_option("--domains", o->esft_domains, "Comma-separated domains (default law,intent,summary,translation)");
  esft->add_option("--prompt-fraction", o->esft.prompt_fraction,
                   "Share of each sequence's tokens taken as the prompt (default 0.4)")
      ->check(CLI::Range(0.0, 1.0));
  esft->add_option("--rate", o->esft.rate_rps, "Poisson arrival rate, requests/s (default 10)")
      ->check(CLI::PositiveNumber);
  esft->add_option("--seed", o->esft.seed, "Seed of the shuffle and the arrivals (default 1)");
  esft->add_option("--calibration", o->esft.calibration,
                   "Flag the first N sequences (after the shuffle) as calibration requests (default 0)")
      ->check(CLI::NonNegativeNumber);
  esft->add_flag("--no-shuffle", o->no_shuffle, "Keep domain and sequence order instead of a seeded shuffle");
  esft->add_option("--sequences", o->esft.sequences_per_domain,
                   "Only the first N sequences of each domain (default: all)")
      ->check(CLI::PositiveNumber);
  esft->add_option("--repeat", o->esft.repeat,
                   "Serve each non-calibration sequence N times (copies share the routing record; default 1)")
      ->check(CLI::PositiveNumber);

  auto* azure = sub->add_subcommand("azure", "Azure LLM inference trace 2023 CSV: arrivals and lengths, one label");
  add_request_trace_options(azure, o->azure, "traces/azure2023_conv.csv",
                            "code if the file name has 'code', else chat");
  auto* moon =
      sub->add_subcommand("mooncake", "Mooncake trace JSONL: arrivals, lengths, prefix block hashes, one label");
  add_request_trace_options(moon, o->mooncake, "traces/mooncake_conversation.jsonl", "chat");

  auto* vllm = sub->add_subcommand(
      "vllm", "Completion responses captured from vLLM with --enable-return-routed-experts (one JSON response a line): "
              "real per-token routing of prompts and outputs, with arrival times");
  vllm->add_option("responses", o->vllm.input,
                   "Responses JSONL: each line one completion response with its "
                   "choice's routed_experts over the whole sequence (vLLM's layout), or "
                   "prompt_routed_experts and routed_experts (nested lists or base64 .npy)")
      ->required();
  vllm->add_option("--model", o->vllm.model_file,
                   "The served model: a name under models/ (e.g. qwen3-30b-a3b) or a model file; its MoE layers, "
                   "experts and top_k are checked against every array")
      ->required();
  vllm->add_option("--out", o->vllm.out_dir, "Trace directory to write (created if needed)")->required();
  vllm->add_option(
      "--arrivals", o->vllm.arrivals_csv,
      "CSV 'request_id,arrival_s' joined to the responses by --id-field (default: each line's --arrival-field)");
  vllm->add_option("--arrival-field", o->vllm.arrival_field,
                   "Field of a line with its arrival time in seconds (default arrival_s)");
  vllm->add_option("--id-field", o->vllm.id_field, "Field of a line with its request id, for --arrivals (default id)");
  vllm->add_option("--label", o->vllm.label, "Label of lines without a string \"label\" field (default chat)");
  vllm->add_option("--calibration", o->vllm.calibration,
                   "Flag the first N requests (by arrival) as calibration requests (default 0)")
      ->check(CLI::NonNegativeNumber);

  for (auto* s : {esft, azure, moon, vllm})
    s->add_flag("--quiet,-q", o->quiet, "Print nothing on success");

  return {sub, [o, esft, azure, moon, vllm] {
            ImportReport rep;
            const char* kind = "";
            if (esft->parsed()) {
              EsftImportOptions e = o->esft;
              if (e.data_dir.empty())
                e.data_dir = from_root("traces/routing/esft_deepseek_v2_lite");
              if (!o->esft_domains.empty()) {
                e.domains.clear();
                std::string d;
                for (char c : o->esft_domains + ",")
                  if (c == ',') {
                    if (!d.empty())
                      e.domains.push_back(d);
                    d.clear();
                  } else {
                    d += c;
                  }
              }
              e.shuffle = !o->no_shuffle;
              check_output_apart(e.out_dir, "--out", {{e.data_dir, "the ESFT routing directory"}});
              rep  = import_esft(e);
              kind = "esft";
            } else if (azure->parsed()) {
              RequestTraceImportOptions a = o->azure;
              if (a.input.empty())
                a.input = from_root("traces/azure2023_conv.csv");
              check_output_apart(a.out_dir, "--out", {{a.input, "the Azure trace"}});
              rep  = import_azure(a);
              kind = "azure";
            } else if (vllm->parsed()) {
              VllmImportOptions v = o->vllm;
              v.model_file        = model_path(v.model_file);
              check_output_apart(v.out_dir, "--out",
                                 {{v.input, "the captured responses"},
                                  {v.model_file, "the model file"},
                                  {v.arrivals_csv, "the arrivals file"}});
              rep  = import_vllm(v);
              kind = "vllm";
            } else {
              RequestTraceImportOptions m = o->mooncake;
              if (m.input.empty())
                m.input = from_root("traces/mooncake_conversation.jsonl");
              check_output_apart(m.out_dir, "--out", {{m.input, "the Mooncake trace"}});
              rep  = import_mooncake(m);
              kind = "mooncake";
            }
            if (!o->quiet)
              print(kind, rep);
            return 0;
          }};
}

}  // namespace eldr::app
