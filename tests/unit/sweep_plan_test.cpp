// Sweep files: grid expansion, point names, validation (sim/experiments/sweep_plan).
#include "sim/experiments/sweep_plan.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace eldr;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("eldr-sweep-test." + std::to_string(::getpid())))
  {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const
  {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::string error_of(const std::string& file, const SweepOptions& o = {})
{
  try {
    (void)load_sweep(file, o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("expand_grid: cross product, last axis fastest")
{
  auto g = expand_grid({{"a", {1, 2}}, {"b", {"x", "y", "z"}}});
  REQUIRE(g.size() == 6);
  CHECK(g[0][0].value == 1);
  CHECK(g[0][1].value == "x");
  CHECK(g[1][1].value == "y");
  CHECK(g[3][0].value == 2);
  CHECK(g[5][1].value == "z");
  CHECK(expand_grid({}).size() == 1);
  CHECK(expand_grid({}).front().empty());
  CHECK(expand_grid({{"a", {1}}, {"b", {}}}).empty());
}

TEST_CASE("point_name: stable, readable, filesystem-safe")
{
  CHECK(point_name({}) == "base");
  CHECK(point_name({{"router", "eldr"}, {"workload.rate_rps", 60}}) == "router=eldr__rate_rps=60");
  CHECK(point_name({{"eldr.tau", 0.1}}) == "tau=0.1");
  // Two keys with the same last segment keep their full paths.
  CHECK(point_name({{"topology.prefill.instances", 8}, {"topology.decode.instances", 16}}) ==
        "topology.prefill.instances=8__topology.decode.instances=16");
  // Config files by stem; objects as key-value pieces; arrays joined; unsafe characters replaced.
  CHECK(point_name({{"config", "configs/paper/base language.json"}}) == "config=base-language");
  CHECK(point_name({{"topology.decode", Json{{"instances", 8}, {"nodes", {1}}}}}) == "decode=instances-8-nodes-1");
  CHECK(point_name({{"model", "a/b:c"}}) == "model=a-b-c");
  // Long names: cut, with a hash of the whole so distinct points stay distinct.
  std::string a = point_name({{"x", std::string(200, 'a')}}), b = point_name({{"x", std::string(199, 'a') + "b"}});
  CHECK(a.size() == 117);
  CHECK(a != b);
  CHECK(a == point_name({{"x", std::string(200, 'a')}}));
  CHECK(hash_hex("") == "cbf29ce484222325");  // FNV-1a 64 offset basis
}

TEST_CASE("load_sweep: points, overrides, seeds, includes")
{
  TempDir t;
  std::string base = fs::absolute("configs/default.json").string();
  t.write("a.json", R"({"name": "a", "base": ")" + base + R"(", "set": {"workload.duration_s": 2},
     "grid": {"router": ["jsq", "eldr"], "workload.rate_rps": [20, 40]}})");
  t.write("b.json", R"({"base": ")" + base + R"(", "grid": {"eldr.tau": [0, 0.2]}, "set": {"router": "eldr"}})");
  std::string all = t.write("all.json", R"({"include": ["a.json", "b.json"], "set": {"workload.warmup_requests": 0}})");
  SweepPlan p     = load_sweep(all);
  REQUIRE(p.points.size() == 6);
  CHECK(p.points[0].sweep == "a");
  CHECK(p.points[0].name == "router=jsq__rate_rps=20");
  CHECK(p.points[3].name == "router=eldr__rate_rps=40");
  CHECK(p.points[4].sweep == "b");
  CHECK(p.points[4].name == "tau=0");
  // Outer set first, then the file's own set, then the grid values.
  const auto& o = p.points[1].overrides;
  REQUIRE(o.size() == 4);
  CHECK(o[0] == Override{"workload.warmup_requests", "0"});
  CHECK(o[1] == Override{"workload.duration_s", "2"});
  CHECK(o[2] == Override{"router", "\"jsq\""});
  CHECK(o[3] == Override{"workload.rate_rps", "40"});
  CHECK(p.points[1].rate_rps == 40);
  CHECK(p.points[1].router == "jsq");
  CHECK(p.extra_keys.empty());  // eldr.tau is a router's result column
  // ELDR points share a fit when only the run-side keys (rate, tau) differ.
  CHECK(p.points[0].fit.empty());
  CHECK(p.points[2].fit == "eldr");
  CHECK(p.points[2].fit_key == p.points[3].fit_key);
  CHECK(p.points[4].fit_key == p.points[2].fit_key);  // across sweeps too: duration, warm-up, tau are run-only
  CHECK(p.points[4].fit_key == p.points[5].fit_key);

  // A composition with an expert-locality plugin shares ELDR's fit too; a given model file fits nothing.
  t.write("c.json", R"({"base": ")" + base + R"(", "set": {"router": "composed",
     "composed.scorers.expert-locality-scorer.weight": 1}, "grid": {"composed.scorers.queue-scorer.weight": [0, 1]}})");
  const std::string model = t.write("m.json", "{}");
  t.write("d.json", R"({"base": ")" + base + R"(", "set": {"router": "eldr", "eldr.model_file": ")" + model + R"("},
     "grid": {"eldr.tau": [0, 0.2]}})");
  SweepPlan c = load_sweep(t.write("cd.json", R"({"include": ["c.json", "d.json"]})"));
  REQUIRE(c.points.size() == 4);
  CHECK(c.points[0].fit == "eldr");
  CHECK(c.points[0].fit_key == c.points[1].fit_key);
  CHECK(c.points[2].fit.empty());
  CHECK(c.points[2].fit_key.empty());

  SweepOptions seeds;
  seeds.seeds = 3;
  SweepPlan s = load_sweep(all, seeds);
  REQUIRE(s.points.size() == 18);
  CHECK(s.points[0].name == "router=jsq__rate_rps=20__seed=1");
  CHECK(s.points[0].group == "router=jsq__rate_rps=20");
  CHECK(s.points[2].seed == 3);
  CHECK(s.seeds == 3);
  CHECK(s.points[6].router == "eldr");
  CHECK(s.points[7].fit_key != s.points[6].fit_key);  // the seed changes the calibration split
}

TEST_CASE("load_sweep: bad files name file, field and problem")
{
  TempDir t;
  std::string base = fs::absolute("configs/default.json").string();
  auto bad         = [&](const std::string& name, const std::string& text) { return error_of(t.write(name, text)); };
  CHECK(bad("typo.json", R"({"grdi": {}})").find("typo.json: grdi: unknown key") != std::string::npos);
  CHECK(bad("empty.json", R"({"grid": {"router": []}})").find("empty.json: grid.router: must be a non-empty list") !=
        std::string::npos);
  CHECK(bad("twice.json", R"({"grid": {"router": ["jsq", "jsq"]}})").find("grid.router: value \"jsq\" listed twice") !=
        std::string::npos);
  std::string e = bad("unknown.json", R"({"base": ")" + base + R"(", "grid": {"workload.rate_rsp": [1]}})");
  CHECK(e.find("unknown.json: grid.workload.rate_rsp: value 1: ") != std::string::npos);
  CHECK(e.find("unknown key") != std::string::npos);
  e = bad("router.json", R"({"base": ")" + base + R"(", "grid": {"router": ["jsq", "fast"]}})");
  CHECK(e.find("router.json: grid.router: value \"fast\"") != std::string::npos);
  CHECK(bad("seeds.json", R"({"seeds": 0})").find("seeds.json: seeds") != std::string::npos);
  CHECK(bad("notobj.json", R"([1])").find("notobj.json: a sweep file must be a JSON object") != std::string::npos);
  CHECK(bad("self.json", R"({"include": ["self.json"]})").find("self.json: include: includes itself") !=
        std::string::npos);
  CHECK(bad("noinc.json", R"({"include": ["missing.json"]})").find("missing.json") != std::string::npos);
  t.write("n1.json", R"({"name": "same", "base": ")" + base + R"("})");
  CHECK(bad("dup.json", R"({"include": ["n1.json", "n1.json"]})").find("sweep name 'same' is also used") !=
        std::string::npos);
  CHECK(bad("setcfg.json", R"({"set": {"config": "x"}})").find("setcfg.json: set: key 'config'") != std::string::npos);
}

TEST_CASE("load_sweep: a point's identity does not depend on the working directory")
{
  TempDir t;
  std::string sweep = t.write("s.json", R"({"grid": {"router": ["jsq"]}})");
  SweepPlan here    = load_sweep(sweep);
  auto cwd          = fs::current_path();
  fs::current_path(t.path);
  SweepPlan there = load_sweep(sweep);
  fs::current_path(cwd);
  REQUIRE(here.points.size() == 1);
  CHECK(here.points[0].config_label == "configs/default.json");
  CHECK(there.points[0].config_label == "configs/default.json");
  CHECK(here.points[0].identity() == there.points[0].identity());
  CHECK(fs::path(there.points[0].config).is_absolute());
}

TEST_CASE("warmup_batches: points of one key share a batch of at most ceil(points / jobs), in order")
{
  using B                             = std::vector<std::vector<size_t>>;
  const std::vector<std::string> keys = {"a", "a", "b", "a", "", "a", "b", ""};
  // One job: every point of a key in one batch; keyless points alone.
  CHECK(warmup_batches(keys, 1) == B{{0, 1, 3, 5}, {2, 6}, {4}, {7}});
  // Two jobs: at most 4 a batch (8 points), the same here.
  CHECK(warmup_batches(keys, 2) == B{{0, 1, 3, 5}, {2, 6}, {4}, {7}});
  // Three jobs: at most 3; the fourth "a" starts a batch of its own.
  CHECK(warmup_batches(keys, 3) == B{{0, 1, 3}, {2, 6}, {4}, {5}, {7}});
  // As many jobs as points: nobody waits for a shared warm-up.
  CHECK(warmup_batches(keys, 8) == B{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  CHECK(warmup_batches(keys, 0) == warmup_batches(keys, 1));  // (0 jobs counts as one)
  CHECK(warmup_batches({}, 2).empty());
  CHECK(warmup_batches({"", ""}, 1) == B{{0}, {1}});
}
