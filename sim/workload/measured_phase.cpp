#include "sim/workload/measured_phase.hpp"

#include "sim/common/json_path.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace eldr {

namespace {

// Every field but the arrival time.
bool same_content(const Request& a, const Request& b)
{
  return a.id == b.id && a.label == b.label && a.measured == b.measured && a.prompt_tokens == b.prompt_tokens &&
         a.output_tokens == b.output_tokens && a.prefix_hash == b.prefix_hash && a.routing_seed == b.routing_seed &&
         a.routing_record == b.routing_record && a.hash_begin == b.hash_begin && a.hash_count == b.hash_count;
}

bool same_request(const Request& a, const Request& b)
{
  return same_content(a, b) && a.arrival_s == b.arrival_s;
}

}  // namespace

std::string warmup_not_shareable(const Experiment& x)
{
  const WorkloadSpec& w = x.workload;
  if (w.kind == WorkloadKind::trace)
    return "a trace's workload";
  if (!w.drain_after_warmup || w.warmup_requests == 0)
    return "no drained warm-up";
  if (!w.mix_schedule.empty() || std::isfinite(w.new_subtopics_after_s))
    return "measured requests drawn by their arrival times (drift)";
  return "";
}

Json warmup_config(const Experiment& x)
{
  Json j = x.resolved;
  for (const char* k : kMeasuredPhaseKeys)
    erase_dotted(j, k);
  erase_dotted(j, "description");
  return j;
}

std::string measured_phase_mismatch(const Workload& longest, const Workload& phase)
{
  const Workload &a = longest, &b = phase;
  if (a.labels != b.labels || a.minor_labels != b.minor_labels || a.prefix_block_tokens != b.prefix_block_tokens ||
      a.template_tokens != b.template_tokens ||
      (a.template_owner() && !same_request(*a.template_owner(), *b.template_owner())))
    return "labels or chat template differ";
  if (a.calibration.size() != b.calibration.size())
    return "calibration requests differ";
  for (size_t i = 0; i < a.calibration.size(); ++i)
    if (!same_request(a.calibration[i], b.calibration[i]))
      return "calibration request " + std::to_string(i) + " differs";
  if (b.requests.size() > a.requests.size())
    return "more requests than the longest run";
  for (size_t i = 0; i < b.requests.size(); ++i) {
    const Request &r = a.requests[i], &s = b.requests[i];
    if (r.measured ? !same_content(r, s) : !same_request(r, s))
      return "request " + std::to_string(i) + " differs";
  }
  if (b.prefix_hashes.size() > a.prefix_hashes.size() ||
      !std::equal(b.prefix_hashes.begin(), b.prefix_hashes.end(), a.prefix_hashes.begin()))
    return "prompt block hashes differ";
  return "";
}

void take_measured_phase(Workload& w, const Workload& phase)
{
  if (const std::string why = measured_phase_mismatch(w, phase); !why.empty())
    throw std::logic_error("take_measured_phase: " + why);
  for (size_t i = 0; i < phase.requests.size(); ++i)
    w.requests[i].arrival_s = phase.requests[i].arrival_s;
  w.requests.resize(phase.requests.size());
  w.prefix_hashes.resize(phase.prefix_hashes.size());
}

}  // namespace eldr
