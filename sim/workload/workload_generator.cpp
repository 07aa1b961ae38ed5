#include "sim/workload/workload_generator.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/rng.hpp"
#include "sim/trace/trace_importers.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace eldr {

static bool dataset_matches(std::string_view dataset, std::string_view wanted)
{
  return dataset == wanted || (dataset.size() > wanted.size() && dataset.substr(0, wanted.size()) == wanted &&
                               dataset[wanted.size()] == '/');
}

// The CSV file past its header line, which must start with `header` (else `expected` is the error).
static std::ifstream open_csv(const std::string& csv_path, const std::string& header, const std::string& expected)
{
  std::ifstream in = open_input_file(csv_path);
  std::string line;
  if (!std::getline(in, line) || line.rfind(header, 0) != 0)
    throw InputError(csv_path, "header", expected);
  return in;
}

LengthTable load_prompt_lengths(const std::string& csv_path, const std::vector<TaskLabel>& labels)
{
  std::ifstream in =
      open_csv(csv_path, "domain,dataset,item_id,prompt_tokens", "expected 'domain,dataset,item_id,prompt_tokens,...'");
  // The rest of the file at once, split in place (a stream and strings per line cost ~1 us a row);
  // fields as getline(',') gives them: a trailing comma adds no empty field.
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::string_view all(text);
  LengthTable table;
  long lineno = 1;
  std::vector<std::string_view> cols;
  std::string field3;
  for (size_t at = 0; at < all.size();) {
    size_t end = all.find('\n', at);
    if (end == std::string_view::npos)
      end = all.size();
    const std::string_view line = all.substr(at, end - at);
    at                          = end + 1;
    ++lineno;
    if (line.empty())
      continue;
    cols.clear();
    for (size_t from = 0; from < line.size();) {
      size_t comma = line.find(',', from);
      if (comma == std::string_view::npos)
        comma = line.size();
      cols.push_back(line.substr(from, comma - from));
      from = comma + 1;
    }
    if (cols.size() < 4)
      throw InputError(csv_path, "line " + std::to_string(lineno), "expected at least 4 columns");
    field3.assign(cols[3]);
    int tokens = 0;
    try {
      size_t used = 0;
      tokens      = std::stoi(field3, &used);
      if (used != field3.size() || tokens < 0)
        throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw InputError(csv_path, "line " + std::to_string(lineno) + ": prompt_tokens",
                       "not a non-negative integer: '" + field3 + "'");
    }
    for (const auto& l : labels)
      for (const auto& d : l.datasets)
        if (dataset_matches(cols[1], d))
          table[l.name].push_back(tokens);
  }
  for (const auto& l : labels)
    if (table[l.name].empty())
      throw InputError(csv_path, l.name, "no rows for the datasets of this label");
  return table;
}

LengthTable load_chat_lengths(const std::string& csv_path, const std::vector<TaskLabel>& labels)
{
  // The prompt-length column of either format, found by name in the header line.
  std::ifstream in = open_input_file(csv_path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  std::stringstream hs(line);
  for (std::string c; std::getline(hs, c, ',');)
    header.push_back(c);
  size_t column = header.size();
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == "first_input_tokens" || header[i] == "ContextTokens")
      column = i;
  if (column == header.size())
    throw InputError(csv_path, "header",
                     "expected 'session,num_turns,first_input_tokens,...' (WildChat first turns) or "
                     "'TIMESTAMP,ContextTokens,GeneratedTokens' (Azure 2023)");
  std::vector<int> pool;
  long lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty())
      continue;
    std::stringstream ss(line);
    std::string field;
    size_t read = 0;
    while (read <= column && std::getline(ss, field, ','))
      ++read;
    if (read <= column)
      field.clear();  // a short row: no such column
    int tokens = -1;
    try {
      size_t used = 0;
      tokens      = std::stoi(field, &used);
      if (used != field.size())
        tokens = -1;
    } catch (const std::exception&) {
    }
    if (tokens < 0)
      throw InputError(csv_path, "line " + std::to_string(lineno) + ": " + header[column],
                       "not a non-negative integer");
    pool.push_back(tokens);
  }
  if (pool.empty())
    throw InputError(csv_path, "", "no rows");
  LengthTable table;
  for (const auto& l : labels)
    table[l.name] = pool;
  return table;
}

std::vector<double> load_arrival_gaps(const std::string& csv_path)
{
  std::ifstream in = open_csv(csv_path, "TIMESTAMP,", "expected 'TIMESTAMP,...' (the Azure 2023 trace format)");
  std::string line;
  std::vector<double> gaps;
  int64_t last = -1;
  long lineno  = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r")
      continue;
    const int64_t ns = parse_timestamp_ns(line.substr(0, line.find(',')));
    if (ns < 0)
      throw InputError(csv_path, "line " + std::to_string(lineno) + ": TIMESTAMP", "not a 'YYYY-MM-DD hh:mm:ss' time");
    if (last >= 0) {
      if (ns < last)
        throw InputError(csv_path, "line " + std::to_string(lineno) + ": TIMESTAMP", "earlier than the previous row");
      gaps.push_back(double(ns - last) * 1e-9);
    }
    last = ns;
  }
  double total = 0;
  for (double g : gaps)
    total += g;
  if (gaps.empty() || total <= 0)
    throw InputError(csv_path, "", "needs at least two rows spanning some time");
  return gaps;
}

namespace {

// Arrival gaps: Poisson at a rate, or a log's gaps in order (wrapping around), rescaled so their mean
// rate is the configured one: the log's burstiness at the experiment's load.
class ArrivalClock {
 public:
  ArrivalClock(const WorkloadSpec& spec, uint64_t seed, const std::vector<double>& gaps)
      : warm_(seed, "workload.arrivals.warmup"), measured_(seed, "workload.arrivals.measured"), gaps_(gaps),
        warm_rate_(spec.warmup_rate_rps), rate_(spec.rate_rps)
  {
    double total = 0;
    for (double g : gaps_)
      total += g;
    mean_gap_ = gaps_.empty() ? 0 : total / double(gaps_.size());
  }
  double next_gap(bool measured)
  {
    const double rate = measured ? rate_ : warm_rate_;
    if (gaps_.empty())
      return (measured ? measured_ : warm_).exponential(rate);
    return gaps_[next_++ % gaps_.size()] / mean_gap_ / rate;
  }

 private:
  Rng warm_, measured_;
  const std::vector<double>& gaps_;
  double warm_rate_, rate_, mean_gap_ = 0;
  size_t next_ = 0;
};

// Draws request contents: label by weight, prompt length from the label's pool, fresh hashes.
class RequestDrawer {
 public:
  RequestDrawer(const WorkloadSpec& spec)
      : spec_(spec), labels_(spec.labels),
        lengths_(spec.kind == WorkloadKind::language ? load_chat_lengths(spec.lengths_file, labels_)
                                                     : load_prompt_lengths(spec.lengths_file, labels_))
  {
    if (labels_.empty())
      throw std::invalid_argument("generate_workload: WorkloadSpec::labels is empty (load_workload_labels fills it)");
    // The testbed kept the prompts of prompt_min..prompt_max tokens and dropped the others; clamping
    // them instead would pile every long prompt at exactly prompt_max.
    for (auto& [name, pool] : lengths_) {
      std::erase_if(pool, [&](int n) { return n < spec.prompt_min_tokens || n > spec.prompt_max_tokens; });
      if (pool.empty())
        throw InputError(spec.lengths_file, name,
                         "no prompt of " + std::to_string(spec.prompt_min_tokens) + " to " +
                             std::to_string(spec.prompt_max_tokens) +
                             " tokens (workload.prompt_min_tokens, "
                             "workload.prompt_max_tokens)");
    }
    for (const auto& l : labels_)
      total_weight_ += l.weight;
  }
  std::vector<std::string> label_names() const
  {
    std::vector<std::string> v;
    for (const auto& l : labels_)
      v.push_back(l.name);
    return v;
  }
  std::vector<bool> minor_labels() const
  {
    std::vector<bool> v;
    for (const auto& l : labels_)
      v.push_back(l.minor);
    return v;
  }
  // `mix`: label weights by index (a drift schedule's piece); null: the labels' own weights.
  Request draw(Rng& content, const std::vector<double>* mix = nullptr) const
  {
    Request r;
    auto weight  = [&](size_t k) { return mix ? (*mix)[k] : labels_[k].weight; };
    double total = total_weight_;
    if (mix) {
      total = 0;
      for (double x : *mix)
        total += x;
    }
    // One uniform draw per request whatever the mix, so the content stream stays aligned across mixes.
    double u = content.uniform01() * total;
    size_t k = 0;
    while (k + 1 < labels_.size() && (u >= weight(k) || weight(k) <= 0)) {
      u -= weight(k);
      ++k;
    }
    r.label          = uint16_t(k);
    const auto& pool = lengths_.at(labels_[k].name);
    r.prompt_tokens  = pool[content.below(pool.size())] + spec_.template_tokens();
    r.output_tokens  = spec_.output_tokens;
    r.prefix_hash    = content();  // every synthetic prompt is distinct
    r.routing_seed   = content();
    return r;
  }

 private:
  const WorkloadSpec& spec_;
  const std::vector<TaskLabel>& labels_;
  LengthTable lengths_;
  double total_weight_ = 0;
};

// Prompt sharing for prefix-caching studies (docs/model.md, "Prefix caching"): requests may repeat
// prompts of a pool and may start with a shared system prompt. Either gives every request block
// hashes of kHashBlockTokens tokens, chained so that equal hashes mean an equal prefix.
class PromptSharing {
 public:
  static constexpr int kHashBlockTokens = 16;

  PromptSharing(const WorkloadSpec& spec, const RequestDrawer& drawer, uint64_t seed)
      : spec_(spec), system_seed_(stream_seed(seed, "workload.system_prompt"))
  {
    Rng prompts(seed, "workload.prompts");
    for (long i = 0; i < spec.distinct_prompts; ++i)
      pool_.push_back(drawer.draw(prompts));
  }
  bool active() const { return !pool_.empty() || spec_.system_prompts > 0; }

  // The n-th served prompt: the pool in a shuffled order, then drawn with replacement.
  std::vector<size_t> served_order(long n, uint64_t seed) const
  {
    std::vector<size_t> order;
    if (pool_.empty())
      return order;
    Rng rng(seed, "workload.prompt_order");
    std::vector<size_t> first(pool_.size());
    for (size_t i = 0; i < first.size(); ++i)
      first[i] = i;
    for (size_t i = first.size(); i > 1; --i)  // Fisher-Yates
      std::swap(first[i - 1], first[rng.below(i)]);
    for (long i = 0; i < n; ++i)
      order.push_back(size_t(i) < first.size() ? first[size_t(i)] : rng.below(pool_.size()));
    return order;
  }
  const Request& pooled(size_t i) const { return pool_[i]; }

  // Puts a system prompt (drawn from `rng`) in front of r's prompt and appends r's block hashes.
  void finish(Request& r, Rng& rng, Workload& w) const
  {
    const int sys      = spec_.system_prompts > 0 ? spec_.system_prompt_tokens : 0;
    const uint64_t sid = spec_.system_prompts > 0 ? rng.below(uint64_t(spec_.system_prompts)) : 0;
    r.prompt_tokens += sys;
    // The chat template's prefix and the system prompt are the shared head of the prompt; the
    // prompt's own content is named by its prefix_hash: drawn per distinct prompt.
    const int tmpl = spec_.template_prefix_tokens, head = tmpl + sys;
    r.hash_begin = uint32_t(w.prefix_hashes.size());
    uint64_t h   = 0;
    for (int j = 0; j * kHashBlockTokens < r.prompt_tokens; ++j) {
      const int end          = (j + 1) * kHashBlockTokens;
      const uint64_t content = end <= tmpl   ? splitmix64(system_seed_ - 1)  // the template's alone
                               : end <= head ? splitmix64(system_seed_ + sid)
                                             : r.prefix_hash;
      h                      = splitmix64(h ^ splitmix64(content + uint64_t(j)));
      w.prefix_hashes.push_back(h);
    }
    r.hash_count = uint32_t(w.prefix_hashes.size()) - r.hash_begin;
    // Prefill affinity follows the shared system prompt, but not the template: the proxy hashes the
    // request as the client sent it, before the engine applies the template. So the first block that
    // is not the template's alone.
    const uint32_t first = std::min(uint32_t(tmpl / kHashBlockTokens), r.hash_count - 1);
    r.prefix_hash        = w.prefix_hashes[r.hash_begin + first];
  }

 private:
  const WorkloadSpec& spec_;
  uint64_t system_seed_;
  std::vector<Request> pool_;
};

}  // namespace

const std::vector<double>* mix_at(const std::vector<MixPhase>& schedule, double t)
{
  // Pieces start at 0 and increase (validated): the last piece starting at or before t.
  auto it =
      std::upper_bound(schedule.begin(), schedule.end(), t, [](double x, const MixPhase& p) { return x < p.at_s; });
  return it == schedule.begin() ? nullptr : &std::prev(it)->weights;
}

Workload generate_workload(const WorkloadSpec& spec, uint64_t seed)
{
  RequestDrawer drawer(spec);
  PromptSharing sharing(spec, drawer, seed);
  Workload w;
  w.labels          = drawer.label_names();
  w.minor_labels    = drawer.minor_labels();
  w.template_tokens = spec.template_tokens();
  if (w.template_tokens > 0) {
    Request t;
    t.id               = UINT32_MAX;
    t.label            = kTemplateLabel;
    t.measured         = false;
    t.prompt_tokens    = w.template_tokens;
    t.output_tokens    = 0;
    t.routing_seed     = stream_seed(seed, "workload.chat_template");
    w.template_request = std::make_shared<const Request>(t);
  }
  if (sharing.active())
    w.prefix_block_tokens = PromptSharing::kHashBlockTokens;

  Rng calibration(seed, "workload.calibration");
  Rng calibration_system(seed, "workload.calibration.system_prompts");
  for (long i = 0; i < spec.calibration_requests; ++i) {
    Request r  = spec.distinct_prompts > 0 ? sharing.pooled(calibration.below(uint64_t(spec.distinct_prompts)))
                                           : drawer.draw(calibration);
    r.id       = uint32_t(i);
    r.measured = false;
    if (sharing.active())
      sharing.finish(r, calibration_system, w);
    w.calibration.push_back(r);
  }

  Rng content(seed, "workload.requests");
  Rng system(seed, "workload.system_prompts");
  const std::vector<double> gaps =
      spec.arrivals == ArrivalProcess::file ? load_arrival_gaps(spec.arrivals_file) : std::vector<double>{};
  ArrivalClock clock(spec, seed, gaps);
  const long n                    = spec.warmup_requests + spec.measured_requests;
  const std::vector<size_t> order = sharing.served_order(n, seed);
  w.requests.reserve(size_t(n));
  double t_warm = 0, t_meas = 0;
  for (long i = 0; i < n; ++i) {
    // The arrival first: a drifting mix picks the label by it (the two streams are independent).
    const bool measured = i >= spec.warmup_requests;
    if (measured)
      t_meas += clock.next_gap(true);
    else
      t_warm += clock.next_gap(false);
    const double arrival           = measured ? t_meas : t_warm;
    const std::vector<double>* mix = measured ? mix_at(spec.mix_schedule, arrival) : nullptr;
    Request r                      = order.empty() ? drawer.draw(content, mix) : sharing.pooled(order[size_t(i)]);
    r.id                           = uint32_t(i);
    r.measured                     = measured;
    r.arrival_s                    = arrival;
    if (sharing.active())
      sharing.finish(r, system, w);
    w.requests.push_back(r);
  }
  return w;
}

}  // namespace eldr
