#include "sim/app/commands.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/json_reader.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace eldr::app {

namespace {

double field(const Json& j, const std::string& file, const char* a, const char* b = nullptr)
{
  const Json* v = &j;
  for (const char* k : {a, b}) {
    if (!k)
      break;
    if (!v->is_object() || !v->contains(k))
      throw InputError(file, b ? std::string(a) + "." + b : a, "missing");
    v = &(*v)[k];
  }
  if (!v->is_number())
    throw InputError(file, b ? std::string(a) + "." + b : a, "must be a number");
  return v->get<double>();
}

int table(const std::vector<std::string>& dirs)
{
  std::printf("%-14s %10s %10s %10s %10s %9s %9s\n", "router", "TPOT p50", "TPOT p99", "TTFT p50", "distinct", "batch",
              "requests");
  std::printf("%-14s %10s %10s %10s %10s %9s %9s\n", "", "(ms)", "(ms)", "(ms)", "/layer", "mean", "");
  for (const auto& d : dirs) {
    std::string file = (std::filesystem::path(d) / "summary.json").string();
    Json j           = load_json_file(file);
    std::string router = j.contains("router") && j["router"].is_string() ? j["router"].get<std::string>() : d;
    std::printf("%-14s %10.2f %10.2f %10.1f %10.1f %9.1f %9.0f\n", router.c_str(), field(j, file, "tpot_ms", "p50"),
                field(j, file, "tpot_ms", "p99"), field(j, file, "ttft_ms", "p50"),
                field(j, file, "distinct_experts_per_layer_mean"), field(j, file, "decode_batch_mean"),
                field(j, file, "requests"));
  }
  return 0;
}

}  // namespace

Command add_table_command(CLI::App& app)
{
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("table", "Print TPOT/TTFT of finished runs side by side");
  sub->add_option("results", *dirs, "Run output directories (each with a summary.json)")->required();
  return {sub, [dirs] { return table(*dirs); }};
}

}  // namespace eldr::app
