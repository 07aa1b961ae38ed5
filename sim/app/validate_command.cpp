// eldrsim validate: the simulator against the testbed, the 30 measured round-robin cells (with
// leave-one-rate-out predictions) and the published router claims (docs/design.md section 9), as
// results/validate/report.md (analysis/validate.py on Debian's python3 with numpy and scipy).
#include "sim/app/commands.hpp"

#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

struct ValidateOptions {
  std::string out;
  int jobs         = 0;
  int seeds        = 1;
  bool skip_claims = false;
  bool skip_loro   = false;
};

int validate(const ValidateOptions& o)
{
  namespace fs           = std::filesystem;
  const std::string root = project_root(".");
  const std::string out  = o.out.empty() ? (fs::path(root) / "results" / "validate").string() : o.out;
  // It reads the project's data, models, configs and scripts and runs this binary.
  std::vector<CommandInput> inputs = {{this_binary(), "the simulator"}};
  for (const char* dir : {"traces", "models", "configs", "analysis"})
    inputs.push_back({(fs::path(root) / dir).string(), std::string("the project's ") + dir + "/"});
  check_output_apart(out, "--out", inputs);
  check_replaceable_directory(out, "--out", kValidateMarker, "validate's results");
  std::vector<std::string> args = {"--eldrsim", this_binary(), "--out", out};
  if (o.jobs > 0)
    args.insert(args.end(), {"--jobs", std::to_string(o.jobs)});
  if (o.seeds > 1)
    args.insert(args.end(), {"--seeds", std::to_string(o.seeds)});
  if (o.skip_claims)
    args.push_back("--skip-claims");
  if (o.skip_loro)
    args.push_back("--skip-loro");
  exec_analysis_script(project_root("."), "validate.py", args);
}

}  // namespace

Command add_validate_command(CLI::App& app)
{
  auto o    = std::make_shared<ValidateOptions>();
  auto* sub = app.add_subcommand(
      "validate", "Hold the simulator against the testbed: the 30 round-robin cells, leave-one-rate-out predictions "
                  "and the published router claims; writes results/validate/report.md (about 15 minutes on 2 cores, "
                  "--skip-loro about 6)");
  sub->add_option("--out", o->out, "Results directory (default results/validate)");
  sub->add_option("-j,--jobs", o->jobs, "Simulations at once (default 2)")->check(CLI::PositiveNumber);
  sub->add_option("--seeds", o->seeds,
                  "Check the claims on the mean over seeds 1..N (default 1); the round-robin cells stay at one seed")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--skip-claims", o->skip_claims, "Only the round-robin cells and their leave-one-rate-out predictions");
  sub->add_flag("--skip-loro", o->skip_loro,
                "No leave-one-rate-out predictions (about 6 minutes on 2 cores instead of 15)");
  return {sub, [o] { return validate(*o); }};
}

}  // namespace eldr::app
