// Sweep points and fits run as children of the sweep (sim/app/process_pool): children of this
// executable call its entry point in the forked image instead of exec'ing it again.
#include "sim/app/process_pool.hpp"
#include "sim/common/output_lock.hpp"
#include "sim/common/result_dir.hpp"
#include "tests/support/scratch_dir.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace eldr;
using namespace eldr::app;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p)
{
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs one child of this executable with arguments `args` under the entry point; its exit and log.
std::pair<ChildExit, std::string> run_child(EntryPoint entry, const std::vector<std::string>& args, const fs::path& log)
{
  set_entry_point(entry);
  std::vector<std::string> argv = {self_executable()};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildExit got;
  got.code = -1;
  CHECK(run_tasks({{nullptr, argv, log.string(), [&](const ChildExit& e) { got = e; }, {}}}, 1) == 0);
  set_entry_point(nullptr);
  return {got, read_text(log)};
}

// The entry points the children call.
int echo_arguments(int argc, char** argv)
{
  for (int i = 1; i < argc; ++i)
    std::printf("%s%s", i > 1 ? " " : "", argv[i]);
  return 7;
}

int interrupt_self(int, char**)
{
  install_interrupt_handler();  // as a command does: the handler removes what is registered, then exits
  std::raise(SIGINT);
  return 0;
}

int lock_and_print_holder(int, char** argv)
{
  OutputLock lock(argv[2], "--out", "");
  std::printf("%s", read_text(output_lock_file(argv[2])).c_str());
  return 0;
}

}  // namespace

TEST_CASE("process pool: a child of this executable runs the entry point in the forked image, with its arguments")
{
  test::ScratchDir s("process-pool");
  auto [e, log] = run_child(echo_arguments, {"alpha", "beta gamma"}, s.dir / "echo.log");
  CHECK(e.code == 7);  // what the entry point returned: exec'ing the test binary would not give it
  CHECK(e.signal == 0);
  CHECK(log == "alpha beta gamma");
}

TEST_CASE("process pool: an interrupted child leaves the temporaries the parent registered for its own interrupts")
{
  test::ScratchDir s("process-pool");
  const fs::path mine = s.dir / "parent-temporary";
  std::ofstream(mine) << "x";
  InterruptNote note("parent", {mine.string()});
  auto [e, log] = run_child(interrupt_self, {"run"}, s.dir / "int.log");
  CHECK(e.code == 128 + SIGINT);
  CHECK(log.find("interrupted by SIGINT") != std::string::npos);
  CHECK(fs::exists(mine));
}

TEST_CASE("process pool: a child's output lock names the child's command, not the parent's command line")
{
  test::ScratchDir s("process-pool");
  const fs::path out = s.dir / "out";
  auto [e, log]      = run_child(lock_and_print_holder, {"run", out.string()}, s.dir / "lock.log");
  CHECK(e.code == 0);
  const std::string exe = fs::path(self_executable()).filename().string();
  CHECK(log.find(" " + exe + " run") != std::string::npos);
}

TEST_CASE("process pool: a task starts only after the tasks it comes after have ended, and one whose prepare says no "
          "never starts")
{
  test::ScratchDir s("process-pool");
  std::vector<std::string> order;  // what happened, in order
  auto log  = [&](const char* name) { return (s.dir / name).string(); };
  auto done = [&](const char* name) {
    return
        [&order, name](const ChildExit& e) { order.push_back(std::string(name) + " done " + std::to_string(e.code)); };
  };
  std::vector<ChildTask> tasks;
  // The fit: slower than the unrelated task, so that without `after` the point would start first.
  tasks.push_back({nullptr, {"/bin/sh", "-c", "sleep 0.3"}, log("fit.log"), done("fit"), {}});
  tasks.push_back({[&] {
                     order.push_back("point starts");
                     return true;
                   },
                   {"/bin/sh", "-c", "exit 3"},
                   log("point.log"),
                   done("point"),
                   {0}});
  tasks.push_back({[&] {
                     order.push_back("skipped prepared");
                     return false;
                   },
                   {"/nonexistent/program"},
                   log("skipped.log"),
                   done("skipped"),
                   {1}});
  tasks.push_back({nullptr, {"/bin/sh", "-c", "exit 0"}, log("other.log"), done("other"), {}});
  CHECK(run_tasks(std::move(tasks), 2) == 0);
  // "other" ends whenever it does; the rest in this order.
  std::erase(order, "other done 0");
  const std::vector<std::string> fit_first = {"fit done 0", "point starts", "point done 3", "skipped prepared"};
  CHECK(order == fit_first);
  CHECK(!fs::exists(s.dir / "skipped.log"));  // no child
}

TEST_CASE("process pool: a task that can never start (it comes after itself) is an error, not a hang")
{
  test::ScratchDir s("process-pool");
  std::vector<ChildTask> tasks;
  tasks.push_back({nullptr, {"/bin/sh", "-c", "exit 0"}, (s.dir / "a.log").string(), nullptr, {0}});
  CHECK_THROWS(run_tasks(std::move(tasks), 1));
}
