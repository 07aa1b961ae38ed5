// Shared warm-ups (sim/workload/measured_phase.hpp): which experiments may share one, and that a
// workload of another measured phase is the longest run's, retimed and cut.
#include "sim/workload/measured_phase.hpp"
#include "sim/workload/workload_factory.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace eldr;

namespace {

const char* const kDefault = "configs/default.json";

Experiment at(std::vector<Override> o)
{
  o.emplace_back("workload.warmup_requests", "300");
  o.emplace_back("workload.calibration_requests", "50");
  return load_experiment(kDefault, o);
}

bool same_request(const Request& a, const Request& b)
{
  return a.id == b.id && a.label == b.label && a.measured == b.measured && a.arrival_s == b.arrival_s &&
         a.prompt_tokens == b.prompt_tokens && a.output_tokens == b.output_tokens && a.prefix_hash == b.prefix_hash &&
         a.routing_seed == b.routing_seed && a.hash_begin == b.hash_begin && a.hash_count == b.hash_count;
}

}  // namespace

TEST_CASE("measured phase: which experiments may share a warm-up")
{
  CHECK(warmup_not_shareable(at({})) == "");
  CHECK(warmup_not_shareable(at({{"workload.kind", "\"language\""}})) == "");
  CHECK(warmup_not_shareable(at({{"workload.drain_after_warmup", "false"}})) != "");
  CHECK(warmup_not_shareable(load_experiment(kDefault, {{"workload.warmup_requests", "0"}})) != "");
  CHECK(warmup_not_shareable(at({{"workload.new_subtopics_after_s", "30"}})) != "");

  // Rate, duration and request count are the measured phase's; anything else is the warm-up's too.
  const Json base = warmup_config(at({{"workload.rate_rps", "20"}}));
  CHECK(warmup_config(at({{"workload.rate_rps", "100"}})) == base);
  CHECK(warmup_config(at({{"workload.duration_s", "30"}})) == base);
  CHECK(warmup_config(at({{"workload.measured_requests", "500"}})) == base);
  CHECK(warmup_config(at({{"router", "\"eldr\""}})) != base);
  CHECK(warmup_config(at({{"workload.warmup_rate_rps", "32"}})) != base);
  CHECK(warmup_config(at({{"seed", "2"}})) != base);
}

TEST_CASE("measured phase: another rate's workload is the longest one's, retimed and cut")
{
  for (const char* config : {kDefault, "configs/prefix_cache.json"}) {
    CAPTURE(config);
    // (The prefix-cache study's prompts repeat from a pool, with system prompts here too.)
    auto make = [&](const char* rate, const char* requests) {
      return make_workload(load_experiment(config, {{"workload.rate_rps", rate},
                                                    {"workload.measured_requests", requests},
                                                    {"workload.warmup_requests", "300"},
                                                    {"workload.system_prompts", "4"},
                                                    {"workload.system_prompt_tokens", "40"}}));
    };
    const Workload slow = make("20", "200"), fast = make("100", "1000");
    REQUIRE(fast.requests.size() == 300 + 1000);
    REQUIRE(slow.requests.size() == 300 + 200);
    CHECK(measured_phase_mismatch(fast, slow) == "");
    CHECK(measured_phase_mismatch(fast, fast) == "");
    CHECK(measured_phase_mismatch(slow, fast) != "");  // longer than the longest
    // The measured requests of other rates arrive at other times.
    CHECK(slow.requests[300].arrival_s != fast.requests[300].arrival_s);

    Workload w                = fast;
    const Request* const head = w.requests.data();
    take_measured_phase(w, slow);
    CHECK(w.requests.data() == head);  // nothing moved: pointers into it stay valid
    REQUIRE(w.requests.size() == slow.requests.size());
    bool all_same = true;
    for (size_t i = 0; i < w.requests.size(); ++i)
      all_same = all_same && same_request(w.requests[i], slow.requests[i]);
    CHECK(all_same);
    CHECK(w.prefix_hashes == slow.prefix_hashes);
  }
  // Another seed: other requests; taking such a phase is refused.
  const Workload a = make_workload(load_experiment(kDefault, {{"workload.duration_s", "5"}}));
  const Workload b = make_workload(load_experiment(kDefault, {{"workload.duration_s", "5"}, {"seed", "2"}}));
  CHECK(measured_phase_mismatch(a, b) != "");
  Workload c = a;
  CHECK_THROWS_AS(take_measured_phase(c, b), std::logic_error);
}
