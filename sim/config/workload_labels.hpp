#pragma once
// The labels of a generated workload kind (task: code / math / medical / legal; language: en / zh /
// ru / fr / rest) and their traffic weights: data, read from traces/workload_labels.json.
#include <string>
#include <vector>

namespace eldr {

struct TaskLabel {
  std::string name;
  double weight = 0;                  // relative share of the traffic
  std::vector<std::string> datasets;  // rows of the task lengths file its prompts come from (task kind)
  // The label gathers several labels, each too small for a pool of its own (language: 'rest', the
  // languages after fr): the domain oracle puts it in its misc pool whatever its summed share.
  bool minor = false;
};

// The labels of `kind` in `path`; a missing kind, an empty or repeated name or a weight <= 0 is an
// InputError naming the field.
std::vector<TaskLabel> load_workload_labels(const std::string& path, const std::string& kind);

}  // namespace eldr
