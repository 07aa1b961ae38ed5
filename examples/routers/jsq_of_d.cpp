#include "examples/routers/jsq_of_d.hpp"
#include "sim/config/config_reader.hpp"
#include "sim/config/experiment.hpp"

#include <numeric>
#include <utility>

namespace eldr {

namespace {

const ConfigKey kKeys[] = {
    {.path = "jsq_of_d", .type = KeyType::section, .help = "the jsq_of_d example router's parameters"},
    {.path = "jsq_of_d.d",
     .type = KeyType::integer,
     .def  = "3",
     .unit = "workers",
     .min  = 1,
     .max  = 1048576,
     .help = "workers sampled per decision"},
};

// The config reader calls it to check the section, the factory to get d from the section as the
// experiment keeps it (Experiment::router_sections), so the router needs no field of its own.
int read_d(ConfigReader& section)
{
  return int(section.integer("d"));
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
  const Json& sections        = setup.experiment ? setup.experiment->router_sections : kNoConfig;
  ConfigReader top(sections, setup.experiment ? setup.experiment->config_file : "", kKeys, nullptr);
  ConfigReader section = top.section("jsq_of_d");
  return std::make_unique<JsqOfDRouter>(setup.seed, read_d(section));
}

static void read_section(ConfigReader& section, const std::string&)
{
  read_d(section);
}

const RouterSection kJsqOfDSection = {"jsq_of_d", kKeys, read_section};

}  // namespace eldr
