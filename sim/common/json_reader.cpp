#include "sim/common/json_reader.hpp"
#include "sim/common/input_file.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unordered_set>

namespace eldr {

const Json JsonReader::empty_object_ = Json::object();

Json load_json_file(const std::string& path)
{
  // A JSON file is parsed whole: 256 MiB is far above any config, model or manifest.
  return parse_json(read_input_file(path, uint64_t(256) << 20), path);
}

namespace {

// Watches the parse as it goes (nlohmann's parser is iterative; copying, comparing and printing a
// value are recursive): a nesting limit, so no later recursion can overflow the stack, and one
// value per key.
class ParseGuard {
 public:
  ParseGuard(const std::string& file, const std::string& where) : file_(file), where_(where) {}

  bool operator()(int, Json::parse_event_t event, Json& parsed)
  {
    switch (event) {
    case Json::parse_event_t::object_start:
    case Json::parse_event_t::array_start:
      if (frames_.size() >= kMaxJsonDepth)
        throw InputError(file_, where_, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      frames_.push_back({event == Json::parse_event_t::object_start, {}, {}, 0});
      break;
    case Json::parse_event_t::key: {
      Frame& f = frames_.back();
      f.key    = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second)
        throw InputError(file_, where_.empty() ? path() : where_ + ": " + path(),
                         "duplicate key (a key may appear once in an object)");
      break;
    }
    case Json::parse_event_t::object_end:
    case Json::parse_event_t::array_end:
      frames_.pop_back();
      [[fallthrough]];
    case Json::parse_event_t::value:
      if (!frames_.empty() && !frames_.back().object)
        ++frames_.back().index;
      break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::unordered_set<std::string> keys;
    std::string key;  // objects: the current key
    size_t index;     // arrays: the current element
  };
  std::string path() const
  {
    std::string p;
    for (const Frame& f : frames_)
      p += f.object ? (p.empty() ? "" : ".") + f.key : "[" + std::to_string(f.index) + "]";
    return p;
  }
  const std::string& file_;
  const std::string& where_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json_guarded(const std::string& text, const std::string& file, const std::string& where)
{
  return Json::parse(text, ParseGuard(file, where));
}

Json parse_json(const std::string& text, const std::string& file, const std::string& where)
{
  try {
    return parse_json_guarded(text, file, where);
  } catch (const Json::exception& e) {
    // parse_error (its message carries the line and column) or out_of_range (a number like 1e500);
    // nlohmann's message minus its "[json.exception.*] " tag.
    std::string what = e.what();
    const auto tag   = what.find("] ");
    throw InputError(file, where, "invalid JSON: " + (tag == std::string::npos ? what : what.substr(tag + 2)));
  }
}

JsonReader::JsonReader(const Json& object, std::string file, std::string path)
    : object_(object), file_(std::move(file)), path_(std::move(path))
{
  if (!object_.is_object())
    throw InputError(file_, path_.empty() ? "(top level)" : path_, "must be a JSON object");
}

std::string JsonReader::key_path(const std::string& key) const
{
  return path_.empty() ? key : path_ + "." + key;
}

void JsonReader::fail(const std::string& key, const std::string& problem) const
{
  throw InputError(file_, key_path(key), problem);
}

bool JsonReader::has(const std::string& key) const
{
  return object_.contains(key);
}

bool JsonReader::is_null(const std::string& key)
{
  if (!object_.contains(key) || !object_.at(key).is_null())
    return false;
  known_.insert(key);
  return true;
}

const Json* JsonReader::find(const std::string& key)
{
  known_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end())
    return nullptr;
  if (it->is_null())
    fail(key, "is null (give a value, or leave the key out for the default)");
  return &*it;
}

// The shortest text that reads back as `v`, so a bound and a value that differ never print alike
// (as 1e+07 and 10000000.000001 would at six digits).
std::string shortest_number(double v)
{
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string range_text(double min, double max)
{
  if (std::isinf(min))
    return "at most " + shortest_number(max);
  if (std::isinf(max))
    return "at least " + shortest_number(min);
  return "between " + shortest_number(min) + " and " + shortest_number(max);
}

std::string range_text(long min, long max)
{
  if (min == std::numeric_limits<long>::min())
    return "at most " + std::to_string(max);
  if (max == std::numeric_limits<long>::max())
    return "at least " + std::to_string(min);
  return "between " + std::to_string(min) + " and " + std::to_string(max);
}

std::string number_text_problem(const std::string& text, bool integer)
{
  static const std::regex whole(R"([+-]?(0|[1-9][0-9]*))");
  static const std::regex real(R"([+-]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  if (std::regex_match(text, integer ? whole : real))
    return "";
  const bool digits_only = !text.empty() && text.find_first_not_of("+-0123456789") == std::string::npos;
  return std::string("must be a decimal ") + (integer ? "integer" : "number") + " (" +
         (integer && !digits_only ? "no fraction or exponent, " : "") + "no leading zeros, no 0x), got " + text;
}

bool looks_numeric(const std::string& text)
{
  // What strtod or strtol would read whole: hex, leading zeros, "1." and ".5" (never a word like "1st").
  static const std::regex numeric(R"([+-]?(0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?|[0-9]+\.))");
  return std::regex_match(text, numeric);
}

std::string integer_beyond_text(bool negative, const std::string& got)
{
  return negative ? "must be at least " + std::to_string(std::numeric_limits<long>::min()) + ", got " + got
                  : "must be at most " + std::to_string(std::numeric_limits<long>::max()) + ", got " + got;
}

double JsonReader::number(const std::string& key, double def, double min, double max)
{
  const Json* v = find(key);
  if (!v)
    return def;
  if (!v->is_number())
    fail(key, std::string("must be a number, got ") + v->type_name());
  double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max)
    fail(key, "must be " + range_text(min, max) + ", got " + shortest_number(x));
  return x;
}

double JsonReader::require_number(const std::string& key, double min, double max)
{
  if (!has(key))
    fail(key, "is required");
  return number(key, 0, min, max);
}

long JsonReader::integer(const std::string& key, long def, long min, long max)
{
  const Json* v = find(key);
  if (!v)
    return def;
  // 2^64 and beyond parse as floating point: whole, but too large all the same.
  if (v->is_number_float() && std::abs(v->get<double>()) >= 0x1p63 && std::isfinite(v->get<double>()))
    fail(key, integer_beyond_text(v->get<double>() < 0, v->dump()));
  if (!v->is_number_integer())
    fail(key, std::string("must be an integer, got ") + (v->is_number() ? v->dump() : v->type_name()));
  if (v->is_number_unsigned() && v->get<unsigned long>() > (unsigned long)std::numeric_limits<long>::max())
    fail(key, integer_beyond_text(false, v->dump()));
  long x = v->get<long>();
  if (x < min || x > max)
    fail(key, "must be " + range_text(min, max) + ", got " + std::to_string(x));
  return x;
}

long JsonReader::require_integer(const std::string& key, long min, long max)
{
  if (!has(key))
    fail(key, "is required");
  return integer(key, 0, min, max);
}

std::string JsonReader::string(const std::string& key, const std::string& def)
{
  const Json* v = find(key);
  if (!v)
    return def;
  if (!v->is_string())
    fail(key, std::string("must be a string, got ") + v->type_name());
  return v->get<std::string>();
}

std::string JsonReader::require_string(const std::string& key)
{
  if (!has(key))
    fail(key, "is required");
  return string(key, "");
}

std::string JsonReader::choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed)
{
  std::string v = string(key, def);
  for (const auto& a : allowed)
    if (a == v)
      return v;
  std::string list;
  for (const auto& a : allowed)
    list += (list.empty() ? "" : ", ") + a;
  fail(key, "unknown value '" + v + "' (expected one of: " + list + ")");
}

bool JsonReader::boolean(const std::string& key, bool def)
{
  const Json* v = find(key);
  if (!v)
    return def;
  if (!v->is_boolean())
    fail(key, std::string("must be true or false, got ") + v->type_name());
  return v->get<bool>();
}

std::vector<long> JsonReader::integer_list(const std::string& key, const std::vector<long>& def, long min, long max)
{
  const Json* v = find(key);
  if (!v)
    return def;
  if (!v->is_array())
    fail(key, std::string("must be a list of integers, got ") + v->type_name());
  std::vector<long> out;
  for (const auto& x : *v) {
    if (!x.is_number_integer())
      fail(key, "must be a list of integers, found " + x.dump());
    long i = x.get<long>();
    if (i < min || i > max)
      fail(key, "entries must be " + range_text(min, max) + ", got " + std::to_string(i));
    out.push_back(i);
  }
  return out;
}

JsonReader JsonReader::object(const std::string& key)
{
  const Json* v = find(key);
  if (!v)
    return JsonReader(empty_object_, file_, key_path(key));
  if (!v->is_object())
    fail(key, std::string("must be an object, got ") + v->type_name());
  return JsonReader(*v, file_, key_path(key));
}

const Json& JsonReader::raw(const std::string& key)
{
  const Json* v = find(key);
  if (!v)
    fail(key, "is required");
  return *v;
}

std::vector<std::string> JsonReader::keys() const
{
  std::vector<std::string> out;
  for (auto it = object_.begin(); it != object_.end(); ++it)
    out.push_back(it.key());
  return out;
}

void JsonReader::ignore(const std::string& key)
{
  known_.insert(key);
}

std::string JsonReader::first_unknown_key() const
{
  for (auto it = object_.begin(); it != object_.end(); ++it)
    if (!known_.count(it.key()))
      return it.key();
  return "";
}

void JsonReader::finish() const
{
  if (std::string key = first_unknown_key(); !key.empty())
    throw InputError(file_, key_path(key), "unknown key");
}

}  // namespace eldr
