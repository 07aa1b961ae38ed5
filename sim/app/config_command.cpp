// `eldrsim config keys`: every config key from its declaration (sim/config/experiment_keys.cpp and the
// routers' sections), as text or as the Markdown page docs/config-reference.md.
#include "sim/app/commands.hpp"
#include "sim/config/config_key.hpp"

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>

namespace eldr::app {

namespace {

std::string top_section(std::string_view path)
{
  const size_t dot = path.find('.');
  return dot == std::string_view::npos ? "" : std::string(path.substr(0, dot));
}

// "req/s, between 1e-06 and 10000000": what a value must be, beyond its type.
std::string bounds(const ConfigKey& k)
{
  std::string out(k.unit);
  if (std::string range = range_text(k); !range.empty())
    out += (out.empty() ? "" : ", ") + range;
  return out;
}

void print_text(const std::vector<ConfigKey>& keys)
{
  for (const ConfigKey& k : keys) {
    std::printf("%s  (%s", std::string(k.path).c_str(), std::string(type_name(k.type)).c_str());
    if (k.type != KeyType::section)
      std::printf("; default %s", std::string(default_text(k)).c_str());
    if (std::string b = bounds(k); !b.empty())
      std::printf("; %s", b.c_str());
    std::printf(")\n    %s\n", std::string(k.help).c_str());
    for (const KeyChoice& c : k.choices)
      std::printf("    - %s: %s\n", std::string(c.value).c_str(), std::string(c.help).c_str());
  }
}

// Table cells: a pipe would end the cell.
std::string cell(std::string_view text)
{
  std::string out;
  for (char c : text)
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void print_markdown(const std::vector<ConfigKey>& keys)
{
  std::printf("# Configuration reference\n\n"
              "Every key of an experiment config, generated from the keys' declarations by `eldrsim config keys "
              "--markdown` (do not edit by hand: `make docs` regenerates it, and a test fails when it is stale). "
              "[configuration.md](configuration.md) explains the keys users change most; the declarations are in "
              "`sim/config/experiment_keys.cpp` and, for a router's own section, next to the router.\n\n"
              "A key left out takes its default; `summary.json` records under `config` every value a run used, "
              "given or default (with only the run's router's section). `topology.*.KEY` stands for both "
              "`topology.prefill.KEY` and `topology.decode.KEY`; `[]` marks the items of a list.\n");
  std::string current = "-";
  for (const ConfigKey& k : keys) {
    // A top-level section's declaration heads its table; top-level scalars come first, under "Top level".
    const bool heads     = k.type == KeyType::section && top_section(k.path).empty();
    const std::string in = heads ? std::string(k.path) : top_section(k.path);
    if (in != current) {
      current = in;
      std::printf("\n## %s\n\n", in.empty() ? "Top level" : ("`" + in + "`").c_str());
      if (heads) {
        std::string about = cell(k.help);
        about[0]          = char(std::toupper(static_cast<unsigned char>(about[0])));
        std::printf("%s.\n\n", about.c_str());
      }
      std::printf("| key | type | default | unit, range | meaning |\n| --- | --- | --- | --- | --- |\n");
    }
    if (heads)
      continue;
    std::string meaning = cell(k.help);
    for (const KeyChoice& c : k.choices)
      meaning += "<br>`" + cell(c.value) + "`: " + cell(c.help);
    std::string def = k.type == KeyType::section ? "" : k.def.empty() ? cell(default_text(k)) : "`" + cell(k.def) + "`";
    std::printf("| `%s` | %s | %s | %s | %s |\n", std::string(k.path).c_str(), std::string(type_name(k.type)).c_str(),
                def.c_str(), cell(bounds(k)).c_str(), meaning.c_str());
  }
}

}  // namespace

Command add_config_command(CLI::App& config)
{
  struct Options {
    bool markdown = false;
  };
  auto o    = std::make_shared<Options>();
  auto* sub = config.add_subcommand("keys", "List every config key: path, type, default, unit, range or allowed "
                                            "values, and meaning");
  sub->add_flag("--markdown", o->markdown, "Print the Markdown page docs/config-reference.md");
  return {sub, [o] {
            const std::vector<ConfigKey> keys = config_keys();
            if (o->markdown)
              print_markdown(keys);
            else
              print_text(keys);
            return 0;
          }};
}

}  // namespace eldr::app
