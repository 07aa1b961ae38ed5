#pragma once
// Reads a config section through its key declarations (config_key.hpp): defaults, ranges and allowed
// values come from the declaration, never from the reading code, and every value read, given or
// default, is written to the run's resolved config (summary.json "config"). Strictness is JsonReader's:
// wrong types, out-of-range values and unknown keys are InputErrors naming file and dotted key; an
// unknown key's error suggests the closest declared one and lists the section's keys.
//
// Reading a key nobody declared, with the wrong type, or with a computed default where the declaration
// gives a fixed one is a programming error (std::logic_error), so the table cannot drift from the code.
#include "sim/common/json_reader.hpp"
#include "sim/config/config_key.hpp"

#include <string>
#include <vector>

namespace eldr {

class ConfigReader {
 public:
  // `table` outlives the reader; `resolved` (may be null) receives the values read, by key.
  ConfigReader(const Json& object, std::string file, KeyTable table, Json* resolved, std::string path = "");

  bool has(const std::string& key) const { return json_.has(key); }
  // Whether `key` of this section is declared (a section whose table leaves out some members).
  bool declares(const std::string& key) const { return find_key(table_, key_path(key)) != nullptr; }
  // The declared default, or for keys whose default depends on others (declared with a default_note
  // and no def) the one the caller computed. Keys declared "required" have neither.
  double number(const std::string& key);
  double number(const std::string& key, double computed_default);
  long integer(const std::string& key);
  long integer(const std::string& key, long computed_default);
  bool boolean(const std::string& key);
  std::string text(const std::string& key);
  std::string text(const std::string& key, const std::string& computed_default);
  std::string choice(const std::string& key);
  std::string choice(const std::string& key, const std::string& computed_default);
  // A choice as its enum, whose values are in the declared choices' order.
  template <class E> E choice_of(const std::string& key) { return E(choice_index(key, nullptr)); }
  template <class E> E choice_of(const std::string& key, E computed_default)
  {
    const int d = int(computed_default);
    return E(choice_index(key, &d));
  }
  std::vector<long> integer_list(const std::string& key, const std::vector<long>& computed_default);
  // A declared section (absent: an empty one), read by its own reader.
  ConfigReader section(const std::string& key);
  // A key of type `value`, as given (an error if absent); the reader checks it itself.
  const Json& value(const std::string& key);
  // Marks a declared key known without reading it (a key that means nothing in this configuration).
  void ignore(const std::string& key);
  // The section as given (for a reader that assembles it from more than one source).
  const Json& json() const { return json_.json(); }
  // A reader of `object` (read from `file`) in place of this section's own, at the same path and
  // recording into the same resolved section: a section assembled from another file (the composed
  // router's scheduler file). `object` outlives it.
  ConfigReader over(const Json& object, std::string file) const
  {
    ConfigReader r(object, std::move(file), table_, resolved_, json_.path());
    r.inputs_ = inputs_;
    return r;
  }
  // Fails on the first key that was never asked for, suggesting the closest declared one.
  void finish() const;
  // Files and directories the config names are collected (Experiment::input_files) when the top
  // reader was given a list; sections share it.
  void collect_inputs(std::vector<std::string>* inputs) { inputs_ = inputs; }
  void note_input(const std::string& path) const
  {
    if (inputs_)
      inputs_->push_back(path);
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const { json_.fail(key, problem); }
  std::string key_path(const std::string& key) const { return json_.key_path(key); }
  const std::string& file() const { return json_.file(); }
  std::vector<std::string> keys() const { return json_.keys(); }

 private:
  const ConfigKey& declared(const std::string& key, KeyType type, bool computed_default) const;
  void record(const std::string& key, Json value);
  int choice_index(const std::string& key, const int* computed_default);

  JsonReader json_;
  KeyTable table_;
  Json* resolved_;
  std::vector<std::string>* inputs_ = nullptr;
};

}  // namespace eldr
