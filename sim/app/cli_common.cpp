#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"

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

}  // namespace eldr::app
