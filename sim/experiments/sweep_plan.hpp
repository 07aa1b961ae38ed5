#pragma once
// A sweep file expanded into points (no SimGrid, no processes: sim/app/sweep_command.cpp runs them).
//
// A sweep file (docs/experiments.md) is a JSON object:
//   name         results go to OUT/<name>/<point>/ (default: the file's stem)
//   base         base experiment config (default configs/default.json)
//   set          fixed overrides, {"dotted.key": value, ...}, as `eldrsim run --set`
//   grid         {"dotted.key": [values...], ...}: the cross product of all lists; the key "config"
//                takes base config files instead of a config key
//   seeds        runs each point with seeds 1..N (default 1: the config's own seed)
//   include      other sweep files (relative to this one) whose points join this sweep; this file's
//                `set` applies under theirs
//   description  free text
// Every point gets a deterministic directory name from its grid values (point_name).
#include "sim/common/json_reader.hpp"
#include "sim/config/experiment.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace eldr {

struct SweepParam {
  std::string key;  // dotted config key, "config" (the base file) or "seed"
  Json value;
};
using SweepAxis = std::pair<std::string, std::vector<Json>>;

// The cross product of the axes, in order, the last axis varying fastest. No axes: one empty point.
std::vector<std::vector<SweepParam>> expand_grid(const std::vector<SweepAxis>& axes);

// A directory name from the parameter values, stable across runs and machines:
// "key=value" joined by "__", the key shortened to its last dotted segment unless two parameters
// share it, "config" values by their file stem, object values as their "key-value" pieces;
// characters outside [A-Za-z0-9._=-] become '-'. Over 120 characters: cut and followed by a hash
// of the whole name. No parameters: "base".
std::string point_name(const std::vector<SweepParam>& params);

// The parameter's value as text for names and CSV cells (strings bare, numbers as JSON).
std::string param_text(const Json& v);

struct SweepPoint {
  std::string sweep;                // the (sub-)sweep's name: results go to OUT/<sweep>/<name>
  std::string name;                 // point_name(params)
  std::string group;                // point_name(params without the seed): points that differ only by seed
  std::string config;               // base config file as resolved (a path usable from here)
  std::string config_label;         // the same relative to the project root (absolute if outside):
                                    // what identity(), the CSV and the fit key use, whatever the cwd
  std::vector<Override> overrides;  // set (outer first), then grid values, then the seed
  std::vector<SweepParam> params;   // the values that vary (grid, seed)
  // From the loaded experiment, for the combined CSV.
  std::string model, workload, router;
  double rate_rps = 0;
  int prefill = 0, decode = 0;
  uint64_t seed = 0;
  std::string fit;      // the router's offline fit its run does at start (router_fit.hpp), empty: none;
  std::string fit_key;  // the sweep fits it once per key (the content of what the fit reads) and shares it
  // Points of one key differ only in their measured phase: they may share one warm-up
  // (sim/workload/measured_phase.hpp). Empty: the point's warm-up is its own.
  std::string warmup_key;
  // What the point reads, by content: the resolved config (every value the run uses) and every file
  // it reads besides the config (model, cluster, hardware, scheduler, trace, lengths, a fitted router file),
  // by project label, each its FNV-1a 64.
  std::string resolved_hash;
  std::map<std::string, std::string> input_hashes;
  // The run's identity, stored with its results (point.json): resuming redoes a point whose identity
  // changed, whatever changed (an override, the config, a file it reads).
  Json identity() const;
};

// Why a recorded identity is not a point's, for a note: "changed since it ran: " and what differs
// ("the overrides", "the resolved config", "models/x.yaml", ...), or that it records no contents.
std::string identity_change(const Json& recorded, const Json& now);

struct SweepPlan {
  std::string file;
  std::vector<SweepPoint> points;
  std::vector<std::string> extra_keys;  // grid keys without a CSV column of their own, first-seen order
  int seeds = 1;
};

struct SweepOptions {
  int seeds = 0;                // > 0: overrides the files' "seeds"
  std::vector<Override> sets;   // applied under every file's own "set"
  bool validate_points = true;  // load every point's experiment (catches bad keys and values)
};

// Reads and validates a sweep file (InputError naming file, field and problem).
SweepPlan load_sweep(const std::string& path, const SweepOptions& options = {});

// Points that may share one warm-up, grouped: key[i] is point i's sharing key (its warm-up key and
// whatever else must match; "" for a point that runs alone). Points of one key go to one batch, in
// their order, at most ceil(points / jobs) a batch, so that a sweep of few points still fills every
// job slot; a full batch starts another for its key. Returns the batches (indices into key), each in
// increasing order, ordered by their first point.
std::vector<std::vector<size_t>> warmup_batches(const std::vector<std::string>& key, int jobs);

// 16 hex digits of FNV-1a 64.
std::string hash_hex(const std::string& text);

}  // namespace eldr
