#pragma once
// Strict reading of one JSON object: every key must be known, of the right type and in range.
// Errors are InputError naming the file and the dotted key path.
#include "sim/common/input_error.hpp"

#include <nlohmann/json.hpp>

#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace eldr {

using Json = nlohmann::json;

// Deepest nesting of objects and arrays a JSON reader accepts.
inline constexpr size_t kMaxJsonDepth = 100;

// Parses JSON text read from `file` (at `where`, e.g. "line 3"); a syntax error or a number that
// overflows a double is an InputError carrying nlohmann's position. So are nesting deeper than
// kMaxJsonDepth and a key given twice in one object (naming its dotted path).
Json parse_json(const std::string& text, const std::string& file, const std::string& where = "");
// The same, but syntax errors and number overflows stay nlohmann's exceptions (a caller that
// tries JSON first); the depth and duplicate-key checks are InputErrors.
Json parse_json_guarded(const std::string& text, const std::string& file, const std::string& where);
// Parses a whole file; a missing/unreadable file or a parse_json error is an InputError.
Json load_json_file(const std::string& path);

// The shortest text that reads back as `v` ("1e-06", "10000000.000001").
std::string shortest_number(double v);
// "between MIN and MAX", "at least MIN", "at most MAX" (an infinite bound is no bound).
std::string range_text(double min, double max);
std::string range_text(long min, long max);  // the same for integers, in plain digits
// The problem with a number's text, empty when it is a decimal number as JSON writes one (a leading '+'
// allowed): the one reading of numbers for config files, --set values and command-line options, so that
// 010 is never octal 8 and 0x10 never 16. `integer`: no fraction or exponent either.
std::string number_text_problem(const std::string& text, bool integer);
// Whether `text` was meant as a number (C's readers would take it whole: 010, 0x10, 1., .5): a --set
// value that fails JSON's reading of numbers is then an error, not a string.
bool looks_numeric(const std::string& text);
// The problem with an integer beyond what the reader holds (a long), `got` as written: the limit passed.
std::string integer_beyond_text(bool negative, const std::string& got);

class JsonReader {
 public:
  JsonReader(const Json& object, std::string file, std::string path = "");

  // The key is present (a null value too: the getters reject null, it never means "the default").
  bool has(const std::string& key) const;
  // The key is present with the value null: for the few fields whose format allows null (and marks it known).
  bool is_null(const std::string& key);
  // Typed getters. `require_*` fail when the key is absent; the others return the default.
  double number(const std::string& key, double def, double min = -std::numeric_limits<double>::infinity(),
                double max = std::numeric_limits<double>::infinity());
  double require_number(const std::string& key, double min = -std::numeric_limits<double>::infinity(),
                        double max = std::numeric_limits<double>::infinity());
  long integer(const std::string& key, long def, long min = std::numeric_limits<long>::min(),
               long max = std::numeric_limits<long>::max());
  long require_integer(const std::string& key, long min = std::numeric_limits<long>::min(),
                       long max = std::numeric_limits<long>::max());
  std::string string(const std::string& key, const std::string& def);
  std::string require_string(const std::string& key);
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed);
  bool boolean(const std::string& key, bool def);
  std::vector<long> integer_list(const std::string& key, const std::vector<long>& def, long min, long max);
  // A nested object (absent: an empty one) read by its own reader.
  JsonReader object(const std::string& key);
  // The value at `key` as parsed (an error if absent); marks the key known.
  const Json& raw(const std::string& key);
  // The object's keys, in file order.
  std::vector<std::string> keys() const;
  // Marks a key as known without reading it (free-form text such as "source").
  void ignore(const std::string& key);

  // Fails on the first key that was never asked for: catches typos in configs.
  void finish() const;
  // That key, or "" when every key was asked for (a caller that words the error itself).
  std::string first_unknown_key() const;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  std::string key_path(const std::string& key) const;
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }  // dotted path of this object ("" at the top level)
  const Json& json() const { return object_; }

 private:
  const Json* find(const std::string& key);
  const Json& object_;
  std::string file_;
  std::string path_;
  std::set<std::string> known_;
  static const Json empty_object_;
};

}  // namespace eldr
