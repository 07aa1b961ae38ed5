#include "sim/workload/workload_generator.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace eldr {

const std::vector<TaskLabel>& task_labels()
{
  static const std::vector<TaskLabel> labels = {
      {"code", 2779, {"HumanEval", "MBPP"}},
      {"math", 2744, {"GSM8K"}},
      {"medical", 2545, {"PubMedQA", "MedQA-USMLE"}},
      {"legal", 3600, {"LegalBench"}},
  };
  return labels;
}

static bool dataset_matches(const std::string& dataset, const std::string& wanted)
{
  return dataset == wanted || (dataset.size() > wanted.size() && dataset.compare(0, wanted.size(), wanted) == 0 &&
                               dataset[wanted.size()] == '/');
}

LengthTable load_prompt_lengths(const std::string& csv_path, const std::vector<TaskLabel>& labels)
{
  std::ifstream in(csv_path);
  if (!in)
    throw InputError(csv_path, "", "cannot open file");
  std::string line;
  if (!std::getline(in, line) || line.rfind("domain,dataset,item_id,prompt_tokens", 0) != 0)
    throw InputError(csv_path, "header", "expected 'domain,dataset,item_id,prompt_tokens,...'");
  LengthTable table;
  long lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty())
      continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');)
      cols.push_back(c);
    if (cols.size() < 4)
      throw InputError(csv_path, "line " + std::to_string(lineno), "expected at least 4 columns");
    int tokens = 0;
    try {
      size_t used = 0;
      tokens      = std::stoi(cols[3], &used);
      if (used != cols[3].size() || tokens < 0)
        throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw InputError(csv_path, "line " + std::to_string(lineno) + ": prompt_tokens",
                       "not a non-negative integer: '" + cols[3] + "'");
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

Workload generate_workload(const WorkloadSpec& spec, uint64_t seed)
{
  const auto& labels = task_labels();
  LengthTable lengths = load_prompt_lengths(spec.lengths_file, labels);

  Workload w;
  double total_weight = 0;
  for (const auto& l : labels) {
    w.labels.push_back(l.name);
    total_weight += l.weight;
  }

  Rng content(seed, "workload.requests");
  Rng warm_arrivals(seed, "workload.arrivals.warmup");
  Rng measured_arrivals(seed, "workload.arrivals.measured");
  const long n = spec.warmup_requests + spec.measured_requests;
  w.requests.reserve(size_t(n));
  double t_warm = 0, t_meas = 0;
  for (long i = 0; i < n; ++i) {
    Request r;
    r.id       = uint32_t(i);
    r.measured = i >= spec.warmup_requests;
    if (r.measured)
      t_meas += measured_arrivals.exponential(spec.rate_rps);
    else
      t_warm += warm_arrivals.exponential(spec.warmup_rate_rps);
    r.arrival_s = r.measured ? t_meas : t_warm;

    double u = content.uniform01() * total_weight;
    size_t k = 0;
    while (k + 1 < labels.size() && u >= labels[k].weight) {
      u -= labels[k].weight;
      ++k;
    }
    r.label               = uint16_t(k);
    const auto& pool      = lengths[labels[k].name];
    int prompt            = pool[content.below(pool.size())];
    r.prompt_tokens       = std::clamp(prompt, spec.prompt_min_tokens, spec.prompt_max_tokens);
    r.output_tokens       = spec.output_tokens;
    r.prefix_hash         = content();  // every synthetic prompt is distinct
    r.routing_seed        = content();
    w.requests.push_back(r);
  }
  return w;
}

}  // namespace eldr
