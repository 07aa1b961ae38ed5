#include "sim/gating/gating_source_factory.hpp"
#include "sim/common/input_error.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/gating/replay_gating.hpp"
#include "sim/gating/shared_prefix_gating.hpp"
#include "sim/gating/uniform_gating.hpp"

#include <stdexcept>

namespace eldr {

namespace {

std::unique_ptr<GatingSource> make_base_source(const Experiment& x, const Workload& w, const std::string& cache_dir)
{
  switch (x.workload.routing) {
  case ExpertRouting::uniform:
    return std::make_unique<UniformGating>(x.model, x.seed);
  case ExpertRouting::generated: {
    const std::string kind = x.workload.kind == WorkloadKind::trace ? "task" : std::string(to_string(x.workload.kind));
    return std::make_unique<GeneratedGating>(x.model, x.routing_profile, kind, w.labels, x.seed,
                                             x.workload.routing_profile_file, x.workload.new_subtopics_after_s,
                                             cache_dir);
  }
  case ExpertRouting::trace:
    return std::make_unique<ReplayGating>(load_replay_gating(x, w));
  }
  throw std::logic_error("unknown workload.routing");
}

}  // namespace

std::unique_ptr<GatingSource> make_gating_source(const Experiment& x, const Workload& w, const std::string& cache_dir)
{
  auto source = make_base_source(x, w, cache_dir);
  if ((w.prefix_block_tokens > 0 && !w.prefix_hashes.empty()) || w.template_owner())
    return std::make_unique<SharedPrefixGating>(std::move(source), w);
  return source;
}

}  // namespace eldr
