#pragma once
// Dotted key paths into nested JSON objects ("workload.rate_rps": j["workload"]["rate_rps"]), as a
// config's --set and a sweep's grid name them.
#include <nlohmann/json.hpp>

#include <string>

namespace eldr {

// Removes `dotted` from j; nothing where a part of the path is missing or not an object.
void erase_dotted(nlohmann::json& j, const std::string& dotted);

}  // namespace eldr
