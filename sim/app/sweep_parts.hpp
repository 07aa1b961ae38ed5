#pragma once
// The parts of `eldrsim sweep`, one file per job: the command (sweep_command.cpp), the results
// directory (sweep_results.cpp), running the points and their shared fits (sweep_points.cpp),
// combined.csv (sweep_merge.cpp) and the Slurm job array (sweep_slurm.cpp).
#include "sim/experiments/sweep_plan.hpp"
#include "sim/routing/router_fit.hpp"

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace eldr::app {

// The command line.
struct SweepCli {
  std::string file;
  std::string out;
  int jobs  = 0;
  int seeds = 0;
  std::vector<std::string> sets;
  bool quiet       = false;
  bool list        = false;
  bool merge       = false;
  bool no_fit      = false;
  bool own_warmups = false;  // --own-warmups: no point shares its warm-up
  bool report      = false;  // then eldrsim report OUT
  long point       = -1;
  std::string emit_slurm;
  std::string slurm_options;
};

// The results directory: OUT/<sweep>/<point>, the shared fits in OUT/.<fit>-fits/.
std::filesystem::path point_dir(const std::string& out, const SweepPoint& p);
const RouterFit& fit_of(const SweepPoint& p);  // the point's router fit (p.fit names one)
std::filesystem::path fits_dir(const std::string& out, const SweepPoint& p);
std::filesystem::path fit_file(const std::string& out, const SweepPoint& p);
// Whether the point's directory records this point's run and its files check out; `why`: what is
// wrong with a directory that is there.
bool point_done(const std::string& out, const SweepPoint& p, std::string* why = nullptr);
void remove_stale_temporaries(const std::string& out, const SweepPlan& plan);
void check_outputs(const SweepPlan& plan, const std::string& out, bool report);
void publish(const std::filesystem::path& tmp, const std::filesystem::path& final_dir);
bool withdraw(const std::filesystem::path& dir);

// Running the points: thrown when a signal stopped them (their temporaries are gone).
struct Interrupted {
  int signal;
};
void end_progress_line();  // ends an open progress line before anything else is printed
// Runs the given points (indices into plan.points) that are not done yet, after the fits they share
// (`fit`), points of one warm-up sharing it (`share_warmups`); returns the failures.
size_t run_points(const SweepPlan& plan, const std::vector<size_t>& which, const std::string& out, int jobs, bool fit,
                  bool share_warmups, bool quiet);

// combined.csv and combined_seeds.csv; returns the number of points without results.
size_t merge(const SweepPlan& plan, const std::string& out, bool quiet);

// --emit-slurm: writes the job array, the merge step and submit.sh.
int emit_slurm(const SweepCli& o, const SweepPlan& plan, const std::string& out);

}  // namespace eldr::app
