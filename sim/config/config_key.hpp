#pragma once
// The declaration of one config key: its dotted path, type, default, unit, range or allowed values and
// help, written once (sim/config/experiment_keys.cpp, and each router's own section) and read by
// everything else: the config reader (ConfigReader) takes defaults and ranges from it, `eldrsim config
// keys` prints it, and docs/config-reference.md is generated from that.
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eldr {

enum class KeyType {
  section,       // an object of further declared keys
  number,        // a JSON number in [min, max]
  integer,       // a JSON integer in [min, max]
  boolean,       // true or false
  text,          // a string (a file name, a directory, a name)
  choice,        // a string among `choices`
  integer_list,  // a list of integers in [min, max]
  value,         // free-form JSON the reader checks itself (a list of objects, a label map)
};

struct KeyChoice {
  std::string_view value;
  std::string_view help;
};

struct ConfigKey {
  // Dotted path from the config's top level. A segment "*" stands for any of a section's named
  // members (topology.*.instances: both topology.prefill and topology.decode); "[]" marks the items of
  // a list (workload.mix_schedule[].at_s).
  std::string_view path = {};
  KeyType type          = KeyType::value;
  // The default as JSON text ("60", "\"poisson\"", "true", "[0]"); empty when the key has none (a
  // section, a required key, or a default computed from other keys: then `default_note`).
  std::string_view def               = {};
  std::string_view default_note      = {};  // how the default depends on other keys, what absence means, or "required"
  std::string_view unit              = {};  // "s", "req/s", "tokens", ... ; empty: none
  double min                         = -std::numeric_limits<double>::infinity();
  double max                         = std::numeric_limits<double>::infinity();
  std::span<const KeyChoice> choices = {};  // choice: the allowed values, in the order help lists them
  std::string_view help              = {};  // one or two sentences
};

using KeyTable = std::span<const ConfigKey>;

// The path with list indices dropped ("workload.mix_schedule[2].at_s" -> "workload.mix_schedule[].at_s").
std::string key_pattern(std::string_view path);
// The declaration of `path` (exact, or matching a "*" segment), nullptr when none.
const ConfigKey* find_key(KeyTable table, std::string_view path);
// The declared keys directly inside section `parent` ("" for the top level), by name, in table order.
std::vector<std::string> key_siblings(KeyTable table, std::string_view parent);
// The name among `names` closest to `name` by edit distance, if close enough to be a likely typo; else "".
std::string closest_name(std::string_view name, const std::vector<std::string>& names);
// The default as a reader shows it: `def`, else `default_note`, else "-".
std::string_view default_text(const ConfigKey& k);
std::string_view type_name(KeyType t);
// "between 1e-06 and 10000000", "at least 0", "" (no bounds), in the shortest round-trip form.
std::string range_text(const ConfigKey& k);

}  // namespace eldr
