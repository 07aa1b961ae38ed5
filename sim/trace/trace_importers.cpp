#include "sim/trace/trace_importers.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/common/rng.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/trace/expert_array.hpp"
#include "sim/trace/gating_file.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/trace/trace_staging.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <utility>

namespace eldr {

namespace fs = std::filesystem;

namespace {

// DeepSeek-V2-Lite's routed MoE: 26 layers (the first of its 27 is dense), 64 experts, top-6.
constexpr int kEsftLayers           = 26;
constexpr int kEsftExperts          = 64;
constexpr int kEsftTopK             = 6;
constexpr int kDefaultPrefillBudget = 8192;  // configs/default.json serving.prefill_token_budget

std::string fmt(const char* f, double v)
{
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string join(const std::vector<std::string>& v, const std::string& sep)
{
  std::string s;
  for (const auto& x : v)
    s += (s.empty() ? "" : sep) + x;
  return s;
}

void strip_cr(std::string& line)
{
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
}

std::vector<std::string> split_csv(const std::string& line)
{
  std::vector<std::string> cols;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');)
    cols.push_back(c);
  if (!line.empty() && line.back() == ',')
    cols.emplace_back();
  return cols;
}

long parse_long(const std::string& text, const std::string& file, const std::string& field, long min)
{
  long v = 0;
  try {
    size_t used = 0;
    v           = std::stol(text, &used);
    if (used != text.size())
      throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw InputError(file, field, "not an integer: '" + text + "'");
  }
  if (v < min)
    throw InputError(file, field, "must be at least " + std::to_string(min) + ", got " + std::to_string(v));
  return v;
}

// Prompt length rules shared by the request-trace importers. Returns false when the row is dropped.
bool apply_limits(const RequestTraceImportOptions& o, TraceRequest& q, int block_tokens, ImportReport& rep)
{
  rep.takes_max_prompt = true;
  if (q.prompt_tokens < 1) {
    q.prompt_tokens = 1;
    ++rep.clamped_prompts;
  }
  if (q.output_tokens < 2) {
    q.output_tokens = 2;
    ++rep.clamped_outputs;
  }
  if (o.max_prompt > 0 && q.prompt_tokens > o.max_prompt) {
    if (o.drop_long) {
      ++rep.dropped_long;
      return false;
    }
    q.prompt_tokens = o.max_prompt;
    if (block_tokens > 0)
      q.prefix_hashes.resize(
          std::min(q.prefix_hashes.size(), size_t((o.max_prompt + block_tokens - 1) / block_tokens)));
    ++rep.clipped_prompts;
  }
  return true;
}

void finish_report(ImportReport& rep, const std::vector<TraceRequest>& reqs)
{
  rep.requests = long(reqs.size());
  for (const auto& q : reqs) {
    rep.calibration += q.calibration;
    rep.prompts_over_8192 += q.prompt_tokens > kDefaultPrefillBudget;
    rep.max_prompt_written = std::max(rep.max_prompt_written, q.prompt_tokens);
  }
  rep.duration_s = reqs.empty() ? 0 : reqs.back().arrival_s;
}

std::string options_text(const RequestTraceImportOptions& o)
{
  std::string s = "label " + o.label;
  if (o.limit > 0)
    s += ", first " + std::to_string(o.limit) + " rows";
  if (o.time_scale != 1)
    s += ", arrival times x " + fmt("%g", o.time_scale);
  if (o.max_prompt > 0)
    s += std::string(", prompts over ") + std::to_string(o.max_prompt) + " tokens " +
         (o.drop_long ? "dropped" : "clipped");
  return s + ", outputs raised to at least 2 tokens";
}

// What the Azure and Mooncake importers share: the input file, its rows (blank lines skipped, none
// after --limit), their time order, the prompt limits, and the requests written with arrivals
// relative to the first row's time. Time is the file's (integer nanoseconds or milliseconds).
template <class Time> class RequestRows {
 public:
  // unit_s: seconds per unit of Time.
  RequestRows(const RequestTraceImportOptions& o, double unit_s) : o_(o), unit_s_(unit_s)
  {
    if (!(o.time_scale > 0))
      throw InputError("--time-scale", "", "must be positive");
    in_          = open_input_file(o.input);
    stage_       = std::make_unique<StagedTrace>(o.out_dir);
    rep_.out_dir = o.out_dir;
  }

  // Reads the header line, which must start with `header`.
  void require_header(const std::string& header)
  {
    std::string line;
    ++lineno_;
    if (!std::getline(in_, line) || (strip_cr(line), line.rfind(header, 0) != 0))
      throw InputError(o_.input, "header", "expected '" + header + "'");
  }

  // The next non-empty line and its "line N"; false at the end of the file or after --limit rows.
  bool next(std::string& line, std::string& where)
  {
    while (std::getline(in_, line)) {
      ++lineno_;
      strip_cr(line);
      if (line.empty())
        continue;
      if (o_.limit > 0 && rep_.rows >= o_.limit)
        return false;
      where = "line " + std::to_string(lineno_);
      return true;
    }
    return false;
  }

  // Counts the row; its time t (`field` names it) must not be earlier than the previous row's.
  void arrive(Time t, const std::string& field)
  {
    if (rep_.rows == 0)
      t0_ = last_ = t;
    if (t < last_)
      throw InputError(o_.input, field, "earlier than the previous row (rows must be in time order)");
    last_ = t;
    ++rep_.rows;
  }

  // The row's request, arriving at its time, unless the prompt limits drop it.
  void add(TraceRequest q, int block_tokens)
  {
    if (!apply_limits(o_, q, block_tokens, rep_))
      return;
    q.id        = uint32_t(reqs_.size());
    q.arrival_s = double(last_ - t0_) * unit_s_ * o_.time_scale;
    if (!std::isfinite(q.arrival_s))  // blamed on the input line, not on the trace being written
      throw InputError(o_.input, "line " + std::to_string(lineno_),
                       "its arrival, x --time-scale " + fmt("%g", o_.time_scale) +
                           ", is too far from the first "
                           "row's for a time in seconds");
    reqs_.push_back(std::move(q));
  }

  // Writes the trace, labelled with --label, and returns the report.
  ImportReport write(TraceManifest m)
  {
    if (reqs_.empty())
      throw InputError(o_.input, "", "no requests");
    m.labels = {o_.label};
    write_trace(stage_->dir(), m, reqs_, o_.out_dir);
    stage_->commit();
    finish_report(rep_, reqs_);
    return rep_;
  }

 private:
  const RequestTraceImportOptions& o_;
  const double unit_s_;
  std::ifstream in_;
  std::unique_ptr<StagedTrace> stage_;  // the trace appears whole, or not at all
  ImportReport rep_;
  std::vector<TraceRequest> reqs_;
  long lineno_ = 0;
  Time t0_{}, last_{};
};

}  // namespace

std::vector<std::string> ImportReport::summary() const
{
  std::vector<std::string> v;
  v.push_back("read " + std::to_string(rows) + " rows, wrote " + std::to_string(requests) + " requests (" +
              std::to_string(calibration) + " calibration) spanning " + fmt("%.1f", duration_s) + " s to " + out_dir);
  if (skipped_short)
    v.push_back("skipped " + std::to_string(skipped_short) + " sequences too short for 1 prompt + 2 output tokens");
  if (clipped_prompts)
    v.push_back("clipped " + std::to_string(clipped_prompts) + " prompts to --max-prompt");
  if (dropped_long)
    v.push_back("dropped " + std::to_string(dropped_long) + " rows with prompts over --max-prompt");
  if (clamped_outputs)
    v.push_back("raised " + std::to_string(clamped_outputs) + " outputs to the minimum of 2 tokens");
  if (clamped_prompts)
    v.push_back("raised " + std::to_string(clamped_prompts) + " empty prompts to 1 token");
  if (!model.empty())
    v.push_back("model: " + model);
  if (routing_tokens)
    v.push_back("routing: " + std::to_string(routing_tokens) + " tokens, " + fmt("%.2f", double(routing_bytes) / 1e6) +
                " MB");
  v.push_back("longest prompt " + std::to_string(max_prompt_written) + " tokens" +
              (prompts_over_8192 ? "; " + std::to_string(prompts_over_8192) +
                                       " prompts exceed the default serving.prefill_token_budget of 8192: raise it" +
                                       (takes_max_prompt ? " or re-import with --max-prompt" : "")
                                 : std::string()));
  return v;
}

int64_t parse_timestamp_ns(const std::string& text)
{
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d %2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &used) != 6)
    return -1;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || h < 0 || mi < 0 || s < 0)
    return -1;
  if (y < 1900 || y > 2200)  // int64 nanoseconds since 1970 end in 2262
    return -1;
  int64_t frac_ns = 0;
  size_t p        = size_t(used);
  if (p < text.size()) {
    if (text[p] != '.')
      return -1;
    int64_t scale = 100000000;
    for (++p; p < text.size(); ++p, scale /= 10) {
      if (text[p] < '0' || text[p] > '9')
        return -1;
      frac_ns += (text[p] - '0') * scale;  // digits beyond nanoseconds add 0
    }
  }
  // Days from civil (H. Hinnant's algorithm).
  const int yy       = y - (mo <= 2);
  const int era      = (yy >= 0 ? yy : yy - 399) / 400;
  const unsigned yoe = unsigned(yy - era * 400);
  const unsigned doy = unsigned((153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1);
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = int64_t(era) * 146097 + int64_t(doe) - 719468;
  return ((days * 24 + h) * 60 + mi) * 60 * 1000000000LL + int64_t(s) * 1000000000LL + frac_ns;
}

// ---------------------------------------------------------------------------------------------- ESFT

ImportReport import_esft(const EsftImportOptions& o)
{
  if (!(o.prompt_fraction > 0 && o.prompt_fraction < 1))
    throw InputError("--prompt-fraction", "", "must be between 0 and 1 (exclusive)");
  if (!(o.rate_rps > 0))
    throw InputError("--rate", "", "must be positive");
  if (o.repeat < 1)
    throw InputError("--repeat", "", "must be at least 1");
  if (o.domains.empty())
    throw InputError("--domains", "", "no domains");
  StagedTrace stage(o.out_dir);
  ImportReport rep;
  rep.out_dir              = o.out_dir;
  const size_t token_bytes = size_t(kEsftLayers) * kEsftTopK;

  struct Sequence {
    uint16_t label;
    uint32_t record;
    int prompt, output;
    const uint8_t* ids;  // n x 26 x 6 source ids
  };
  std::vector<Sequence> seqs;
  std::vector<std::vector<uint8_t>> bins(o.domains.size());  // every domain's ids, read before anything is written

  for (size_t d = 0; d < o.domains.size(); ++d) {
    const std::string& dom = o.domains[d];
    const std::string bin  = (fs::path(o.data_dir) / ("esft_" + dom + "_top6_u8.bin")).string();
    const std::string csv  = (fs::path(o.data_dir) / ("esft_" + dom + "_seqlens.csv")).string();
    std::error_code ec;
    if (!fs::exists(bin, ec))
      throw InputError(bin, "", "file not found (is --data the ESFT routing directory?)");
    std::vector<uint8_t>& ids = bins[d];
    ids                       = read_input_bytes(bin);
    const auto bin_size       = uint64_t(ids.size());
    if (bin_size % token_bytes != 0)
      throw InputError(bin, "",
                       std::to_string(bin_size) + " bytes is not a whole number of tokens of " +
                           std::to_string(token_bytes) + " bytes (26 layers x 6 ids)");
    const uint64_t bin_tokens = bin_size / token_bytes;

    std::ifstream csv_in = open_input_file(csv);
    std::string line;
    if (!std::getline(csv_in, line) || (strip_cr(line), line != "seq_index,num_tokens,token_offset"))
      throw InputError(csv, "header", "expected 'seq_index,num_tokens,token_offset'");
    long lineno = 1, taken = 0;
    while (std::getline(csv_in, line)) {
      ++lineno;
      strip_cr(line);
      if (line.empty())
        continue;
      if (o.sequences_per_domain > 0 && taken >= o.sequences_per_domain)
        break;
      const auto cols         = split_csv(line);
      const std::string where = "line " + std::to_string(lineno);
      if (cols.size() != 3)
        throw InputError(csv, where, "expected 3 columns");
      const long n      = parse_long(cols[1], csv, where + ": num_tokens", 1);
      const long offset = parse_long(cols[2], csv, where + ": token_offset", 0);
      if (uint64_t(offset) + uint64_t(n) > bin_tokens)
        throw InputError(csv, where,
                         "tokens [" + std::to_string(offset) + ", " + std::to_string(offset + n) + ") lie beyond the " +
                             std::to_string(bin_tokens) + " tokens of " + bin);
      ++taken;
      ++rep.rows;
      if (n < 3) {
        ++rep.skipped_short;
        continue;
      }
      const int prompt = int(std::clamp<long>(long(std::floor(double(n) * o.prompt_fraction)), 1, n - 2));
      // Check the source ids here, so an error names the source file and token.
      const uint8_t* p = &ids[size_t(offset) * token_bytes];
      for (long t = 0; t < n; ++t)
        for (int l = 0; l < kEsftLayers; ++l) {
          uint64_t seen = 0;
          for (int j = 0; j < kEsftTopK; ++j) {
            const unsigned e = p[(size_t(t) * kEsftLayers + size_t(l)) * kEsftTopK + size_t(j)];
            if (e >= unsigned(kEsftExperts) || (seen >> e & 1)) {
              const std::string field =
                  "token " + std::to_string(offset + t) + " (sequence " + cols[0] + ") layer " + std::to_string(l);
              throw InputError(bin, field,
                               "expert id " + std::to_string(e) +
                                   (e >= unsigned(kEsftExperts) ? " >= " + std::to_string(kEsftExperts)
                                                                : std::string(" appears twice")));
            }
            seen |= uint64_t(1) << e;
          }
        }
      seqs.push_back({uint16_t(d), uint32_t(seqs.size()), prompt, int(n - prompt), p});
      rep.routing_tokens += uint64_t(n);
    }
  }
  if (seqs.empty())
    throw InputError(o.data_dir, "", "no usable sequences");
  if (o.calibration >= long(seqs.size()))
    throw InputError("--calibration", "",
                     std::to_string(o.calibration) + " calibration sequences leave none to serve (" +
                         std::to_string(seqs.size()) + " usable sequences)");

  // Routing records in domain and sequence order (record i = sequence i).
  const std::string routing_name = "routing.bin";
  GatingWriter writer((fs::path(stage.dir()) / routing_name).string(), kEsftLayers, kEsftExperts, kEsftTopK, false);
  for (const Sequence& sq : seqs)
    writer.add_record_u8(uint32_t(sq.prompt), uint32_t(sq.output),
                         {sq.ids, size_t(sq.prompt + sq.output) * token_bytes});

  // Order: a seeded shuffle of the sequences; the first N are calibration, the others are served
  // (each `repeat` times, shuffled again so that copies spread out).
  Rng order_rng(o.seed, "import.esft.order");
  auto shuffle = [&](auto& v) {
    for (size_t i = v.size(); i > 1; --i)
      std::swap(v[i - 1], v[size_t(order_rng.below(i))]);
  };
  if (o.shuffle)
    shuffle(seqs);
  std::vector<const Sequence*> served;
  for (int rep_i = 0; rep_i < o.repeat; ++rep_i)
    for (size_t i = size_t(o.calibration); i < seqs.size(); ++i)
      served.push_back(&seqs[i]);
  if (o.shuffle && o.repeat > 1)
    shuffle(served);

  std::vector<TraceRequest> reqs;
  auto add = [&](const Sequence& s, bool calibration, double t) {
    TraceRequest q;
    q.id             = uint32_t(reqs.size());
    q.arrival_s      = t;
    q.prompt_tokens  = s.prompt;
    q.output_tokens  = s.output;
    q.label          = s.label;
    q.calibration    = calibration;
    q.routing_record = int32_t(s.record);
    reqs.push_back(q);
  };
  for (long i = 0; i < o.calibration; ++i)
    add(seqs[size_t(i)], true, 0.0);
  Rng arrivals(o.seed, "import.esft.arrivals");
  double t = 0;
  for (const Sequence* s : served) {
    t += arrivals.exponential(o.rate_rps);
    add(*s, false, t);
  }

  writer.close();
  rep.routing_bytes = writer.bytes_written();
  TraceManifest m;
  m.model        = TraceModel{"deepseek-v2-lite", kEsftLayers, kEsftExperts, kEsftTopK};
  m.labels       = o.domains;
  m.routing_file = routing_name;
  m.source       = "ESFT expert routing (deepseek-ai/ESFT results/expert_scores/{" + join(o.domains, ",") +
             "}, ESFT-vanilla-lite = DeepSeek-V2-Lite architecture; repo code MIT, result files state no licence), "
             "teacher-forced whole sequences, as shipped in traces/routing/esft_deepseek_v2_lite. Imported by "
             "`eldrsim trace import esft`: one request per sequence labelled by its domain; prompt = the first " +
             fmt("%g", o.prompt_fraction) + " of its tokens (floor, at least 1, leaving at least 2 output tokens), " +
             "output = the rest; " + std::to_string(rep.skipped_short) + " sequences under 3 tokens skipped" +
             (o.sequences_per_domain > 0 ? "; first " + std::to_string(o.sequences_per_domain) + " sequences per domain"
                                         : std::string()) +
             "; " + (o.shuffle ? "shuffled" : "in domain order") + " with seed " + std::to_string(o.seed) + "; first " +
             std::to_string(o.calibration) + " flagged calibration; served sequences x " + std::to_string(o.repeat) +
             "; Poisson arrivals at " + fmt("%g", o.rate_rps) + " req/s (ESFT has no times).";
  write_trace(stage.dir(), m, reqs, o.out_dir);
  stage.commit();
  finish_report(rep, reqs);
  return rep;
}

// --------------------------------------------------------------------------------------------- Azure

ImportReport import_azure(const RequestTraceImportOptions& opt)
{
  RequestTraceImportOptions o = opt;
  if (o.label.empty())
    o.label = fs::path(o.input).filename().string().find("code") != std::string::npos ? "code" : "chat";
  RequestRows<int64_t> rows(o, 1e-9);  // integer nanoseconds: their differences stay exact
  rows.require_header("TIMESTAMP,ContextTokens,GeneratedTokens");
  std::string line;
  for (std::string where; rows.next(line, where);) {
    const auto cols = split_csv(line);
    if (cols.size() != 3)
      throw InputError(o.input, where, "expected 3 columns");
    const int64_t ns = parse_timestamp_ns(cols[0]);
    if (ns < 0)
      throw InputError(o.input, where + ": TIMESTAMP", "not a 'YYYY-MM-DD hh:mm:ss.fraction' time: '" + cols[0] + "'");
    rows.arrive(ns, where + ": TIMESTAMP");
    TraceRequest q;
    q.prompt_tokens = int(std::min<long>(parse_long(cols[1], o.input, where + ": ContextTokens", 0), 1 << 30));
    q.output_tokens = int(std::min<long>(parse_long(cols[2], o.input, where + ": GeneratedTokens", 0), 1 << 30));
    rows.add(q, 0);
  }
  TraceManifest m;
  m.source = "Azure LLM inference trace 2023 (Azure/AzurePublicDataset data/AzureLLMInferenceTrace_{conv,code}.csv, "
             "2023-11-16; CC-BY-4.0, cite Splitwise, ISCA'24), from " +
             fs::path(o.input).filename().string() +
             ". Imported by `eldrsim trace import azure`: arrival = TIMESTAMP - first row's, prompt = ContextTokens, "
             "output = GeneratedTokens; " +
             options_text(o) + ". No routing.";
  return rows.write(m);
}

// ------------------------------------------------------------------------------------------ Mooncake

ImportReport import_mooncake(const RequestTraceImportOptions& opt)
{
  RequestTraceImportOptions o = opt;
  if (o.label.empty())
    o.label = "chat";
  constexpr int kBlock = 512;  // Mooncake hash_ids cover 512-token blocks
  RequestRows<double> rows(o, 1e-3);
  std::string line;
  for (std::string where; rows.next(line, where);) {
    const Json row = parse_json(line, o.input, where);
    JsonReader r(row, o.input, where);
    const double ts = r.require_number("timestamp", 0);
    TraceRequest q;
    q.prompt_tokens = int(r.require_integer("input_length", 0, 1 << 30));
    q.output_tokens = int(r.require_integer("output_length", 0, 1 << 30));
    for (long h : r.integer_list("hash_ids", {}, 0, std::numeric_limits<long>::max()))
      q.prefix_hashes.push_back(uint64_t(h));
    r.finish();
    rows.arrive(ts, where + ".timestamp");
    const size_t blocks = size_t((std::max(q.prompt_tokens, 1) + kBlock - 1) / kBlock);
    if (q.prefix_hashes.size() > blocks)
      throw InputError(o.input, where + ".hash_ids",
                       std::to_string(q.prefix_hashes.size()) + " hashes for " + std::to_string(q.prompt_tokens) +
                           " tokens (" + std::to_string(blocks) + " blocks of 512)");
    rows.add(std::move(q), kBlock);
  }
  TraceManifest m;
  m.prefix_block_tokens = kBlock;
  m.source = "Mooncake conversation trace (kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl, "
             "Apache-2.0), from " +
             fs::path(o.input).filename().string() +
             ". Imported by `eldrsim trace import mooncake`: arrival = (timestamp - first row's) ms, prompt = "
             "input_length, output = output_length, prefix_hashes = hash_ids as given (512-token blocks); " +
             options_text(o) + ". No routing.";
  return rows.write(m);
}

// ---------------------------------------------------------------------------------------------- vLLM

namespace {

std::string dims_text(const std::array<size_t, 3>& s)
{
  return "(" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + ")";
}

// request_id,arrival_s -> seconds, for --arrivals.
std::map<std::string, double> read_arrivals_csv(const std::string& path)
{
  std::ifstream in = open_input_file(path);
  std::string line;
  if (!std::getline(in, line) || (strip_cr(line), line != "request_id,arrival_s"))
    throw InputError(path, "header", "expected 'request_id,arrival_s'");
  std::map<std::string, double> m;
  for (long lineno = 2; std::getline(in, line); ++lineno) {
    strip_cr(line);
    if (line.empty())
      continue;
    const std::string where = "line " + std::to_string(lineno);
    const auto cols         = split_csv(line);
    if (cols.size() != 2 || cols[0].empty())
      throw InputError(path, where, "expected 2 columns: request_id,arrival_s");
    double t = 0;
    try {
      size_t used = 0;
      t           = std::stod(cols[1], &used);
      if (used != cols[1].size() || !std::isfinite(t))
        throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw InputError(path, where + ": arrival_s", "not a number: '" + cols[1] + "'");
    }
    if (!m.emplace(cols[0], t).second)
      throw InputError(path, where + ": request_id", "'" + cols[0] + "' appears twice");
  }
  return m;
}

// One response's routing, checked against the model: ids of its prompt tokens then its generated ones.
struct VllmRequest {
  double arrival = 0;
  std::string where;  // its input line, for an arrival the trace cannot hold
  std::string label;
  int prompt = 0, output = 0;
  uint32_t routed_output = 0;  // generated tokens with routing (output or output - 1)
  std::vector<uint16_t> ids;
};

void append_ids(const ExpertArray& a, const ModelSpec& m, const std::string& model_file, const std::string& file,
                const std::string& field, std::vector<uint16_t>& out)
{
  if (a.shape[0] > 0 && (a.shape[1] != size_t(m.layers) || a.shape[2] != size_t(m.top_k)))
    throw InputError(file, field,
                     "shape " + dims_text(a.shape) + " (tokens, layers, top_k) does not fit " + model_file + ": " +
                         std::to_string(m.layers) + " MoE layers, top-" + std::to_string(m.top_k) +
                         " (is --model the served model?)");
  std::vector<uint32_t> seen(size_t(m.experts), UINT32_MAX);
  for (size_t t = 0; t < a.shape[0]; ++t)
    for (size_t l = 0; l < a.shape[1]; ++l) {
      const uint32_t group = uint32_t(t * a.shape[1] + l);
      for (size_t k = 0; k < a.shape[2]; ++k) {
        const int64_t e     = a.at(t, l, k);
        const std::string f = field + "[" + std::to_string(t) + "][" + std::to_string(l) + "]";
        if (e < 0 || e >= m.experts)
          throw InputError(file, f,
                           "expert id " + std::to_string(e) + " out of range: " + model_file + " has " +
                               std::to_string(m.experts) + " experts (0.." + std::to_string(m.experts - 1) + ")");
        if (seen[size_t(e)] == group)
          throw InputError(file, f, "expert id " + std::to_string(e) + " appears twice");
        seen[size_t(e)] = group;
        out.push_back(uint16_t(e));
      }
    }
}

// Tokens [from, to) of `a`.
ExpertArray token_rows(const ExpertArray& a, size_t from, size_t to)
{
  ExpertArray r;
  r.shape                = {to - from, to > from ? a.shape[1] : 0, to > from ? a.shape[2] : 0};
  r.encoding             = a.encoding;
  const size_t per_token = a.shape[1] * a.shape[2];
  r.values.assign(a.values.begin() + std::ptrdiff_t(from * per_token),
                  a.values.begin() + std::ptrdiff_t(to * per_token));
  return r;
}

// vLLM's arrays have a row for every decoder layer (hf_config.num_hidden_layers), the dense ones
// (DeepSeek's first) left at zero; the model files count MoE layers only. Drops those rows: layers
// all of whose ids are 0 for every token (a MoE layer never repeats an id within a token when
// top_k > 1), when that leaves exactly the model's MoE layers.
void drop_dense_layers(ExpertArray& a, const ModelSpec& m, const std::string& model_file, const std::string& file,
                       const std::string& field)
{
  if (a.shape[0] == 0 || a.shape[1] <= size_t(m.layers) || a.shape[2] != size_t(m.top_k))
    return;
  std::vector<bool> dense(a.shape[1], m.top_k > 1);
  for (size_t i = 0; i < a.values.size(); ++i)
    if (a.values[i] != 0)
      dense[(i / a.shape[2]) % a.shape[1]] = false;
  const size_t n_dense = size_t(std::count(dense.begin(), dense.end(), true));
  if (a.shape[1] - n_dense != size_t(m.layers))
    throw InputError(file, field,
                     "shape " + dims_text(a.shape) + " has " + std::to_string(a.shape[1]) + " layers, " + model_file +
                         " has " + std::to_string(m.layers) + " MoE layers, and " + std::to_string(n_dense) +
                         " layers hold only zeros (dense layers): is --model the served model?");
  ExpertArray r;
  r.shape    = {a.shape[0], size_t(m.layers), a.shape[2]};
  r.encoding = a.encoding;
  r.values.reserve(r.shape[0] * r.shape[1] * r.shape[2]);
  for (size_t t = 0; t < a.shape[0]; ++t)
    for (size_t l = 0; l < a.shape[1]; ++l)
      if (!dense[l])
        for (size_t k = 0; k < a.shape[2]; ++k)
          r.values.push_back(a.at(t, l, k));
  a = std::move(r);
}

}  // namespace

ImportReport import_vllm(const VllmImportOptions& o)
{
  const ModelSpec model = load_model(o.model_file);
  if (o.calibration < 0)
    throw InputError("--calibration", "", "must be at least 0");
  std::map<std::string, double> arrivals;
  if (!o.arrivals_csv.empty())
    arrivals = read_arrivals_csv(o.arrivals_csv);
  std::ifstream in = open_input_file(o.input);
  StagedTrace stage(o.out_dir);
  std::map<std::string, long> id_lines;  // request id -> the line that had it

  ImportReport rep;
  rep.out_dir = o.out_dir;
  std::vector<VllmRequest> reqs;
  std::string served, encodings, line;
  for (long lineno = 1; std::getline(in, line); ++lineno) {
    strip_cr(line);
    if (line.empty())
      continue;
    const std::string where = "line " + std::to_string(lineno);
    const Json row          = parse_json(line, o.input, where);
    if (!row.is_object())
      throw InputError(o.input, where, "expected a JSON object (one completion response)");
    ++rep.rows;
    VllmRequest q;
    q.where = where;

    // Each array is in the response itself or in its single choice; in both, it must be the same.
    const Json* choice = nullptr;
    if (row.contains("choices") && row["choices"].is_array() && !row["choices"].empty())
      choice = &row["choices"][0];
    struct Found {
      ExpertArray a;
      std::string field;
      bool present = false;
    };
    auto array = [&](const char* key) {
      auto present   = [&](const Json* j) { return j && j->is_object() && j->contains(key) && !(*j)[key].is_null(); };
      const bool top = present(&row), in_choice = present(choice);
      Found f;
      if (!top && !in_choice)
        return f;
      if (!top && row["choices"].size() > 1)
        throw InputError(o.input, where + ": choices",
                         "has " + std::to_string(row["choices"].size()) + " completions; import responses of n = 1");
      f.present = true;
      f.field   = where + ": " + (top ? "" : "choices[0].") + key;
      f.a       = parse_expert_array(top ? row[key] : (*choice)[key], o.input, f.field);
      if (top && in_choice) {
        const ExpertArray c = parse_expert_array((*choice)[key], o.input, where + ": choices[0]." + key);
        if (c.shape != f.a.shape || c.values != f.a.values)
          throw InputError(o.input, where + ": " + key,
                           std::string("given both at the top level and in choices[0], with different content: "
                                       "keep the one the server returned"));
      }
      return f;
    };
    Found prompt = array("prompt_routed_experts");
    Found gen    = array("routed_experts");
    if (!gen.present)
      throw InputError(o.input, where + ": routed_experts",
                       "missing (start vLLM with --enable-return-routed-experts, and keep the whole response)");

    long usage_prompt = -1, usage_completion = -1;
    if (row.contains("usage") && row["usage"].is_object()) {
      JsonReader usage(row["usage"], o.input, where + ": usage");
      if (usage.has("prompt_tokens"))
        usage_prompt = usage.require_integer("prompt_tokens", 0, 1 << 30);
      if (usage.has("completion_tokens"))
        usage_completion = usage.require_integer("completion_tokens", 0, 1 << 30);
    }
    // vLLM's own layout: one array over the whole sequence (prompt tokens, then every generated
    // token but the last), on the choice; usage.prompt_tokens splits it.
    if (!prompt.present) {
      if (usage_prompt < 1)
        throw InputError(o.input, gen.field,
                         "covers prompt and output (no prompt_routed_experts), but the response has no "
                         "usage.prompt_tokens to split it by: keep the whole response");
      if (gen.a.shape[0] < size_t(usage_prompt))
        throw InputError(o.input, gen.field,
                         std::to_string(gen.a.shape[0]) + " tokens, fewer than usage.prompt_tokens (" +
                             std::to_string(usage_prompt) + ")");
      drop_dense_layers(gen.a, model, o.model_file, o.input, gen.field);
      prompt.a     = token_rows(gen.a, 0, size_t(usage_prompt));
      prompt.field = gen.field + " (prompt tokens)";
      gen.a        = token_rows(gen.a, size_t(usage_prompt), gen.a.shape[0]);
      gen.field += " (generated tokens)";
    } else {
      drop_dense_layers(prompt.a, model, o.model_file, o.input, prompt.field);
      drop_dense_layers(gen.a, model, o.model_file, o.input, gen.field);
    }
    std::vector<uint16_t> ids;
    append_ids(prompt.a, model, o.model_file, o.input, prompt.field, ids);
    append_ids(gen.a, model, o.model_file, o.input, gen.field, ids);
    if (prompt.a.shape[0] == 0)
      throw InputError(o.input, prompt.field, "has no tokens");
    for (const ExpertArray* a : {&prompt.a, &gen.a})
      if (encodings.find(a->encoding) == std::string::npos)
        encodings += (encodings.empty() ? "" : ", ") + a->encoding;

    // Lengths: the routing's, checked against usage when the response has it.
    q.prompt        = int(std::min<size_t>(prompt.a.shape[0], 1 << 30));
    q.routed_output = uint32_t(std::min<size_t>(gen.a.shape[0], 1 << 30));
    q.output        = int(q.routed_output) + 1;
    if (usage_prompt >= 0 && usage_prompt != q.prompt)
      throw InputError(o.input, prompt.field,
                       std::to_string(q.prompt) + " tokens, but usage.prompt_tokens is " +
                           std::to_string(usage_prompt));
    if (usage_completion >= 0) {
      const long n = usage_completion;
      if (long(q.routed_output) != n && long(q.routed_output) != n - 1)
        throw InputError(o.input, gen.field,
                         std::to_string(q.routed_output) + " tokens, but usage.completion_tokens is " +
                             std::to_string(n) + " (want that or one less)");
      q.output = int(n);
    }

    // Each response once: two lines of one request would share its arrival and serve it twice.
    if (row.contains(o.id_field) && (row[o.id_field].is_string() || row[o.id_field].is_number_integer())) {
      const Json& id         = row[o.id_field];
      const std::string key  = id.is_string() ? id.get<std::string>() : id.dump();
      const auto [it, fresh] = id_lines.emplace(key, lineno);
      if (!fresh)
        throw InputError(o.input, where + ": " + o.id_field,
                         "'" + key + "' is also the id of line " + std::to_string(it->second) +
                             " (each response once: remove the duplicate line)");
    }

    // The model the server says it ran.
    if (row.contains("model") && row["model"].is_string()) {
      const std::string& name = row["model"].get_ref<const std::string&>();
      if (served.empty())
        served = name;
      else if (name != served)
        throw InputError(o.input, where + ": model", "'" + name + "', but earlier lines are '" + served + "'");
    }

    // Arrival: the line's field, or the CSV row of its id.
    if (o.arrivals_csv.empty()) {
      if (!row.contains(o.arrival_field))
        throw InputError(o.input, where + ": " + o.arrival_field,
                         "missing (add each request's arrival time in seconds to its line, or give --arrivals CSV)");
      if (!row[o.arrival_field].is_number() || !std::isfinite(row[o.arrival_field].get<double>()))
        throw InputError(o.input, where + ": " + o.arrival_field, "not a number: " + row[o.arrival_field].dump());
      q.arrival = row[o.arrival_field].get<double>();
    } else {
      const Json* id = row.contains(o.id_field) ? &row[o.id_field] : nullptr;
      if (!id || !(id->is_string() || id->is_number_integer()))
        throw InputError(o.input, where + ": " + o.id_field,
                         "missing (a string or integer request id to join --arrivals by)");
      const std::string key = id->is_string() ? id->get<std::string>() : id->dump();
      const auto it         = arrivals.find(key);
      if (it == arrivals.end())
        throw InputError(o.input, where + ": " + o.id_field, "'" + key + "' is not in " + o.arrivals_csv);
      q.arrival = it->second;
    }
    if (row.contains("label")) {
      if (!row["label"].is_string() || row["label"].get_ref<const std::string&>().empty())
        throw InputError(o.input, where + ": label", "not a non-empty string");
      q.label = row["label"].get<std::string>();
    } else {
      q.label = o.label;
    }
    if (q.output < 2) {
      ++rep.skipped_short;
      continue;
    }
    q.ids = std::move(ids);
    reqs.push_back(std::move(q));
  }
  if (reqs.empty())
    throw InputError(o.input, "", "no usable responses");
  if (o.calibration >= long(reqs.size()))
    throw InputError("--calibration", "",
                     std::to_string(o.calibration) + " calibration requests leave none to serve (" +
                         std::to_string(reqs.size()) + " usable responses)");

  // Arrival order (ties: file order), times relative to the first.
  std::stable_sort(reqs.begin(), reqs.end(),
                   [](const VllmRequest& a, const VllmRequest& b) { return a.arrival < b.arrival; });
  const double t0 = reqs.front().arrival;
  TraceManifest m;
  m.model = TraceModel{model.name, model.layers, model.experts, model.top_k};
  std::vector<TraceRequest> out;
  const std::string routing_name = "routing.bin";
  GatingWriter writer((fs::path(stage.dir()) / routing_name).string(), model.layers, model.experts, model.top_k, false);
  for (const VllmRequest& r : reqs) {
    auto lab = std::find(m.labels.begin(), m.labels.end(), r.label);
    if (lab == m.labels.end())
      lab = m.labels.insert(m.labels.end(), r.label);
    TraceRequest q;
    q.id        = uint32_t(out.size());
    q.arrival_s = r.arrival - t0;
    if (!std::isfinite(q.arrival_s))  // blamed on the input line, not on the trace being written
      throw InputError(o.input, r.where + ": " + (o.arrivals_csv.empty() ? o.arrival_field : o.id_field),
                       "its arrival is too far from the first one's (" + fmt("%g", r.arrival) + " s after " +
                           fmt("%g", t0) + " s) for a time in seconds");
    q.prompt_tokens  = r.prompt;
    q.output_tokens  = r.output;
    q.label          = uint16_t(lab - m.labels.begin());
    q.calibration    = long(out.size()) < o.calibration;
    q.routing_record = int32_t(writer.add_record(uint32_t(r.prompt), r.routed_output, r.ids));
    rep.routing_tokens += uint64_t(r.prompt) + r.routed_output;
    out.push_back(std::move(q));
  }
  writer.close();
  rep.routing_bytes     = writer.bytes_written();
  const std::string who = served.empty() ? "an unnamed model (the responses have no 'model' field)"
                                         : "'" + served + "' (the responses' model field)";
  rep.model             = "expert ids of " + who + ", checked against " + o.model_file + " (" + model.name + ": " +
              std::to_string(model.layers) + " MoE layers, " + std::to_string(model.experts) + " experts, top-" +
              std::to_string(model.top_k) + ")";
  m.routing_file = routing_name;
  m.source       = "Real routing captured from vLLM (--enable-return-routed-experts) by the user: " +
             fs::path(o.input).filename().string() + ", " + rep.model + "; arrays as " + encodings +
             ". Imported by `eldrsim trace import vllm`: one request per response, prompt = prompt_routed_experts' "
             "tokens (or routed_experts' first usage.prompt_tokens rows), output = usage.completion_tokens (else "
             "routed tokens + 1); arrivals from " +
             (o.arrivals_csv.empty() ? "each line's " + o.arrival_field
                                     : fs::path(o.arrivals_csv).filename().string() + " joined by " + o.id_field) +
             ", relative to the first; " + std::to_string(rep.skipped_short) +
             " responses under 2 generated tokens skipped; first " + std::to_string(o.calibration) +
             " by arrival flagged calibration.";
  write_trace(stage.dir(), m, out, o.out_dir);
  stage.commit();
  finish_report(rep, out);
  return rep;
}

}  // namespace eldr
