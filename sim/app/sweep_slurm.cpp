// eldrsim sweep --emit-slurm: the sweep as a Slurm job array and a merge step.
#include "sim/app/process_pool.hpp"
#include "sim/app/sweep_parts.hpp"
#include "sim/common/atomic_file.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
namespace eldr::app {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s)
{
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The sweep's own command line for the cluster (absolute paths; cwd is the submit directory).
std::string sweep_command_line(const SweepCli& o, const std::string& out)
{
  std::string c = shell_quote(self_executable()) + " sweep " + shell_quote(fs::absolute(o.file).string()) + " --out " +
                  shell_quote(fs::absolute(out).string());
  if (o.seeds > 0)
    c += " --seeds " + std::to_string(o.seeds);
  for (const auto& s : o.sets)
    c += " --set " + shell_quote(s);
  if (o.no_fit)
    c += " --no-fit";
  if (o.own_warmups)
    c += " --own-warmups";
  return c;
}

}  // namespace

int emit_slurm(const SweepCli& o, const SweepPlan& plan, const std::string& out)
{
  fs::path dir = fs::absolute(o.emit_slurm);
  fs::create_directories(dir / "logs");
  std::string cwd  = fs::current_path().string();
  std::string cmd  = sweep_command_line(o, out);
  std::string head = "#!/bin/bash\n# Written by `eldrsim sweep " + o.file + " --emit-slurm " + o.emit_slurm +
                     "`: submit with " + (dir / "submit.sh").string() + ".\n";
  std::string extra;
  for (size_t b = 0, e; b < o.slurm_options.size(); b = e + 1) {
    e = o.slurm_options.find(';', b);
    if (e == std::string::npos)
      e = o.slurm_options.size();
    if (e > b)
      extra += "#SBATCH " + o.slurm_options.substr(b, e - b) + "\n";
  }
  std::string array = head + "#SBATCH --job-name=eldrsim-" + fs::path(o.file).stem().string() + "\n#SBATCH --array=0-" +
                      std::to_string(plan.points.size() - 1) +
                      "\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n#SBATCH --output=" + (dir / "logs").string() +
                      "/point-%a.out\n" + extra + "set -eu\ncd " + shell_quote(cwd) +
                      "\n# One point per array task: " + std::to_string(plan.points.size()) +
                      " points, written atomically under " + fs::absolute(out).string() + "\nexec " + cmd +
                      " --point \"$SLURM_ARRAY_TASK_ID\" -q\n";
  std::string merge_script = head + "#SBATCH --job-name=eldrsim-" + fs::path(o.file).stem().string() +
                             "-merge\n#SBATCH --ntasks=1\n#SBATCH --output=" + (dir / "logs").string() +
                             "/merge.out\n" + extra + "set -eu\ncd " + shell_quote(cwd) +
                             "\n# After the array: runs any point that failed or is missing, then the combined CSV.\n"
                             "exec " +
                             cmd + " -j 1\n";
  std::string submit =
      "#!/bin/bash\n# Submits the point array, then the merge step once every point has ended.\nset -eu\n"
      "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
      "array=$(sbatch --parsable \"$here/points.sbatch\")\narray=${array%%;*}\n"
      "merge=$(sbatch --parsable --dependency=afterany:$array \"$here/merge.sbatch\")\nmerge=${merge%%;*}\n"
      "echo \"array job $array, merge job $merge\"\n";
  write_file_atomically((dir / "points.sbatch").string(), array);
  write_file_atomically((dir / "merge.sbatch").string(), merge_script);
  write_file_atomically((dir / "submit.sh").string(), submit);
  for (const char* f : {"points.sbatch", "merge.sbatch", "submit.sh"})
    fs::permissions(dir / f, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
  std::printf("%s: %zu-task job array (points.sbatch), merge step (merge.sbatch), submit with %s\n", dir.c_str(),
              plan.points.size(), (dir / "submit.sh").c_str());
  return 0;
}

}  // namespace eldr::app
