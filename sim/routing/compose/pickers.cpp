// The pickers: max-score-picker and random-picker (llm-d's), p2c-picker and round-robin-picker.
#include "sim/routing/compose/plugin.hpp"

#include <numeric>

namespace eldr {

namespace {

using K = KeyType;

class MaxScorePicker : public Picker {
 public:
  explicit MaxScorePicker(const Json& params) : random_ties_(params["tie_break"] == "random") {}
  int pick(const Decision& d, std::span<const double> totals, Rng& rng) override
  {
    // One pass; random ties by reservoir sampling (uniform among them).
    size_t best = 0;
    long ties   = 1;
    for (size_t i = 1; i < d.candidates.size(); ++i) {
      if (totals[i] > totals[best]) {
        best = i;
        ties = 1;
      } else if (totals[i] == totals[best] && random_ties_ && rng.below(uint64_t(++ties)) == 0) {
        best = i;
      }
    }
    return d.candidates[best];
  }
  std::string without_scores() const override
  {
    return random_ties_ ? "at random among the candidates" : "the lowest-numbered candidate";
  }

 private:
  bool random_ties_;
};

class RandomPicker : public Picker {
 public:
  explicit RandomPicker(const Json& params) : top_k_(params["top_k"].get<long>()) {}
  int pick(const Decision& d, std::span<const double> totals, Rng& rng) override
  {
    const size_t n = d.candidates.size();
    if (top_k_ == 0 || size_t(top_k_) >= n)
      return d.candidates[size_t(rng.below(uint64_t(n)))];
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), size_t(0));
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return totals[a] > totals[b]; });
    return d.candidates[order_[size_t(rng.below(uint64_t(top_k_)))]];
  }

 private:
  long top_k_;
  std::vector<size_t> order_;  // scratch: the candidates by total
};

class P2cPicker : public Picker {
 public:
  int pick(const Decision& d, std::span<const double> totals, Rng& rng) override
  {
    const size_t n = d.candidates.size();
    if (n == 1)
      return d.candidates[0];
    const size_t a = size_t(rng.below(uint64_t(n)));
    size_t b       = size_t(rng.below(uint64_t(n - 1)));
    if (b >= a)
      ++b;  // distinct from a, uniform over the others
    return totals[b] > totals[a] ? d.candidates[b] : d.candidates[a];
  }
};

class RoundRobinPicker : public Picker {
 public:
  int pick(const Decision& d, std::span<const double>, Rng&) override
  {
    const auto it = std::lower_bound(d.candidates.begin(), d.candidates.end(), next_turn_);
    const int w   = it == d.candidates.end() ? d.candidates.front() : *it;
    next_turn_    = (w + 1) % d.load.workers();
    return w;
  }

 private:
  int next_turn_ = 0;  // the worker whose turn it is
};

constexpr KeyChoice kTieBreaks[] = {
    {"random", "uniformly among the tied candidates"},
    {"lowest-index", "the lowest-numbered tied candidate"},
};
constexpr ConfigKey kMaxScoreKeys[] = {
    {.path    = "tie_break",
     .type    = K::choice,
     .def     = "\"random\"",
     .choices = kTieBreaks,
     .help    = "among candidates with the same total"},
};
constexpr ConfigKey kRandomKeys[] = {
    {.path = "top_k",
     .type = K::integer,
     .def  = "0",
     .unit = "workers",
     .min  = 0,
     .max  = 1e6,
     .help = "0: every candidate; k: the k highest totals (ties by lowest index)"},
};

template <class P> std::unique_ptr<Picker> make(const Json& params, PluginContext&)
{
  if constexpr (std::is_constructible_v<P, const Json&>)
    return std::make_unique<P>(params);
  else
    return std::make_unique<P>();
}

}  // namespace

extern const PluginEntry kMaxScorePicker = {.type   = "max-score-picker",
                                            .help   = "the highest total score",
                                            .keys   = kMaxScoreKeys,
                                            .picker = make<MaxScorePicker>};

extern const PluginEntry kRandomPicker = {.type = "random-picker",
                                          .help =
                                              "uniformly at random among the candidates, or among the top_k by score",
                                          .keys   = kRandomKeys,
                                          .picker = make<RandomPicker>};

extern const PluginEntry kP2cPicker = {
    .type   = "p2c-picker",
    .help   = "power of two choices: two distinct random candidates, the higher score (the first drawn on a tie)",
    .picker = make<P2cPicker>};

extern const PluginEntry kRoundRobinPicker = {.type   = "round-robin-picker",
                                              .help   = "workers in turn, skipping those filtered out",
                                              .picker = make<RoundRobinPicker>};

}  // namespace eldr
