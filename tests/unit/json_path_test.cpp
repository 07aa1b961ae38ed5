// erase_dotted on objects written out by hand: nested keys, missing parts, non-object parts.
#include "sim/common/json_path.hpp"

#include <doctest/doctest.h>

using namespace eldr;
using nlohmann::json;

TEST_CASE("erase_dotted: removes a top-level and a nested key, nothing else")
{
  json j = {{"description", "x"}, {"workload", {{"rate_rps", 60}, {"duration_s", 120}}}, {"router", "eldr"}};
  erase_dotted(j, "description");
  erase_dotted(j, "workload.rate_rps");
  CHECK(j == json{{"workload", {{"duration_s", 120}}}, {"router", "eldr"}});
}

TEST_CASE("erase_dotted: a missing part or a non-object part leaves the object as it was")
{
  const json before = {{"workload", {{"rate_rps", 60}}}, {"router", "eldr"}, {"list", {1, 2}}};
  json j            = before;
  erase_dotted(j, "serving.prefix_cache");  // no "serving"
  erase_dotted(j, "workload.warmup.requests");
  erase_dotted(j, "router.name");  // "router" is a string
  erase_dotted(j, "list.0");
  CHECK(j == before);
  json s = "text";
  erase_dotted(s, "a");
  CHECK(s == "text");
}
