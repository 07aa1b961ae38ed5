#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

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

// Options checked by CLI11's PositiveNumber (its lower limit, the smallest double, prints as 0).
static std::set<std::string>& positive_options()
{
  static std::set<std::string> names;
  return names;
}

void require_finite_numbers(CLI::App& app)
{
  static const CLI::Validator finite(
      [](std::string& text) {
        char* end      = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && !std::isfinite(v) ? "must be a finite number, got " + text : std::string();
      },
      "");
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name().starts_with("FLOAT"))
      opt->check(finite);
    if (opt->get_type_name().find(":POSITIVE") != std::string::npos)  // "FLOAT:POSITIVE": the validators' descriptions
      positive_options().insert(opt->get_name());
  }
  for (CLI::App* sub : app.get_subcommands({}))
    require_finite_numbers(*sub);
}

// CLI11's range message, "Value X not in range MIN to MAX" (limits printed in full, DBL_MAX as 309
// digits), as "must be ..., got X".
static std::string range_text(const std::string& value, const std::string& lo, const std::string& hi, bool positive)
{
  const double max = std::strtod(hi.c_str(), nullptr);
  std::string want;
  if (max >= DBL_MAX)
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
    msg = m.prefix().str() + range_text(m[1].str(), trim(m[2].str()), trim(m[3].str()), positive_options().count(option)) +
          m.suffix().str();
  }
  for (auto& c : msg)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (!msg.empty() && msg.back() == ' ')
    msg.pop_back();
  return msg + " (see --help)";
}

}  // namespace eldr::app
