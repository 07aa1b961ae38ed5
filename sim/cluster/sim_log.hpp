#pragma once
// Watching a run: eldr-sim's log categories and the SimGrid options (--log, --cfg) `run` passes on.
// SimGrid aborts on some bad settings (an unknown setting, a layout it cannot format, a log file it
// cannot open) and throws on others; these checks turn every one into an InputError first.
#include <simgrid/s4u/Engine.hpp>

#include <memory>
#include <string>
#include <vector>

namespace eldr {

// The categories of eldr-sim's own log lines (docs/watching-a-run.md): eldr and its subcategories.
std::vector<std::string> eldr_log_categories();

// A --log value, e.g. "eldr_decode.thres:verbose": throws InputError("--log", value, problem) unless
// SimGrid applies it without aborting (a known category, setting, level, appender and layout).
void check_log_setting(const std::string& value);
// A --cfg value, KEY:VALUE: its form, then SimGrid's answer in a child process (SimGrid knows its
// keys only once an engine exists, one per process, and it aborts on some values).
void check_cfg_setting(const std::string& value);

// The engine, given eldr-sim's defaults and then the user's settings: logs off below warning unless
// `log` asks, our layout (simulated time, actor, category) when it does. `log` is checked here; `cfg`
// should have passed check_cfg_setting (it forks), and what SimGrid still throws is an InputError.
std::unique_ptr<simgrid::s4u::Engine> make_engine(const std::vector<std::string>& log,
                                                  const std::vector<std::string>& cfg);

}  // namespace eldr
