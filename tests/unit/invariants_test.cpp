// End-of-run invariants (sim/metrics/invariants.hpp): a consistent record passes; each kind of
// violation is named with its request or worker and time.
#include "sim/config/experiment.hpp"
#include "sim/metrics/invariants.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace eldr;

namespace {

// Two requests of 10 prompt + 3 output tokens on decode worker 0, finished, KV all received.
struct Fixture {
  Experiment x = load_experiment("configs/default.json");
  Workload w;
  RunRecorder rec{2, x.topology.decode.instances};
  Fixture()
  {
    for (uint32_t i = 0; i < 2; ++i) {
      Request r;
      r.id = i, r.prompt_tokens = 10, r.output_tokens = 3;
      w.requests.push_back(r);
      RequestRecord& q   = rec.request(i);
      q.decode_worker    = 0;
      q.arrival_s        = 0.1 * i;
      q.kv_end_s         = 1 + i;
      q.finish_s         = 2 + i;
      q.finish_count     = 1;
      q.tokens_generated = 3;
      rec.add_step({1.0, 0.01, 20, 8, 2, 0});  // each step runs both: 2 x (3 - 1) tokens
    }
    WorkerCounters& c   = rec.decode_worker(0);
    c.kv_capacity_bytes = 1e12;
    c.kv_received_bytes = 20 * x.model.kv_bytes_per_token;
  }
  std::string error(bool horizon = false) const { return check_run_invariants(x, w, rec, horizon).value_or(""); }
};

}  // namespace

TEST_CASE("invariants: a consistent run passes, and each violation names what broke")
{
  {
    Fixture f;
    CHECK(f.error() == "");
  }
  {
    Fixture f;
    f.rec.request(1).finish_count = 2;
    CHECK(f.error() == "finishes exactly once: request 1 finished 2 times, last at 3.000000 s");
  }
  {
    Fixture f;
    f.rec.request(0).finish_count = 0;
    CHECK(f.error() == "every request finishes: request 0 (arrived at 0.000000 s) never finished, though the run did "
                       "not stop at a horizon");
    // At a horizon an unfinished request is allowed; its steps' tokens are then not checked.
    CHECK(f.error(true) == "");
  }
  {
    Fixture f;
    f.rec.request(1).tokens_generated = 2;
    CHECK(f.error() == "tokens conserved: request 1 finished at 3.000000 s with 2 of its 3 output tokens");
  }
  {
    Fixture f;
    f.rec.add_step({2.0, 0.01, 20, 8, 1, 0});
    CHECK(f.error() == "tokens conserved: decode steps generated 5 tokens, finished requests needed 4");
  }
  {
    Fixture f;
    f.rec.decode_worker(0).kv_received_bytes *= 0.5;
    CHECK(f.error().rfind("KV bytes conserved: decode worker 0 received ", 0) == 0);
  }
  {
    Fixture f;
    f.rec.request(1).decode_cached_tokens    = 10;  // prefix caching kept it all there: nothing to send
    f.rec.decode_worker(0).kv_received_bytes = 10 * f.x.model.kv_bytes_per_token;
    CHECK(f.error() == "");
  }
  {
    Fixture f;
    f.rec.decode_worker(3).kv_peak_bytes     = 2e12;
    f.rec.decode_worker(3).kv_peak_s         = 7.5;
    f.rec.decode_worker(3).kv_capacity_bytes = 1e12;
    CHECK(f.error().rfind("KV within capacity: decode worker 3 held ", 0) == 0);
    CHECK(f.error().find("at 7.500000 s") != std::string::npos);
  }
  {
    Fixture f;
    f.rec.prefill_caches.push_back({10, 0, 0, 0, 0, 11});
    CHECK(f.error() == "KV within capacity: prefill worker 0's block cache held 11 blocks, more than its 10");
  }
}
