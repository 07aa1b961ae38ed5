#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/common/utf8.hpp"

#include <cerrno>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <unistd.h>

namespace eldr::app {

std::vector<Override> parse_sets(const std::vector<std::string>& sets)
{
  std::vector<Override> v;
  for (const auto& s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos)
      throw InputError("--set", s, "expected KEY=VALUE");
    v.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  return v;
}

// An override's value as the config reads it (apply_override's rule: JSON, else a bare word).
static Json override_value(const std::string& text)
{
  try {
    return Json::parse(text);
  } catch (const Json::exception&) {
    return text;
  }
}

std::vector<OptionOverride> option_overrides(const std::vector<std::string>& sets,
                                             const std::vector<OptionOverride>& dedicated)
{
  std::vector<OptionOverride> all;
  for (Override& o : parse_sets(sets))
    all.push_back({"--set", std::move(o)});
  for (const OptionOverride& d : dedicated) {
    for (const OptionOverride& e : all)
      if (e.value.first == d.value.first && override_value(e.value.second) != override_value(d.value.second))
        throw InputError(d.option, "",
                         "sets " + d.value.first + " to " + d.value.second + ", but " + e.option + " sets it to " +
                             e.value.second + ": give one of them");
    all.push_back(d);
  }
  return all;
}

// Whether an error about config key `field` is about the value an override of `key` gave: the same
// key, one inside it, or (a section's error) the section holding it.
static bool about_key(const std::string& field, const std::string& key)
{
  auto inside = [](const std::string& a, const std::string& b) {
    return a.size() > b.size() && a.starts_with(b) && (a[b.size()] == '.' || a[b.size()] == '[');
  };
  return field == key || inside(field, key) || inside(key, field);
}

Experiment load_with_options(const std::string& config, const std::vector<OptionOverride>& overrides)
{
  std::vector<Override> plain;
  for (const OptionOverride& o : overrides)
    plain.push_back(o.value);
  try {
    return load_experiment(config, plain);
  } catch (const InputError& e) {
    if (e.file() != config)
      throw;
    if (e.field().starts_with("--set"))  // apply_override's own errors (a key path it cannot use)
      throw InputError("--set", e.field().size() > 6 ? e.field().substr(6) : "", e.problem());
    // The last override of a key is the one that took effect.
    for (auto o = overrides.rbegin(); o != overrides.rend(); ++o)
      if (about_key(e.field(), o->value.first))
        throw InputError(o->option, o->option == "--set" || e.field() != o->value.first ? e.field() : "", e.problem());
    throw;
  }
}

// Options checked by CLI11's PositiveNumber (its lower limit, the smallest double, prints as 0).
static std::set<std::string>& positive_options()
{
  static std::set<std::string> names;
  return names;
}

void add_input_checks(CLI::App& app)
{
  static const CLI::Validator finite(
      [](std::string& text) {
        char* end      = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && !std::isfinite(v) ? "must be a finite number, got " + text : std::string();
      },
      "");
  // Every text a user gives ends up in a JSON result (paths and labels too) or names a file: an empty
  // one means nothing, and one that is not UTF-8 would only fail when the result is written.
  static const CLI::Validator text(
      [](std::string& value) -> std::string {
        if (value.empty())
          return "must not be empty";
        if (invalid_utf8_offset(value) != std::string_view::npos)
          return "is not valid UTF-8 (" + describe_invalid_utf8(value) + "); give UTF-8 text";
        return {};
      },
      "");
  // Numbers read as the config's JSON reads them (CLI11 alone reads 010 as octal 8, 0x10 as 16, and a
  // seed of 2^64 as the largest long).
  static const CLI::Validator decimal([](std::string& text) { return number_text_problem(text, false); }, "");
  static const CLI::Validator decimal_integer(
      [](std::string& text) -> std::string {
        if (std::string problem = number_text_problem(text, true); !problem.empty())
          return problem;
        long v         = 0;
        const char* at = text.c_str() + (text[0] == '+');
        if (std::from_chars(at, text.c_str() + text.size(), v).ec == std::errc::result_out_of_range)
          return integer_beyond_text(text[0] == '-', text);
        return {};
      },
      "");
  static const CLI::Validator unsigned_integer(
      [](std::string& text) { return text.starts_with("-") ? "must be at least 0, got " + text : std::string(); }, "");
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type.starts_with("FLOAT")) {
      opt->check(finite);
      opt->check(decimal);
    }
    if (type.starts_with("INT") || type.starts_with("UINT"))
      opt->check(decimal_integer);
    if (type.starts_with("UINT"))
      opt->check(unsigned_integer);
    if (opt->get_type_name().starts_with("TEXT"))
      opt->check(text);
    if (opt->get_type_name().find(":POSITIVE") != std::string::npos)  // "FLOAT:POSITIVE": the validators' descriptions
      positive_options().insert(opt->get_name());
  }
  for (CLI::App* sub : app.get_subcommands({}))
    add_input_checks(*sub);
}

// The shortest text that reads back as `v` (never "%g"'s rounding: "below 1e+07, got 1e+07").
static std::string shortest(double v)
{
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// CLI11's range message, "Value X not in range MIN to MAX" (limits printed in full, DBL_MAX as 309
// digits), as "must be ..., got X".
static std::string range_text(const std::string& value, const std::string& lo, const std::string& hi, bool positive)
{
  const double max = std::strtod(hi.c_str(), nullptr);
  std::string want;
  if (max >= DBL_MAX && positive && std::strtod(value.c_str(), nullptr) > 0)
    want = "a normal positive number, at least " + shortest(DBL_MIN);  // 1e-320 is positive but subnormal
  else if (max >= DBL_MAX)
    want = positive ? "above 0" : "at least " + lo;
  else
    want = "between " + lo + " and " + hi;
  return "must be " + want + ", got " + value;
}

std::string cli_error_line(const CLI::ParseError& e)
{
  std::string msg = e.what();
  static const std::regex range(R"(Value (\S*) not in range (\S+) to (\S+))");
  std::smatch m;
  if (std::regex_search(msg, m, range)) {
    auto trim = [](std::string s) {  // std::to_string's "1.000000" -> "1"
      if (s.find('.') != std::string::npos) {
        s.erase(s.find_last_not_of('0') + 1);
        if (s.back() == '.')
          s.pop_back();
      }
      return s;
    };
    const std::string option = msg.substr(0, msg.find(':'));
    msg                      = m.prefix().str() +
          range_text(m[1].str(), trim(m[2].str()), trim(m[3].str()), positive_options().count(option)) +
          m.suffix().str();
  }
  msg = printable_line(msg);
  while (!msg.empty() && msg.back() == ' ')
    msg.pop_back();
  return msg + " (see --help)";
}

void exec_analysis_script(const std::string& root, const std::string& script, const std::vector<std::string>& args)
{
  namespace fs           = std::filesystem;
  const std::string path = (fs::path(root) / "analysis" / script).string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw InputError(path, "", "not found (set ELDR_HOME to the project directory)");
  const char* py               = std::getenv("ELDR_PYTHON");
  std::string python           = py && *py ? py : "/usr/bin/python3";
  std::vector<std::string> all = {python, path};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(python.c_str(), argv.data());
  throw InputError(python, "", std::string("cannot run: ") + std::strerror(errno));
}

std::string composition_hash(const Json& summary)
{
  if (!summary.contains("router") || summary["router"] != "composed" || !summary.contains("config") ||
      !summary["config"].is_object() || !summary["config"].contains("composed") ||
      !summary["config"]["composed"].is_object())
    return "";
  Json c = summary["config"]["composed"];
  c.erase("scheduler");
  return fnv1a64_hex(c.dump()).substr(0, 8);
}

std::string run_router_label(const Json& summary)
{
  const std::string router =
      summary.contains("router") && summary["router"].is_string() ? summary["router"].get<std::string>() : "";
  const std::string hash = composition_hash(summary);
  if (hash.empty())
    return router;
  const Json& c = summary["config"]["composed"];
  if (c.contains("name") && c["name"].is_string() && c["name"] != "composed")
    return "composed:" + c["name"].get<std::string>();
  return "composed:" + hash;
}

void write_staged(const std::string& staging, const std::string& final, const std::function<void()>& write)
{
  try {
    write();
  } catch (const InputError& e) {
    auto shown = [&](std::string text) {
      for (size_t at = text.find(staging); at != std::string::npos; at = text.find(staging, at + final.size()))
        text.replace(at, staging.size(), final);
      return text;
    };
    throw InputError(shown(e.file()), e.field(), shown(e.problem()) + " (" + final + " left as it was)");
  }
}

std::string this_binary()
{
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    throw InputError("/proc/self/exe", "", "cannot find this binary: " + ec.message());
  return self.string();
}

std::vector<CommandInput> experiment_inputs(const Experiment& x)
{
  std::vector<CommandInput> in;
  for (const auto& f : x.input_files)
    in.push_back({f, f == x.config_file ? "the config" : "a file the config reads"});
  return in;
}

std::string count_of(size_t n, const char* noun)
{
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace eldr::app
