// Workload generator (sim/workload/workload_generator.hpp): labels, lengths, arrivals, determinism.
#include "sim/common/input_error.hpp"
#include "sim/workload/workload_generator.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace eldr;

namespace {

WorkloadSpec spec(long warmup, long measured, double rate)
{
  // The default experiment's workload without the chat template: raw dataset lengths.
  WorkloadSpec s      = load_experiment("configs/default.json", {{"workload.chat_template", "false"}}).workload;
  s.lengths_file      = "traces/task_lengths_cl100k.csv";
  s.labels            = load_workload_labels("traces/workload_labels.json", "task");
  s.warmup_requests   = warmup;
  s.measured_requests = measured;
  s.rate_rps          = rate;
  s.warmup_rate_rps   = 64;
  return s;
}

bool same_content(const Request& a, const Request& b)
{
  return a.id == b.id && a.label == b.label && a.measured == b.measured && a.prompt_tokens == b.prompt_tokens &&
         a.output_tokens == b.output_tokens && a.prefix_hash == b.prefix_hash && a.routing_seed == b.routing_seed;
}

// Prompt lengths per label, read independently of the generator: label datasets as documented in
// workload_generator.cpp (code: HumanEval, MBPP; math: GSM8K; medical: PubMedQA, MedQA-USMLE;
// legal: every LegalBench/ subset). Every row, so that means can be compared.
std::map<std::string, std::vector<int>> lengths_by_label()
{
  std::map<std::string, std::string> label_of = {
      {"HumanEval", "code"}, {"MBPP", "code"}, {"GSM8K", "math"}, {"PubMedQA", "medical"}, {"MedQA-USMLE", "medical"}};
  std::map<std::string, std::vector<int>> out;
  std::ifstream in("traces/task_lengths_cl100k.csv");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string domain, dataset, item, tokens;
    std::getline(ss, domain, ',');
    std::getline(ss, dataset, ',');
    std::getline(ss, item, ',');
    std::getline(ss, tokens, ',');
    std::string label;
    if (label_of.count(dataset))
      label = label_of[dataset];
    else if (dataset.rfind("LegalBench/", 0) == 0)
      label = "legal";
    else
      continue;
    out[label].push_back(std::stoi(tokens));
  }
  return out;
}

// Mean and standard deviation of the values in lo..hi.
std::pair<double, double> moments_within(const std::vector<int>& v, int lo, int hi)
{
  double n = 0, sum = 0, sq = 0;
  for (int x : v)
    if (x >= lo && x <= hi) {
      n += 1;
      sum += x;
      sq += double(x) * x;
    }
  const double mean = sum / n;
  return {mean, std::sqrt(sq / n - mean * mean)};
}

}  // namespace

TEST_CASE("workload: deterministic for a seed and different across seeds")
{
  Workload a = generate_workload(spec(100, 400, 20), 7);
  Workload b = generate_workload(spec(100, 400, 20), 7);
  Workload c = generate_workload(spec(100, 400, 20), 8);
  REQUIRE(a.requests.size() == 500);
  REQUIRE(b.requests.size() == 500);
  long differ = 0;
  for (size_t i = 0; i < 500; ++i) {
    CHECK(same_content(a.requests[i], b.requests[i]));
    CHECK(a.requests[i].arrival_s == b.requests[i].arrival_s);
    differ += !same_content(a.requests[i], c.requests[i]);
  }
  CHECK(differ > 450);
  CHECK(a.labels == std::vector<std::string>{"code", "math", "medical", "legal"});
}

TEST_CASE("workload: label shares follow 2779:2744:2545:3600 over 20k requests")
{
  Workload w = generate_workload(spec(0, 20000, 50), 3);
  std::vector<long> counts(4, 0);
  for (const Request& r : w.requests) {
    REQUIRE(r.label < 4);
    ++counts[r.label];
  }
  const double weights[4] = {2779, 2744, 2545, 3600};
  const double total      = 2779 + 2744 + 2545 + 3600;  // 11668
  for (int k = 0; k < 4; ++k) {
    // Binomial sd at n = 20000, p ~ 0.25: 0.003. Allow 0.01.
    CAPTURE(k);
    CHECK(std::abs(double(counts[size_t(k)]) / 20000.0 - weights[k] / total) < 0.01);
  }
}

TEST_CASE("workload: prompts outside min..max are dropped, not clamped")
{
  // The testbed kept the prompts of 4-1024 tokens. Dropping keeps the shape of the lengths inside the
  // bounds; clamping would pile the long LegalBench prompts at exactly the maximum.
  WorkloadSpec s      = spec(0, 20000, 50);
  s.prompt_min_tokens = 50;
  s.prompt_max_tokens = 300;
  s.output_tokens     = 77;
  Workload w          = generate_workload(s, 5);
  auto lengths        = lengths_by_label();
  std::map<std::string, std::vector<int>> drawn;
  for (const Request& r : w.requests) {
    REQUIRE(r.prompt_tokens >= 50);
    REQUIRE(r.prompt_tokens <= 300);
    CHECK(r.output_tokens == 77);
    const auto& pool = lengths[w.labels[r.label]];
    CHECK(std::find(pool.begin(), pool.end(), r.prompt_tokens) != pool.end());
    drawn[w.labels[r.label]].push_back(r.prompt_tokens);
  }
  // Each label's mean is that of its dataset's lengths within the bounds (4 standard errors).
  for (const auto& [label, v] : drawn) {
    auto [mean, sd] = moments_within(lengths[label], 50, 300);
    auto [got, _sd] = moments_within(v, 50, 300);
    CAPTURE(label);
    CHECK(std::abs(got - mean) < 4 * sd / std::sqrt(double(v.size())));
  }
  // LegalBench has many prompts over 300 tokens; none became 300.
  long at_max      = std::count(drawn["legal"].begin(), drawn["legal"].end(), 300);
  long data_at_max = std::count(lengths["legal"].begin(), lengths["legal"].end(), 300);
  long data_inside = 0;
  for (int x : lengths["legal"])
    data_inside += x >= 50 && x <= 300;
  CHECK(double(at_max) / drawn["legal"].size() < 3 * double(data_at_max) / data_inside + 0.005);

  // Default bounds 4..1024.
  Workload d = generate_workload(spec(0, 5000, 50), 5);
  for (const Request& r : d.requests) {
    CHECK(r.prompt_tokens >= 4);
    CHECK(r.prompt_tokens <= 1024);
  }
  // Bounds no prompt of a label meets are an input error naming the label.
  s.prompt_min_tokens = 2000;
  s.prompt_max_tokens = 2100;
  try {
    generate_workload(s, 1);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("traces/task_lengths_cl100k.csv: code: no prompt of 2000 to 2100 tokens") == 0);
  }
}

TEST_CASE("workload: language prompts are WildChat first turns of 4-1024 tokens (mean ~255), or Azure contexts")
{
  // Read the first_input_tokens column independently and keep 4..1024 as the testbed did.
  std::vector<int> wild;
  {
    std::ifstream in("traces/wildchat_first_turn_cl100k.csv");
    std::string line;
    std::getline(in, line);
    REQUIRE(line == "session,num_turns,first_input_tokens,first_output_tokens");
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string a, b, c;
      std::getline(ss, a, ',');
      std::getline(ss, b, ',');
      std::getline(ss, c, ',');
      wild.push_back(std::stoi(c));
    }
  }
  auto [mean, sd] = moments_within(wild, 4, 1024);
  CHECK(mean == doctest::Approx(255).epsilon(0.01));  // the data README: median 102, mean 255 when kept

  WorkloadSpec s = spec(0, 20000, 50);
  s.kind         = WorkloadKind::language;
  s.labels       = load_workload_labels("traces/workload_labels.json", "language");
  s.lengths_file = "traces/wildchat_first_turn_cl100k.csv";
  Workload w     = generate_workload(s, 3);
  std::vector<int> got;
  for (const Request& r : w.requests)
    got.push_back(r.prompt_tokens);
  auto [m, _] = moments_within(got, 4, 1024);
  CHECK(std::abs(m - mean) < 4 * sd / std::sqrt(double(got.size())));
  CHECK(*std::min_element(got.begin(), got.end()) >= 4);
  CHECK(*std::max_element(got.begin(), got.end()) <= 1024);

  // A row without the length column is an error naming the line and the column.
  auto short_row =
      (std::filesystem::temp_directory_path() / ("eldr-wild-" + std::to_string(::getpid()) + ".csv")).string();
  std::ofstream(short_row) << "session,num_turns,first_input_tokens,first_output_tokens\n0,1,20,44\n1,3\n";
  s.lengths_file = short_row;
  try {
    generate_workload(s, 1);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(short_row + ": line 3: first_input_tokens: not a non-negative integer") == 0);
  }
  std::filesystem::remove(short_row);

  // The Azure 2023 format is still read (ContextTokens), with the same dropping.
  s.lengths_file = "traces/azure2023_conv.csv";
  Workload a     = generate_workload(s, 3);
  for (const Request& r : a.requests)
    REQUIRE(r.prompt_tokens <= 1024);
}

TEST_CASE("workload: warm-up requests come first then the measured ones and ids are indices")
{
  Workload w = generate_workload(spec(100, 300, 7.5), 1);
  REQUIRE(w.requests.size() == 400);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    CHECK(w.requests[i].id == i);
    CHECK(w.requests[i].measured == (i >= 100));
  }
}

TEST_CASE("workload: arrivals increase within each phase with mean gap 1/rate")
{
  const double rate = 40;
  Workload w        = generate_workload(spec(5000, 20000, rate), 9);
  double prev = 0, gaps_warm = 0, gaps_meas = 0;
  long bad = 0;
  for (const Request& r : w.requests) {
    if (r.id == 5000)
      prev = 0;  // the measured phase restarts from its own origin
    bad += !(r.arrival_s > prev);
    (r.measured ? gaps_meas : gaps_warm) += r.arrival_s - prev;
    prev = r.arrival_s;
  }
  CHECK(bad == 0);
  // Mean of n exponential gaps: relative sd 1/sqrt(n) (0.7% at 20k, 1.4% at 5k).
  CHECK(gaps_meas / 20000 == doctest::Approx(1.0 / rate).epsilon(0.03));
  CHECK(gaps_warm / 5000 == doctest::Approx(1.0 / 64).epsilon(0.05));
  // Coefficient of variation of exponential gaps is 1 (Poisson arrivals).
  double sum = 0, sum2 = 0;
  for (size_t i = 5001; i < w.requests.size(); ++i) {
    double g = w.requests[i].arrival_s - w.requests[i - 1].arrival_s;
    sum += g;
    sum2 += g * g;
  }
  const double n    = double(w.requests.size() - 5001);
  const double mean = sum / n;
  const double sd   = std::sqrt(sum2 / n - mean * mean);
  CHECK(sd / mean == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("workload: request contents are identical across rates (common random numbers)")
{
  Workload slow = generate_workload(spec(200, 1000, 20), 4);
  Workload fast = generate_workload(spec(200, 1000, 80), 4);
  REQUIRE(slow.requests.size() == fast.requests.size());
  for (size_t i = 0; i < slow.requests.size(); ++i) {
    const Request& a = slow.requests[i];
    const Request& b = fast.requests[i];
    CHECK(same_content(a, b));
    if (a.measured)
      // Same exponential draws scaled by the rate: 4x the rate, a quarter of the time.
      CHECK(b.arrival_s == doctest::Approx(a.arrival_s / 4).epsilon(1e-9));
    else
      CHECK(b.arrival_s == a.arrival_s);  // warm-up does not depend on the measured rate
  }
  // More measured requests extend the stream without changing its prefix.
  Workload more = generate_workload(spec(200, 1500, 20), 4);
  for (size_t i = 0; i < slow.requests.size(); ++i) {
    CHECK(same_content(slow.requests[i], more.requests[i]));
    CHECK(slow.requests[i].arrival_s == more.requests[i].arrival_s);
  }
}

TEST_CASE("workload: prefix hashes and routing seeds are distinct per request")
{
  Workload w = generate_workload(spec(0, 10000, 50), 2);
  std::set<uint64_t> prefixes, seeds;
  for (const Request& r : w.requests) {
    prefixes.insert(r.prefix_hash);
    seeds.insert(r.routing_seed);
  }
  CHECK(prefixes.size() == 10000);
  CHECK(seeds.size() == 10000);
}

TEST_CASE("workload: bad length files are input errors")
{
  WorkloadSpec s = spec(0, 10, 1);
  s.lengths_file = "traces/definitely-missing.csv";
  CHECK_THROWS_AS(generate_workload(s, 1), InputError);

  auto dir = std::filesystem::temp_directory_path() / ("eldr-unit-wl-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bad_header = (dir / "h.csv").string();
  std::ofstream(bad_header) << "a,b,c\n";
  s.lengths_file = bad_header;
  try {
    generate_workload(s, 1);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(bad_header + ": header") == 0);
  }
  auto bad_value = (dir / "v.csv").string();
  std::ofstream(bad_value) << "domain,dataset,item_id,prompt_tokens\ncode,HumanEval,x,12a\n";
  s.lengths_file = bad_value;
  try {
    generate_workload(s, 1);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(bad_value + ": line 2: prompt_tokens") == 0);
  }
  auto no_legal = (dir / "n.csv").string();
  std::ofstream(no_legal) << "domain,dataset,item_id,prompt_tokens\ncode,HumanEval,x,12\nmath,GSM8K,y,5\n"
                             "medical,PubMedQA,z,7\n";
  s.lengths_file = no_legal;
  try {
    generate_workload(s, 1);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(no_legal + ": legal: no rows") == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("workload labels: the shipped file holds the documented mixes, bad label files are input errors")
{
  auto task = load_workload_labels("traces/workload_labels.json", "task");
  REQUIRE(task.size() == 4);
  CHECK(task[0].name == "code");
  CHECK(task[0].weight == 2779);
  CHECK(task[0].datasets == std::vector<std::string>{"HumanEval", "MBPP"});
  CHECK(task[3].name == "legal");
  CHECK(task[3].weight == 3600);
  auto lang = load_workload_labels("traces/workload_labels.json", "language");
  REQUIRE(lang.size() == 5);
  double total = 0;
  for (const auto& l : lang) {
    total += l.weight;
    CHECK(l.datasets.empty());
  }
  CHECK(total == doctest::Approx(100.0));
  CHECK((lang[0].name == "en" && lang[1].name == "zh"));
  // 'rest' gathers the languages after fr: minor, the domain oracle's misc pool; no other label is.
  CHECK(lang[4].name == "rest");
  CHECK(lang[4].minor);
  for (size_t i = 0; i < 4; ++i)
    CHECK_FALSE(lang[i].minor);
  for (const auto& l : task)
    CHECK_FALSE(l.minor);

  auto dir = std::filesystem::temp_directory_path() / ("eldr-unit-labels-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto error_of = [&](const std::string& text, const std::string& kind) {
    auto f = (dir / "labels.json").string();
    std::ofstream(f) << text;
    try {
      load_workload_labels(f, kind);
    } catch (const InputError& e) {
      std::string m = e.what();
      return m.substr(m.find(": ") + 2);  // past the file name
    }
    return std::string("no error");
  };
  CHECK(error_of(R"({"task": {"labels": [{"name": "a", "weight": 1}]}})", "language").find("language: no labels") == 0);
  CHECK(error_of(R"({"task": {"labels": []}})", "task").find("task.labels: must be a non-empty list") == 0);
  CHECK(error_of(R"({"task": {"labels": [{"name": "a", "weight": 1}, {"name": "a", "weight": 2}]}})", "task")
            .find("task.labels[1].name: 'a' is already a label") == 0);
  CHECK(error_of(R"({"task": {"labels": [{"name": "a", "weight": 0}]}})", "task").find("task.labels[0].weight") == 0);
  CHECK(error_of(R"({"task": {"labels": [{"name": "a", "weight": 1, "datasets": "GSM8K"}]}})", "task")
            .find("task.labels[0].datasets: must be a list") == 0);
  CHECK(error_of(R"({"task": {"labels": [{"name": "a", "weight": 1, "colour": 3}]}})", "task")
            .find("task.labels[0].colour") == 0);
  CHECK(error_of(R"({"task": {"labels": [{"name": "a", "weight": 1, "minor": "yes"}]}})", "task")
            .find("task.labels[0].minor") == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("workload: arrivals replayed from an Azure log keep its gaps in order, rescaled to the rate")
{
  // A hand-made log: gaps 1 s, 3 s, 2 s (mean 2 s). At 10 req/s the gaps become 0.05, 0.15, 0.10 s,
  // then wrap around.
  std::string path = (std::filesystem::temp_directory_path() / "eldr-arrivals-test.csv").string();
  {
    std::ofstream f(path);
    f << "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      << "2023-11-16 18:00:00.0000000,10,10\n2023-11-16 18:00:01.0000000,10,10\n"
      << "2023-11-16 18:00:04.0000000,10,10\n2023-11-16 18:00:06.0000000,10,10\n";
  }
  std::vector<double> gaps = load_arrival_gaps(path);
  REQUIRE(gaps.size() == 3);
  CHECK(gaps[1] == doctest::Approx(3.0));
  WorkloadSpec s      = spec(0, 6, 10);
  s.arrivals          = ArrivalProcess::file;
  s.arrivals_file     = path;
  Workload w          = generate_workload(s, 1);
  const double want[] = {0.05, 0.20, 0.30, 0.35, 0.50, 0.60};
  for (int i = 0; i < 6; ++i)
    CHECK(w.requests[size_t(i)].arrival_s == doctest::Approx(want[i]));
  std::filesystem::remove(path);
}
