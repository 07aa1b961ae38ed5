// Structure-aware strings: the input is split at zero bytes into texts, which keep whatever bytes the
// fuzzer puts there (invalid UTF-8, control characters, quotes, backslashes), and each text goes
// where a user can put one: a command-line option of `run` (through the command line's own checks),
// a --set key and value, a string in a config file, the config's path. Whatever load_experiment then
// accepts must be writable as the JSON that summary.json echoes; a rejection must be one line of
// UTF-8 (an InputError or a command-line error).
#include "fuzz_common.hpp"
#include "sim/app/commands.hpp"
#include "sim/common/utf8.hpp"
#include "sim/config/experiment.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kConfig = std::string(ELDR_SOURCE_DIR) + "/configs/default.json";
// Keys of the default config whose value is a string, and one that takes any text.
const char* const kStringKeys[] = {"description",      "cluster",      "model",          "router",    "workload.kind",
                                   "workload.routing", "eldr.variant", "workload.trace", "output.dir"};

std::vector<std::string> split(const uint8_t* data, size_t size)
{
  std::vector<std::string> texts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      texts.emplace_back();
    else
      texts.back() += char(data[i]);
  }
  return texts;
}

void require_printable(const std::string& message)
{
  if (message.find('\n') != std::string::npos || eldr::invalid_utf8_offset(message) != std::string::npos) {
    std::fprintf(stderr, "error message is not one line of UTF-8: '%s'\n", message.c_str());
    std::abort();
  }
}

// What `run` does with an accepted experiment before and after simulating it: echo the config.
void load_and_echo(const std::string& config, const std::vector<eldr::Override>& sets)
{
  const eldr::Experiment x = eldr::load_experiment(config, sets);
  (void)x.resolved.dump();  // throws type_error 316 on a string that is not UTF-8
}

// `run CONFIG --out T --router T --set T... --rate X`, options chosen by the texts.
void command_line(const std::string& config_file, const std::vector<std::string>& texts)
{
  CLI::App app;
  std::string config, out, router, cache;
  std::vector<std::string> sets;
  double rate = 0;
  app.add_option("config", config)->required();
  app.add_option("--out", out);
  app.add_option("--router", router);
  app.add_option("--set", sets);
  app.add_option("--routing-cache", cache);
  app.add_option("--rate", rate)->check(CLI::PositiveNumber);
  eldr::app::add_input_checks(app);
  static const char* const kOptions[] = {"--out", "--router", "--set", "--routing-cache", "--rate"};
  std::vector<std::string> args       = {"eldrsim", config_file};
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!texts[i].empty() && texts[i][0] == '-')
      args.push_back(texts[i]);  // an option name of the fuzzer's own
    else {
      args.push_back(kOptions[i % std::size(kOptions)]);
      args.push_back(texts[i]);
    }
  }
  std::vector<const char*> argv;
  for (const auto& a : args)
    argv.push_back(a.c_str());
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0)
      require_printable(eldr::app::cli_error_line(e));
    return;
  }
  std::vector<eldr::Override> overrides = eldr::app::parse_sets(sets);
  if (!router.empty())
    overrides.emplace_back("router", router);
  load_and_echo(config, overrides);
}

// The default config with the text, quotes and backslashes escaped but every other byte raw, as the
// value of one of its string keys.
void config_string(const std::string& text, const std::string& key)
{
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\')
      quoted += '\\';
    quoted += c;
  }
  quoted += "\"";
  std::ifstream in(kConfig);
  std::stringstream s;
  s << in.rdbuf();
  std::string doc          = s.str();
  const std::string anchor = "\"description\": ";
  const size_t at          = doc.find(anchor);
  const size_t end         = doc.find('\n', at);
  if (key == "description")
    doc.replace(at + anchor.size(), end - at - anchor.size() - 1, quoted);  // keeps the trailing comma
  else
    doc.replace(at, 0, "\"x_" + key + "\": " + quoted + ",\n  ");  // an unknown key, quoted back in the error
  const std::string path =
      eldr::fuzz::write_input("strings_config.json", reinterpret_cast<const uint8_t*>(doc.data()), doc.size());
  load_and_echo(path, {});
}

// The default config under a file name made of the text ('/' cannot be in a name: it becomes '_').
void config_path(std::string name)
{
  for (char& c : name)
    if (c == '/')
      c = '_';
  if (name.empty() || name == "." || name == ".." || name.size() > 200)
    return;
  std::ifstream in(kConfig);
  std::stringstream s;
  s << in.rdbuf();
  const std::string doc  = s.str();
  const std::string path = eldr::fuzz::write_input(name, reinterpret_cast<const uint8_t*>(doc.data()), doc.size());
  command_line(path, {});
  std::remove(path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size < 1)
    return 0;
  const uint8_t mode                   = data[0];
  const std::vector<std::string> texts = split(data + 1, size - 1);
  return eldr::fuzz::expect_clean([&] {
    try {
      switch (mode % 4) {
      case 0:
        command_line(kConfig, texts);
        break;
      case 1:
        load_and_echo(kConfig, {{texts[0], texts.size() > 1 ? texts[1] : ""}});
        break;
      case 2:
        config_string(texts[0], kStringKeys[(mode >> 2) % std::size(kStringKeys)]);
        break;
      default:
        config_path(texts[0]);
        break;
      }
    } catch (const eldr::InputError& e) {
      require_printable(e.what());
      throw;
    }
  });
}
