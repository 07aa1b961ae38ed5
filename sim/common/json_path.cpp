#include "sim/common/json_path.hpp"

namespace eldr {

void erase_dotted(nlohmann::json& j, const std::string& dotted)
{
  if (!j.is_object())
    return;
  const auto dot = dotted.find('.');
  if (dot == std::string::npos) {
    j.erase(dotted);
    return;
  }
  const auto it = j.find(dotted.substr(0, dot));
  if (it != j.end())
    erase_dotted(*it, dotted.substr(dot + 1));
}

}  // namespace eldr
