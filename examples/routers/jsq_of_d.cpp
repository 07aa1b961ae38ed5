#include "examples/routers/jsq_of_d.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/config/experiment.hpp"

#include <numeric>
#include <utility>

namespace eldr {

namespace {

// The one place that knows the section's keys: the config reader calls it to check the section, the
// factory to get d (the experiment keeps the config as given, so the router needs no field of its own).
int read_d(JsonReader& section)
{
  return int(section.integer("d", 3, 1, 1 << 20));
}

}  // namespace

int JsqOfDRouter::choose(const Request&, const DecodeLoadView& load)
{
  const int k = load.workers();
  const int d = std::min(d_, k);
  if (int(order_.size()) != k) {
    order_.resize(size_t(k));
    std::iota(order_.begin(), order_.end(), 0);
  }
  // The first d places of a partial Fisher-Yates shuffle: d distinct workers, uniformly. order_ stays
  // a permutation, so it needs no reset between decisions.
  int best = -1;
  for (int i = 0; i < d; ++i) {
    std::swap(order_[size_t(i)], order_[size_t(i) + size_t(rng_.below(uint64_t(k - i)))]);
    const int w = order_[size_t(i)];
    if (best < 0 || load.in_flight[size_t(w)] < load.in_flight[size_t(best)])
      best = w;  // ties: the first sampled, itself uniformly random
  }
  return best;
}

std::unique_ptr<DecodeRouter> make_jsq_of_d(const RouterSetup& setup)
{
  static const Json kNoConfig = Json::object();  // a router built without an experiment (tests): defaults
  const Json& config          = setup.experiment ? setup.experiment->resolved : kNoConfig;
  JsonReader top(config.is_object() ? config : kNoConfig, setup.experiment ? setup.experiment->config_file : "");
  JsonReader section = top.object("jsq_of_d");
  return std::make_unique<JsqOfDRouter>(setup.seed, read_d(section));
}

void read_jsq_of_d_section(JsonReader& section, const std::string&, Experiment&)
{
  read_d(section);
}

}  // namespace eldr
