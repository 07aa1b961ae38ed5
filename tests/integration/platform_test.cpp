// The SimGrid platform (sim/cluster/platform.hpp) of configs/cluster/mi300x-5node.json: transfer times
// and contention. One engine per TEST_CASE.
#include "sim/cluster/platform.hpp"
#include "sim/config/cluster_spec.hpp"
#include "sim/cost/collectives.hpp"

#include <doctest/doctest.h>

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;
using namespace eldr;

namespace {

struct Transfer {
  int src;
  int dst;
  double bytes;
  double start_s = 0;
};

// Builds the platform on a fresh engine, runs the transfers (each a put/get pair on its own mailbox,
// started at start_s) and returns each one's duration.
std::vector<double> run_transfers(const std::vector<Transfer>& transfers)
{
  int argc     = 2;
  char arg0[]  = "platform_test";
  char arg1[]  = "--log=root.thres:warning";
  char* argv[] = {arg0, arg1, nullptr};
  sg4::Engine engine(&argc, argv);
  ClusterSpec spec = load_cluster("configs/cluster/mi300x-5node.json");
  Platform p       = build_platform(engine, spec);
  REQUIRE(p.gpus.size() == 40);

  auto durations     = std::make_shared<std::vector<double>>(transfers.size(), -1.0);
  static int payload = 0;
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer t   = transfers[i];
    sg4::Mailbox* mbox = sg4::Mailbox::by_name("t" + std::to_string(i));
    sg4::Actor::create("send" + std::to_string(i), p.gpus[size_t(t.src)], [t, mbox] {
      sg4::this_actor::sleep_until(t.start_s);
      mbox->put(&payload, uint64_t(t.bytes));
    });
    sg4::Actor::create("recv" + std::to_string(i), p.gpus[size_t(t.dst)], [t, mbox, durations, i] {
      mbox->get<int>();
      (*durations)[i] = sg4::Engine::get_clock() - t.start_s;
    });
  }
  engine.run();
  return *durations;
}

constexpr double MB100     = 100e6;
constexpr double kInter    = 5e-6 + MB100 / 50e9;  // NIC 2 us + switch 1 us + NIC 2 us; 400 Gb/s = 50 GB/s
constexpr double kInterTwo = 5e-6 + 2 * MB100 / 50e9;
constexpr double kIntra    = 1e-6 + MB100 / 64e9;  // xGMI 1 us, 64 GB/s each way

}  // namespace

TEST_CASE("platform: a 100 MB transfer between nodes takes 5 us + 100 MB / 50 GB/s")
{
  auto d = run_transfers({{0, 8, MB100}});
  CHECK(d[0] == doctest::Approx(kInter).epsilon(1e-9));
}

TEST_CASE("platform: an intra-node transfer runs over xGMI at 64 GB/s")
{
  auto d = run_transfers({{0, 1, MB100}});
  CHECK(d[0] == doctest::Approx(kIntra).epsilon(1e-9));
}

TEST_CASE("platform: two transfers out of one NIC share it and take twice as long")
{
  auto d = run_transfers({{0, 8, MB100}, {0, 16, MB100}});
  CHECK(d[0] == doctest::Approx(kInterTwo).epsilon(1e-9));
  CHECK(d[1] == doctest::Approx(kInterTwo).epsilon(1e-9));
}

TEST_CASE("platform: two transfers into one NIC share it and take twice as long")
{
  auto d = run_transfers({{0, 16, MB100}, {8, 16, MB100}});
  CHECK(d[0] == doctest::Approx(kInterTwo).epsilon(1e-9));
  CHECK(d[1] == doctest::Approx(kInterTwo).epsilon(1e-9));
}

TEST_CASE("platform: transfers between distinct NIC pairs do not slow each other (non-blocking switch)")
{
  // Eight concurrent flows node 0 -> node 1, GPU i -> GPU 8 + i: each has its own NICs at both ends,
  // and the FATPIPE switch does not share bandwidth.
  std::vector<Transfer> t;
  for (int i = 0; i < 8; ++i)
    t.push_back({i, 8 + i, MB100});
  // Plus eight more node 2 -> node 3.
  for (int i = 0; i < 8; ++i)
    t.push_back({16 + i, 24 + i, MB100});
  auto d = run_transfers(t);
  for (size_t i = 0; i < d.size(); ++i) {
    CAPTURE(i);
    CHECK(d[i] == doctest::Approx(kInter).epsilon(1e-9));
  }
}

TEST_CASE("platform: xGMI pairs are independent links")
{
  // Distinct GPU pairs inside a node each have their own xGMI link, even sharing an endpoint (1->2, 1->5).
  auto d = run_transfers({{1, 2, MB100}, {3, 4, MB100}, {1, 5, MB100}, {6, 1, MB100}});
  for (size_t i = 0; i < d.size(); ++i) {
    CAPTURE(i);
    CHECK(d[i] == doctest::Approx(kIntra).epsilon(1e-9));
  }
}

TEST_CASE("platform: opposite directions over the same NICs do not interfere")
{
  // NIC links are split duplex, so 0 -> 8 and 8 -> 0 have their own data direction, and the platform
  // turns off SimGrid's TCP-style ACK cross-traffic (RDMA acknowledges in hardware): each flow gets the
  // full 50 GB/s. (With network/crosstraffic on, each would get 50 GB/s / 1.05: 2.105 ms; were the
  // links full duplex, 25 GB/s: 4.005 ms.)
  auto d = run_transfers({{0, 8, MB100}, {8, 0, MB100}});
  CHECK(d[0] == doctest::Approx(kInter).epsilon(1e-9));
  CHECK(d[1] == doctest::Approx(kInter).epsilon(1e-9));
}

TEST_CASE("platform: intra-node traffic does not touch the NIC")
{
  // 0 -> 1 over xGMI while 0 -> 8 uses GPU 0's NIC: neither slows the other.
  auto d = run_transfers({{0, 1, MB100}, {0, 8, MB100}});
  CHECK(d[0] == doctest::Approx(kIntra).epsilon(1e-9));
  CHECK(d[1] == doctest::Approx(kInter).epsilon(1e-9));
}

TEST_CASE("platform: a transfer started later shares the NIC only while both are sending")
{
  // A starts at 0 on GPU 0's NIC; B starts at 1 ms on the same NIC. Each spends its first 5 us in
  // latency before it shares bandwidth.
  //   A alone from 5 us to 1.005 ms at 50 GB/s: 50 MB sent; the other 50 MB at 25 GB/s take 2 ms
  //     -> A ends at 3.005 ms (duration 3.005 ms).
  //   B at 25 GB/s from 1.005 ms to 3.005 ms: 50 MB; the other 50 MB alone at 50 GB/s: 1 ms
  //     -> B ends at 4.005 ms (duration 3.005 ms).
  auto d = run_transfers({{0, 8, MB100, 0.0}, {0, 16, MB100, 1e-3}});
  CHECK(d[0] == doctest::Approx(3.005e-3).epsilon(1e-9));
  CHECK(d[1] == doctest::Approx(3.005e-3).epsilon(1e-9));
}

TEST_CASE("platform: the closed-form all-to-all and all-reduce of a 4-GPU instance match SimGrid flows")
{
  // One exchange of an all-to-all among GPUs 8..11 (node 1) with uneven messages, all started at once.
  const IntraNodeLinks links{64e9, 1e-6};
  std::vector<Transfer> t;
  double largest = 0;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (a != b) {
        const double bytes = 1e6 * (1 + a + 2 * b);
        largest            = std::max(largest, bytes);
        t.push_back({8 + a, 8 + b, bytes});
      }
  const std::vector<double> d = run_transfers(t);
  const double slowest        = *std::max_element(d.begin(), d.end());
  CHECK(slowest == doctest::Approx(all_to_all_s(links, largest)).epsilon(1e-9));
  // The all-reduce's two phases are such exchanges of bytes / 4 per pair: 2 x (1 us + 4 MB / 64 GB/s).
  CHECK(all_reduce_s(links, 4, 16e6) == doctest::Approx(2 * (1e-6 + 4e6 / 64e9)));
  CHECK(all_reduce_s(links, 1, 16e6) == 0);
  CHECK(all_to_all_s(links, 0) == 0);
}
