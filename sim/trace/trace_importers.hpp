#pragma once
// Importers of public data into trace directories (docs/trace-format.md, "Importers"):
//   ESFT      per-token top-6 routing of DeepSeek-V2-Lite over four task domains: requests + routing
//   Azure     Azure LLM inference trace 2023 (TIMESTAMP, ContextTokens, GeneratedTokens): arrivals + lengths
//   Mooncake  Mooncake FAST'25 trace JSONL (timestamp ms, input/output length, hash_ids): arrivals,
//             lengths and prefix block hashes
//   vLLM      completion responses captured from a server run with --enable-return-routed-experts:
//             real per-token routing of prompt and output, with each request's arrival time
// Input problems are InputError naming the input file and line.
#include <cstdint>
#include <string>
#include <vector>

namespace eldr {

struct ImportReport {
  std::string out_dir;
  long rows               = 0;  // input rows (sequences for ESFT) considered
  long requests           = 0;  // requests written
  long calibration        = 0;  // of which flagged "calibration"
  long skipped_short      = 0;  // ESFT: sequences too short for a prompt and two output tokens
  long clipped_prompts    = 0;  // prompts cut to --max-prompt
  long dropped_long       = 0;  // rows dropped for a prompt over --max-prompt
  long clamped_outputs    = 0;  // outputs raised to the minimum of 2 tokens
  long clamped_prompts    = 0;  // prompts raised to the minimum of 1 token
  long prompts_over_8192  = 0;  // written prompts longer than the default serving.prefill_token_budget
  int max_prompt_written  = 0;
  uint64_t routing_tokens = 0;
  uint64_t routing_bytes  = 0;
  double duration_s       = 0;    // last arrival
  std::string model;              // whose expert ids the routing holds, and what they were checked against
  bool takes_max_prompt = false;  // the importer has --max-prompt (the summary's advice names it only then)
  // One line per fact, for the command's output.
  std::vector<std::string> summary() const;
};

struct EsftImportOptions {
  std::string data_dir;  // holds esft_<domain>_top6_u8.bin and esft_<domain>_seqlens.csv
  std::string out_dir;
  std::vector<std::string> domains = {"law", "intent", "summary", "translation"};
  double prompt_fraction           = 0.4;  // prompt = floor(tokens x fraction), at least 1, at most tokens - 2
  double rate_rps                  = 10;   // Poisson arrivals (ESFT has no times)
  uint64_t seed                    = 1;
  long calibration                 = 0;  // the first N sequences (after the shuffle) become calibration requests
  bool shuffle                     = true;
  long sequences_per_domain        = 0;  // 0: all; else the first N of each domain (before the shuffle)
  int repeat                       = 1;  // served requests per sequence (copies share the routing record)
};

struct RequestTraceImportOptions {
  std::string input;
  std::string out_dir;
  std::string label;      // empty: the importer's default
  long limit        = 0;  // 0: all rows; else the first N rows
  double time_scale = 1;  // arrival times are multiplied by this (0.5: twice the rate)
  int max_prompt    = 0;  // 0: no limit; else prompts longer than this are clipped (or dropped)
  bool drop_long    = false;
};

// ESFT's per-token routing (data_dir from traces/routing/esft_deepseek_v2_lite): one request
// per sequence, labelled by its domain, the first prompt_fraction of its tokens the prompt, the rest
// the output; routing.bin holds each sequence's ids (no gates). Model: deepseek-v2-lite (26 MoE
// layers, 64 experts, top-6).
ImportReport import_esft(const EsftImportOptions& o);
// Azure 2023 CSV: arrivals relative to the first row, prompt = ContextTokens, output =
// GeneratedTokens (at least 2). Label default: "code" if the file name contains "code", else "chat".
ImportReport import_azure(const RequestTraceImportOptions& o);
// Mooncake JSONL: arrivals (ms) relative to the first row, prompt = input_length, output =
// output_length (at least 2), prefix_hashes = hash_ids (512-token blocks). Label default "chat".
ImportReport import_mooncake(const RequestTraceImportOptions& o);

struct VllmImportOptions {
  std::string input;  // one completion response (a JSON object) per line
  std::string out_dir;
  std::string model_file;    // models/<name>.json the ids belong to: layers, experts and top_k are checked
  std::string arrivals_csv;  // empty: each line's arrival_field; else request_id,arrival_s joined by id_field
  std::string arrival_field = "arrival_s";
  std::string id_field      = "id";
  std::string label         = "chat";  // for lines without a string "label"
  long calibration          = 0;       // the first N requests by arrival become calibration requests
};

// vLLM responses: per line, either choices[0].routed_experts alone over the whole sequence [prompt +
// generated tokens - 1, layers, top_k] (vLLM's own layout: split by usage.prompt_tokens), or
// prompt_routed_experts [prompt_tokens, layers, top_k] and routed_experts [generated tokens, layers,
// top_k] (top level or in choices[0], equal where both; nested lists or base64 .npy, int8 to int64).
// Rows of dense decoder layers (all zeros) are dropped. Each response id once. Checked against the
// model file and the response's usage; prompt = the prompt array's tokens,
// output = usage.completion_tokens (else the routed tokens + 1: the last token is never fed through
// the model). Requests are sorted by arrival, times relative to the earliest. Responses with fewer
// than 2 generated tokens are skipped and counted.
ImportReport import_vllm(const VllmImportOptions& o);

// Seconds since 1970-01-01 as integer nanoseconds of "YYYY-MM-DD hh:mm:ss[.fraction]"; -1 if malformed
// or outside the years 1900-2200.
int64_t parse_timestamp_ns(const std::string& text);

}  // namespace eldr
