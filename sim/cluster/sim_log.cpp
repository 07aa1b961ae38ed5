#include "sim/cluster/sim_log.hpp"
#include "sim/common/input_error.hpp"

#include <xbt/log.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

// eldr is the parent of every eldr-sim category, so --log=eldr.thres:verbose shows a request's whole life.
XBT_LOG_NEW_CATEGORY(eldr, "eldr-sim: the life of each request");
XBT_LOG_NEW_SUBCATEGORY(eldr_routing, eldr, "eldr-sim decode routing decisions");
XBT_LOG_NEW_SUBCATEGORY(eldr_kv, eldr, "eldr-sim KV cache transfers, prefill to decode");
XBT_LOG_EXTERNAL_CATEGORY(eldr_simulation);
XBT_LOG_EXTERNAL_CATEGORY(eldr_platform);
XBT_LOG_EXTERNAL_CATEGORY(eldr_prefill);
XBT_LOG_EXTERNAL_CATEGORY(eldr_decode);

// Built with AddressSanitizer (GCC defines the macro, clang answers __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define ELDR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ELDR_ASAN 1
#endif
#endif
#ifndef ELDR_ASAN
#define ELDR_ASAN 0
#endif

namespace eldr {

namespace {

// Simulated time first (6 decimals, as SimGrid's own layout), then who logs, so `diff` lines up two runs.
// SimGrid splits a setting at spaces: %e is its space.
constexpr const char* kLayout = "root.fmt:[%11.6d]%e%a%e[%c/%p]%e%m%n";

const std::array<std::string, 7> kLevels = {"trace", "debug", "verbose", "info", "warning", "error", "critical"};

std::string log_problem_hint()
{
  std::string cats;
  for (const std::string& c : eldr_log_categories())
    cats += (cats.empty() ? "" : ", ") + c;
  return "eldr-sim's categories: " + cats + "; SimGrid's: root, s4u, surf, ker_engine, ...";
}

// SimGrid's own categories are global symbols of its library, one per category.
bool simgrid_category(const std::string& name)
{
  return dlsym(RTLD_DEFAULT, ("_simgrid_log_category__" + name).c_str()) != nullptr;
}

// SimGrid matches the setting by prefix, in this order ("thres" is threshold, "app" appender).
std::string setting_of(const std::string& option)
{
  for (const char* s : {"threshold", "additivity", "appender", "fmt"})
    if (!option.empty() && std::strncmp(option.c_str(), s, option.size()) == 0)
      return s;
  return "";
}

// Empty when SimGrid's layout formatter knows every %-sequence of fmt (it aborts at the first log line otherwise).
std::string layout_problem(const std::string& fmt)
{
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%')
      continue;
    ++i;
    while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.'))
      ++i;
    if (i == fmt.size())
      return "the layout ends with %";
    if (!std::strchr("%necphtPaiFlLMdrm", fmt[i]))
      return std::string("unknown layout sequence %") + fmt[i] +
             " (known: %m message, %c category, %p priority, %a actor, %h host, %d simulated time, %n newline, "
             "%e space, %F %L %l %M source, %i actor id, %% percent)";
  }
  return "";
}

// A file appender: SimGrid aborts when it cannot open the file. Checked without changing it.
std::string file_problem(const std::string& path)
{
  if (path.empty())
    return "file: needs a path, e.g. app:file:run.log";
  if (std::filesystem::is_directory(path))
    return "file:" + path + " is a directory";
  const bool existed = std::filesystem::exists(path);
  FILE* f            = std::fopen(path.c_str(), "a");
  if (!f)
    return "cannot write file:" + path + ": " + std::strerror(errno);
  std::fclose(f);
  if (!existed)
    std::filesystem::remove(path);
  return "";
}

void check_one_setting(const std::string& whole, const std::string& s)
{
  auto fail = [&](const std::string& problem) { throw InputError("--log", whole, problem); };
  if (s == "no_loc")
    return;
  const size_t dot = s.find_first_of(".:=");
  const size_t sep = dot == std::string::npos ? dot : s.find_first_of(":=", dot);
  if (dot == std::string::npos || s[dot] != '.' || sep == std::string::npos)
    fail("want CATEGORY.SETTING:VALUE, e.g. eldr.thres:verbose");
  const std::string cat = s.substr(0, dot), option = s.substr(dot + 1, sep - dot - 1), value = s.substr(sep + 1);
  const std::vector<std::string> ours = eldr_log_categories();
  const bool is_ours                  = std::find(ours.begin(), ours.end(), cat) != ours.end();
  if (!is_ours && !simgrid_category(cat))
    fail("unknown category '" + cat + "' (" + log_problem_hint() + ")");
  const std::string setting = setting_of(option);
  if (setting.empty())
    fail("unknown setting '" + option + "' (want thres, fmt, app or add)");
  if (setting == "threshold") {
    const auto level = std::find_if(kLevels.begin(), kLevels.end(),
                                    [&](const std::string& l) { return strcasecmp(l.c_str(), value.c_str()) == 0; });
    if (level == kLevels.end())
      fail("unknown level '" + value + "' (want trace, debug, verbose, info, warning, error or critical)");
    // A Release build (NDEBUG) compiles eldr-sim's debug lines out; SimGrid's library keeps its own.
    if (is_ours && int(level - kLevels.begin()) + xbt_log_priority_trace < XBT_LOG_STATIC_THRESHOLD)
      fail("eldr-sim's " + value + " lines are compiled out of this (Release) build: the finest is verbose");
  } else if (setting == "appender") {
    if (value.rfind("file:", 0) == 0) {
      if (std::string p = file_problem(value.substr(5)); !p.empty())
        fail(p);
    } else if (value != "stderr" && value != "stdout")
      fail("unknown appender '" + value + "' (want stderr, stdout or file:PATH)");
  } else if (setting == "fmt") {
    if (std::string p = layout_problem(value); !p.empty())
      fail(p);
  }
}

// argv for an Engine: the strings stay owned by `args`.
std::vector<char*> argv_of(std::vector<std::string>& args)
{
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// SimGrid kills the process on some values (a model or context factory it does not know, a value
// outside an option's list): a child process starts an engine with the setting and builds a one-host
// platform, which makes SimGrid read every model. Empty when it lives; else what SimGrid said.
std::string simgrid_probe(const std::string& cfg)
{
  int fds[2];
  if (::pipe(fds) != 0)
    return "";  // cannot probe: the run itself will tell
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "";
  }
  if (pid == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);  // SimGrid aborts: no core file in the user's directory
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::freopen("/dev/null", "w", stdout);
    try {
      std::vector<std::string> args = {"eldrsim", "--log=root.thres:warning", "--log=root.fmt:%m%n", "--cfg=" + cfg};
      std::vector<char*> argv       = argv_of(args);
      int argc                      = int(args.size());
      simgrid::s4u::Engine engine(&argc, argv.data());
      auto* zone = simgrid::s4u::create_full_zone("probe");
      zone->create_host("probe", 1e9);
      zone->seal();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      std::fprintf(stderr, "%s\n", what.substr(0, what.find('\n')).c_str());
      std::fflush(stderr);
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;)
    if (n > 0)
      said.append(buf, size_t(n));
    else if (errno != EINTR)
      break;
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return "";
  // Its lines, trimmed, on one line.
  std::string line;
  for (size_t i = 0; i < said.size();) {
    const size_t end = std::min(said.find('\n', i), said.size());
    std::string part = said.substr(i, end - i);
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty())
      line += (line.empty() ? "" : " ") + part;
    i = end + 1;
  }
  if (line.empty())
    line = WIFSIGNALED(status) ? "SimGrid stops on it (signal " + std::to_string(WTERMSIG(status)) + ")"
                               : "SimGrid stops on it";
  return line;
}

[[noreturn]] void throw_cfg_error(const std::string& value, const std::string& said)
{
  const std::string bad_key = "Bad config key: ";
  if (said.rfind(bad_key, 0) == 0)
    throw InputError("--cfg", value,
                     "SimGrid has no config key '" + said.substr(bad_key.size()) + "' (its documentation lists them)");
  throw InputError("--cfg", value, "SimGrid rejects it: " + said);
}

}  // namespace

std::vector<std::string> eldr_log_categories()
{
  std::vector<std::string> v;
  for (const s_xbt_log_category_t* c :
       {&_XBT_LOGV(eldr), &_XBT_LOGV(eldr_simulation), &_XBT_LOGV(eldr_platform), &_XBT_LOGV(eldr_prefill),
        &_XBT_LOGV(eldr_routing), &_XBT_LOGV(eldr_kv), &_XBT_LOGV(eldr_decode)})
    v.emplace_back(c->name);
  return v;
}

void check_log_setting(const std::string& value)
{
  // SimGrid splits at spaces and honours quotes and backslashes: one setting a word keeps this simple.
  if (value.find_first_of("\"'\\") != std::string::npos)
    throw InputError("--log", value, "quotes and backslashes are not supported (in a layout, %e is a space)");
  size_t n = 0;
  for (size_t i = 0; i < value.size();) {
    const size_t end = std::min(value.find(' ', i), value.size());
    if (end > i) {
      check_one_setting(value, value.substr(i, end - i));
      ++n;
    }
    i = end + 1;
  }
  if (n == 0)
    throw InputError("--log", value, "empty: want CATEGORY.SETTING:VALUE, e.g. eldr.thres:verbose");
}

void check_cfg_setting(const std::string& value)
{
  const size_t colon = value.find(':');
  if (colon == std::string::npos || colon == 0)
    throw InputError("--cfg", value, "want KEY:VALUE, e.g. network/model:CM02");
  // SimGrid would split at these and read each part as another KEY:VALUE.
  if (value.find_first_of(" \t\n,") != std::string::npos)
    throw InputError("--cfg", value, "one KEY:VALUE per --cfg (no spaces or commas)");
  // SimGrid answers "help" with its help text and exits mid-run.
  if (value.substr(colon + 1) == "help")
    throw InputError("--cfg", value, "SimGrid's help is not available here: its documentation lists the values");
  if (const std::string said = simgrid_probe(value); !said.empty())
    throw_cfg_error(value, said);
}

std::unique_ptr<simgrid::s4u::Engine> make_engine(const std::vector<std::string>& log,
                                                  const std::vector<std::string>& cfg)
{
  for (const std::string& s : log)
    check_log_setting(s);
  std::vector<std::string> args = {"eldrsim", "--log=root.thres:warning"};
  if (!log.empty())
    args.push_back(std::string("--log=") + kLayout);
  for (const std::string& s : log)
    args.push_back("--log=" + s);
#if ELDR_ASAN
  // AddressSanitizer does not know SimGrid's hand-made stack switches (raw contexts); with ucontext
  // it runs clean given ASAN_OPTIONS=detect_stack_use_after_return=0 (`make sanitize` sets it). The
  // thread factory hangs with Debian's libsimgrid under ASan.
  args.emplace_back("--cfg=contexts/factory:ucontext");
#endif
  for (const std::string& s : cfg)
    args.push_back("--cfg=" + s);
  std::vector<char*> argv = argv_of(args);
  int argc                = int(args.size());
  try {
    return std::make_unique<simgrid::s4u::Engine>(&argc, argv.data());
  } catch (const std::exception& e) {
    if (cfg.empty())
      throw;
    // The settings together (each passed check_cfg_setting alone); SimGrid's first line.
    std::string all;
    for (const std::string& s : cfg)
      all += (all.empty() ? "" : " ") + s;
    const std::string what = e.what();
    throw_cfg_error(all, what.substr(0, what.find('\n')));
  }
}

}  // namespace eldr
