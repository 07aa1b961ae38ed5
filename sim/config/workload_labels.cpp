#include "sim/config/workload_labels.hpp"
#include "sim/common/json_reader.hpp"

#include <set>

namespace eldr {

std::vector<TaskLabel> load_workload_labels(const std::string& path, const std::string& kind)
{
  Json j = load_json_file(path);
  JsonReader r(j, path);
  if (!r.has(kind))
    r.fail(kind, "no labels for workload kind '" + kind + "'");
  JsonReader k     = r.object(kind);
  const Json& list = k.raw("labels");
  if (!list.is_array() || list.empty())
    k.fail("labels", "must be a non-empty list of {\"name\": ..., \"weight\": ...}");
  std::vector<TaskLabel> labels;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = k.key_path("labels") + "[" + std::to_string(i) + "]";
    if (!list[i].is_object())
      throw InputError(path, at, "must be an object {\"name\": ..., \"weight\": ...}");
    JsonReader e(list[i], path, at);
    TaskLabel l;
    l.name   = e.require_string("name");
    l.weight = e.require_number("weight", 1e-12);
    if (l.name.empty() || !names.insert(l.name).second)
      e.fail("name", l.name.empty() ? "must not be empty" : "'" + l.name + "' is already a label of this kind");
    if (e.has("datasets")) {
      const Json& d = e.raw("datasets");
      if (!d.is_array())
        e.fail("datasets", "must be a list of dataset names");
      for (const auto& s : d) {
        if (!s.is_string() || s.get<std::string>().empty())
          e.fail("datasets", "must be a list of non-empty dataset names");
        l.datasets.push_back(s.get<std::string>());
      }
    }
    l.minor = e.boolean("minor", false);
    e.finish();
    labels.push_back(std::move(l));
  }
  k.ignore("source");
  k.finish();
  return labels;
}

}  // namespace eldr
