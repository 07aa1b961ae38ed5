#include "sim/config/config_reader.hpp"

#include <stdexcept>

namespace eldr {

ConfigReader::ConfigReader(const Json& object, std::string file, KeyTable table, Json* resolved, std::string path)
    : json_(object, std::move(file), std::move(path)), table_(table), resolved_(resolved)
{
}

const ConfigKey& ConfigReader::declared(const std::string& key, KeyType type, bool computed_default) const
{
  const std::string path = key_path(key);
  const ConfigKey* k     = find_key(table_, path);
  if (!k)
    throw std::logic_error("config key " + path + " is read but not declared (sim/config/experiment_keys.cpp)");
  if (k->type != type)
    throw std::logic_error("config key " + path + " is read as " + std::string(type_name(type)) + " but declared " +
                           std::string(type_name(k->type)));
  if (computed_default && (!k->def.empty() || k->default_note.empty()))
    throw std::logic_error("config key " + path +
                           " is read with a computed default; its declaration must say so "
                           "(default_note) and give no fixed default");
  return *k;
}

static bool is_required(const ConfigKey& k)
{
  return k.def.empty() && k.default_note.starts_with("required");
}

static Json parse_default(const ConfigKey& k)
{
  if (k.def.empty())
    throw std::logic_error("config key " + std::string(k.path) + " has no declared default");
  return Json::parse(k.def);
}

// Integer bounds of a declaration whose range is kept as doubles (infinite: none).
static long to_long(double v)
{
  if (v >= 0x1p63)
    return std::numeric_limits<long>::max();
  if (v <= -0x1p63)
    return std::numeric_limits<long>::min();
  return long(v);
}

void ConfigReader::record(const std::string& key, Json value)
{
  if (resolved_)
    (*resolved_)[key] = std::move(value);
}

double ConfigReader::number(const std::string& key)
{
  const ConfigKey& k = declared(key, KeyType::number, false);
  const double v     = is_required(k) ? json_.require_number(key, k.min, k.max)
                                      : json_.number(key, parse_default(k).get<double>(), k.min, k.max);
  record(key, v);
  return v;
}

double ConfigReader::number(const std::string& key, double computed_default)
{
  const ConfigKey& k = declared(key, KeyType::number, true);
  const double v     = json_.number(key, computed_default, k.min, k.max);
  record(key, v);
  return v;
}

long ConfigReader::integer(const std::string& key)
{
  const ConfigKey& k = declared(key, KeyType::integer, false);
  const long v       = is_required(k) ? json_.require_integer(key, to_long(k.min), to_long(k.max))
                                      : json_.integer(key, parse_default(k).get<long>(), to_long(k.min), to_long(k.max));
  record(key, v);
  return v;
}

long ConfigReader::integer(const std::string& key, long computed_default)
{
  const ConfigKey& k = declared(key, KeyType::integer, true);
  const long v       = json_.integer(key, computed_default, to_long(k.min), to_long(k.max));
  record(key, v);
  return v;
}

bool ConfigReader::boolean(const std::string& key)
{
  const ConfigKey& k = declared(key, KeyType::boolean, false);
  const bool v       = json_.boolean(key, parse_default(k).get<bool>());
  record(key, v);
  return v;
}

std::string ConfigReader::text(const std::string& key)
{
  const ConfigKey& k = declared(key, KeyType::text, false);
  const std::string v =
      is_required(k) ? json_.require_string(key) : json_.string(key, parse_default(k).get<std::string>());
  record(key, v);
  return v;
}

std::string ConfigReader::text(const std::string& key, const std::string& computed_default)
{
  declared(key, KeyType::text, true);
  const std::string v = json_.string(key, computed_default);
  record(key, v);
  return v;
}

static std::vector<std::string> allowed(const ConfigKey& k)
{
  std::vector<std::string> out;
  for (const KeyChoice& c : k.choices)
    out.emplace_back(c.value);
  return out;
}

std::string ConfigReader::choice(const std::string& key)
{
  const ConfigKey& k  = declared(key, KeyType::choice, false);
  const std::string v = json_.choice(key, parse_default(k).get<std::string>(), allowed(k));
  record(key, v);
  return v;
}

std::string ConfigReader::choice(const std::string& key, const std::string& computed_default)
{
  const ConfigKey& k  = declared(key, KeyType::choice, true);
  const std::string v = json_.choice(key, computed_default, allowed(k));
  record(key, v);
  return v;
}

int ConfigReader::choice_index(const std::string& key, const int* computed_default)
{
  const ConfigKey& k = declared(key, KeyType::choice, computed_default != nullptr);
  const std::string v =
      computed_default ? choice(key, std::string(k.choices[size_t(*computed_default)].value)) : choice(key);
  for (size_t i = 0; i < k.choices.size(); ++i)
    if (k.choices[i].value == v)
      return int(i);
  throw std::logic_error("config key " + key_path(key) + ": choice() accepted an undeclared value");
}

std::vector<long> ConfigReader::integer_list(const std::string& key, const std::vector<long>& computed_default)
{
  const ConfigKey& k = declared(key, KeyType::integer_list, true);
  auto v             = json_.integer_list(key, computed_default, to_long(k.min), to_long(k.max));
  record(key, v);
  return v;
}

ConfigReader ConfigReader::section(const std::string& key)
{
  declared(key, KeyType::section, false);
  Json* child        = resolved_ ? &((*resolved_)[key] = Json::object()) : nullptr;
  const JsonReader s = json_.object(key);  // checks the type: an object, or absent (an empty one)
  ConfigReader r(s.json(), file(), table_, child, s.path());
  r.inputs_ = inputs_;
  return r;
}

const Json& ConfigReader::value(const std::string& key)
{
  declared(key, KeyType::value, false);
  const Json& v = json_.raw(key);
  record(key, v);
  return v;
}

void ConfigReader::ignore(const std::string& key)
{
  const std::string path = key_path(key);
  if (!find_key(table_, path))
    throw std::logic_error("config key " + path + " is ignored but not declared");
  json_.ignore(key);
}

void ConfigReader::finish() const
{
  const std::string key = json_.first_unknown_key();
  if (key.empty())
    return;
  const std::vector<std::string> ok = key_siblings(table_, json_.path());
  std::string problem               = "unknown key";
  if (std::string near = closest_name(key, ok); !near.empty())
    problem += " (did you mean '" + near + "'?)";
  std::string list;
  for (const std::string& n : ok)
    list += (list.empty() ? "" : ", ") + n;
  if (!list.empty())
    problem += "; keys here: " + list;
  fail(key, problem);
}

}  // namespace eldr
