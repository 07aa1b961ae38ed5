#include "sim/config/config_key.hpp"
#include "sim/common/json_reader.hpp"

#include <algorithm>
#include <cmath>

namespace eldr {

std::string key_pattern(std::string_view path)
{
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    out += path[i];
    if (path[i] == '[') {
      while (i + 1 < path.size() && path[i + 1] != ']')
        ++i;
    }
  }
  return out;
}

// Splits at dots that are not inside brackets (none are today: list items are "name[i]").
static std::vector<std::string_view> segments(std::string_view path)
{
  std::vector<std::string_view> out;
  size_t begin = 0;
  for (size_t dot; (dot = path.find('.', begin)) != std::string_view::npos; begin = dot + 1)
    out.push_back(path.substr(begin, dot - begin));
  out.push_back(path.substr(begin));
  return out;
}

static bool matches(std::string_view declared, std::string_view path)
{
  if (declared == path)
    return true;
  const auto d = segments(declared), p = segments(path);
  if (d.size() != p.size())
    return false;
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != "*" && d[i] != p[i])
      return false;
  return true;
}

const ConfigKey* find_key(KeyTable table, std::string_view path)
{
  const std::string pattern = key_pattern(path);
  for (const ConfigKey& k : table)
    if (k.path == pattern)
      return &k;
  for (const ConfigKey& k : table)
    if (matches(k.path, pattern))
      return &k;
  return nullptr;
}

std::vector<std::string> key_siblings(KeyTable table, std::string_view parent)
{
  const std::string pattern = key_pattern(parent);
  std::vector<std::string> names;
  for (const ConfigKey& k : table) {
    const size_t dot            = k.path.rfind('.');
    const std::string_view dir  = dot == std::string_view::npos ? std::string_view() : k.path.substr(0, dot);
    const std::string_view leaf = dot == std::string_view::npos ? k.path : k.path.substr(dot + 1);
    if ((dir.empty() && pattern.empty()) || (!dir.empty() && !pattern.empty() && matches(dir, pattern)))
      if (std::find(names.begin(), names.end(), leaf) == names.end())
        names.emplace_back(leaf);
  }
  return names;
}

static size_t edit_distance(std::string_view a, std::string_view b)
{
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0]          = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j]          = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal        = up;
    }
  }
  return row[b.size()];
}

std::string closest_name(std::string_view name, const std::vector<std::string>& names)
{
  // A typo changes a few characters: at most a third of the name's, and at least 2 allowed.
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& n : names)
    if (size_t d = edit_distance(name, n); d < best_distance) {
      best          = n;
      best_distance = d;
    }
  return best;
}

std::string_view default_text(const ConfigKey& k)
{
  if (!k.def.empty())
    return k.def;
  if (!k.default_note.empty())
    return k.default_note;
  return "-";
}

std::string_view type_name(KeyType t)
{
  switch (t) {
  case KeyType::section:
    return "section";
  case KeyType::number:
    return "number";
  case KeyType::integer:
    return "integer";
  case KeyType::boolean:
    return "boolean";
  case KeyType::text:
    return "string";
  case KeyType::choice:
    return "choice";
  case KeyType::integer_list:
    return "integer list";
  case KeyType::value:
    return "JSON";
  }
  return "?";
}

std::string range_text(const ConfigKey& k)
{
  if (std::isinf(k.min) && std::isinf(k.max))
    return "";
  if (k.type == KeyType::integer || k.type == KeyType::integer_list)
    return range_text(std::isinf(k.min) ? std::numeric_limits<long>::min() : long(k.min),
                      std::isinf(k.max) ? std::numeric_limits<long>::max() : long(k.max));
  return range_text(k.min, k.max);
}

}  // namespace eldr
