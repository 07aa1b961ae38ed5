// The plugins that read the workers' in-flight requests: load-threshold-filter, queue-scorer and
// llm-d's active-request-scorer.
#include "sim/routing/compose/plugin.hpp"

namespace eldr {

namespace {

using K = KeyType;

class LoadThresholdFilter : public Filter {
 public:
  explicit LoadThresholdFilter(const Json& params) : max_in_flight_(params["max_in_flight"].get<long>()) {}
  void keep(const Decision& d, std::vector<int>& kept) override
  {
    for (int w : d.candidates)
      if (d.load.in_flight[size_t(w)] <= max_in_flight_)
        kept.push_back(w);
  }

 private:
  long max_in_flight_;
};

class QueueScorer : public Scorer {
 public:
  void score(const Decision& d, std::span<double> scores) override
  {
    min_max_scores(
        d, [&](int w) { return double(d.load.in_flight[size_t(w)]); }, false, scores);
  }
};

// llm-d's active-request-scorer (v0.8.0 activerequest/active_request.go): the most in flight on any
// worker of the pool scales the busy ones; an idle worker scores 1.
class ActiveRequestScorer : public Scorer {
 public:
  explicit ActiveRequestScorer(const Json& params)
      : idle_threshold_(params["idle_threshold"].get<long>()), max_busy_score_(params["max_busy_score"].get<double>())
  {
  }
  void score(const Decision& d, std::span<double> scores) override
  {
    long most = 0;
    for (int w = 0; w < d.load.workers(); ++w)
      most = std::max(most, long(d.load.in_flight[size_t(w)]));
    for (size_t i = 0; i < d.candidates.size(); ++i) {
      const long n = d.load.in_flight[size_t(d.candidates[i])];
      scores[i]    = n <= idle_threshold_ ? 1.0 : double(most - n) / double(most) * max_busy_score_;
    }
  }

 private:
  long idle_threshold_;
  double max_busy_score_;
};

constexpr ConfigKey kLoadThresholdKeys[] = {
    {.path = "max_in_flight",
     .type = K::integer,
     .def  = "16",
     .unit = "requests",
     .min  = 0,
     .max  = 1e6,
     .help = "the most in-flight requests a candidate may hold"},
};

constexpr ConfigKey kActiveRequestKeys[] = {
    {.path = "idle_threshold",
     .type = K::integer,
     .def  = "0",
     .unit = "requests",
     .min  = 0,
     .max  = 1e6,
     .help = "a worker with at most this many requests in flight is idle: score 1 (llm-d's idleThreshold)"},
    {.path = "max_busy_score",
     .type = K::number,
     .def  = "1",
     .min  = 0,
     .max  = 1,
     .help = "the score of the least busy worker above idle_threshold (llm-d's maxBusyScore)"},
};

}  // namespace

extern const PluginEntry kLoadThresholdFilter = {
    .type   = "load-threshold-filter",
    .help   = "workers with at most max_in_flight requests in flight",
    .keys   = kLoadThresholdKeys,
    .filter = [](const Json& p, PluginContext&) -> std::unique_ptr<Filter> {
      return std::make_unique<LoadThresholdFilter>(p);
    },
    .can_empty = true};

extern const PluginEntry kQueueScorer = {
    .type   = "queue-scorer",
    .help   = "fewest in-flight requests: (max - n) / (max - min) over the candidates, 1 when all equal",
    .scorer = [](const Json&, PluginContext&) -> std::unique_ptr<Scorer> { return std::make_unique<QueueScorer>(); }};

extern const PluginEntry kActiveRequestScorer = {
    .type   = "active-request-scorer",
    .help   = "llm-d's in-flight scorer: 1 with at most idle_threshold requests in flight, else (max - n) / max x "
              "max_busy_score, max over every worker",
    .keys   = kActiveRequestKeys,
    .scorer = [](const Json& p, PluginContext&) -> std::unique_ptr<Scorer> {
      return std::make_unique<ActiveRequestScorer>(p);
    }};

}  // namespace eldr
