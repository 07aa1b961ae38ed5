#include "sim/experiments/sweep_plan.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/json_path.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/routing/registry/router_registry.hpp"
#include "sim/routing/router_fit.hpp"
#include "sim/workload/measured_phase.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace eldr {

namespace fs = std::filesystem;

std::vector<std::vector<SweepParam>> expand_grid(const std::vector<SweepAxis>& axes)
{
  std::vector<std::vector<SweepParam>> out(1);
  for (const auto& [key, values] : axes) {
    std::vector<std::vector<SweepParam>> next;
    next.reserve(out.size() * values.size());
    for (const auto& prefix : out)
      for (const Json& v : values) {
        next.push_back(prefix);
        next.back().push_back({key, v});
      }
    out = std::move(next);
  }
  return out;
}

std::vector<std::vector<size_t>> warmup_batches(const std::vector<std::string>& key, int jobs)
{
  const size_t slots = size_t(std::max(1, jobs));
  const size_t cap   = std::max<size_t>(1, (key.size() + slots - 1) / slots);
  std::vector<std::vector<size_t>> batches;
  std::map<std::string, size_t> filling;  // key -> the batch it fills
  for (size_t i = 0; i < key.size(); ++i) {
    if (auto f = filling.find(key[i]); !key[i].empty() && f != filling.end() && batches[f->second].size() < cap) {
      batches[f->second].push_back(i);
      continue;
    }
    if (!key[i].empty())
      filling[key[i]] = batches.size();
    batches.push_back({i});
  }
  return batches;
}

std::string hash_hex(const std::string& text)
{
  return fnv1a64_hex(text);
}

std::string param_text(const Json& v)
{
  return v.is_string() ? v.get<std::string>() : v.dump();
}

static std::string value_for_name(const std::string& key, const Json& v)
{
  if (key == "config" && v.is_string())
    return fs::path(v.get<std::string>()).stem().string();
  if (v.is_object()) {
    std::string s;
    for (const auto& [k, x] : v.items())
      s += (s.empty() ? "" : "-") + k + "-" + value_for_name(k, x);
    return s;
  }
  if (v.is_array()) {
    std::string s;
    for (const Json& x : v)
      s += (s.empty() ? "" : "-") + value_for_name("", x);
    return s;
  }
  return param_text(v);
}

static std::string last_segment(const std::string& key)
{
  auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string point_name(const std::vector<SweepParam>& params)
{
  if (params.empty())
    return "base";
  std::map<std::string, int> uses;
  for (const auto& p : params)
    ++uses[last_segment(p.key)];
  std::string name;
  for (const auto& p : params) {
    std::string key = uses[last_segment(p.key)] > 1 ? p.key : last_segment(p.key);
    name += (name.empty() ? "" : "__") + key + "=" + value_for_name(p.key, p.value);
  }
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '=' || c == '-'))
      c = '-';
  if (name.size() > 120)
    name = name.substr(0, 100) + "-" + hash_hex(name);
  return name;
}

Json SweepPoint::identity() const
{
  Json o = Json::array();
  for (const auto& [k, v] : overrides)
    o.push_back({k, v});
  return {
      {"sweep", sweep},        {"point", name}, {"config", config_label}, {"overrides", o}, {"resolved", resolved_hash},
      {"inputs", input_hashes}};
}

std::string identity_change(const Json& recorded, const Json& now)
{
  const std::string unrecorded = "its point.json does not record what it read (an earlier eldrsim wrote it)";
  if (!recorded.is_object() || !recorded.contains("resolved") || !recorded.contains("inputs") ||
      !recorded["inputs"].is_object() || !now.is_object() || !now.contains("inputs"))
    return unrecorded;
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  for (const char* k : {"sweep", "point", "config", "overrides"})
    if (recorded.value(k, Json()) != now.value(k, Json()))
      add(std::string("the ") + k);
  if (recorded["resolved"] != now["resolved"])
    add("the resolved config");
  const Json &was = recorded["inputs"], &is = now["inputs"];
  for (const auto& [f, h] : is.items())
    if (!was.contains(f) || was[f] != h)
      add(f);
  for (const auto& [f, h] : was.items())
    if (!is.contains(f))
      add(f + " (no longer read)");
  return out.empty() ? unrecorded : "changed since it ran: " + out;
}

namespace {

// A path in a sweep file: absolute as is; else relative to the sweep file's directory if it exists
// there; else relative to the project root (configs/default.json from anywhere).
std::string resolve_path(const std::string& value, const std::string& sweep_file)
{
  fs::path p(value);
  if (p.is_absolute())
    return value;
  std::error_code ec;
  fs::path near = fs::path(sweep_file).parent_path() / p;
  if (fs::exists(near, ec))
    return near.lexically_normal().string();
  if (fs::exists(p, ec))
    return value;
  return (fs::path(project_root(sweep_file)) / p).lexically_normal().string();
}

std::string override_text(const Json& v)
{
  return v.dump();
}

std::string project_label(const std::string& path)
{
  std::error_code ec;
  fs::path abs  = fs::weakly_canonical(fs::absolute(path, ec), ec);
  fs::path root = fs::weakly_canonical(fs::absolute(project_root(path), ec), ec);
  fs::path rel  = abs.lexically_relative(root);
  return rel.empty() || rel.begin()->string() == ".." ? abs.string() : rel.string();
}

// Config keys that change no router's offline fit (the run's router and its composition, the load);
// each fit adds its own (RouterFit::run_only_keys).
const char* const kRunOnlyKeys[] = {"router",
                                    "composed",
                                    "workload.rate_rps",
                                    "workload.duration_s",
                                    "workload.measured_requests",
                                    "workload.warmup_requests",
                                    "workload.warmup_rate_rps",
                                    "workload.drain_after_warmup",
                                    "serving.prefix_cache",  // the serving side's caches: not the calibration split
                                    "serving.decode_prefix_cache",
                                    "description"};

struct Loader {
  SweepOptions options;
  SweepPlan plan;
  std::map<std::string, std::string> content_hashes;  // path -> hash: each input read once a sweep

  // FNV-1a 64 of a file's bytes; of a directory (a trace), of its files' names and hashes in order.
  std::string content_hash(const std::string& path)
  {
    if (auto it = content_hashes.find(path); it != content_hashes.end())
      return it->second;
    std::error_code ec;
    std::string h;
    if (fs::is_directory(path, ec)) {
      std::vector<std::string> files;
      for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file(ec))
          files.push_back(it->path().lexically_relative(path).string());
      std::sort(files.begin(), files.end());
      std::string list;
      for (const auto& f : files)
        list += f + '\0' + content_hash((fs::path(path) / f).string()) + '\n';
      h = hash_hex(list);
    } else
      h = fnv1a64_text(fnv1a64_file(path));
    return content_hashes[path] = h;
  }

  std::set<std::string> open_files;                // include cycles
  std::map<std::string, std::string> sweep_names;  // name -> file

  void load(const std::string& path, const std::vector<Override>& outer_sets, int outer_seeds)
  {
    std::string canonical = fs::weakly_canonical(fs::path(path)).string();
    if (open_files.contains(canonical))
      throw InputError(path, "include", "includes itself");
    open_files.insert(canonical);
    Json doc = load_json_file(path);
    if (!doc.is_object())
      throw InputError(path, "", "a sweep file must be a JSON object");
    JsonReader r(doc, path);
    r.ignore("description");
    std::string name = r.string("name", fs::path(path).stem().string());
    if (name.empty() || name.find('/') != std::string::npos || name.starts_with("."))
      r.fail("name", "must be a plain directory name, got '" + name + "'");
    int seeds                  = int(r.integer("seeds", outer_seeds, 1, 1000));
    std::vector<Override> sets = outer_sets;
    if (r.has("set")) {
      const Json& s = r.raw("set");
      if (!s.is_object())
        r.fail("set", "must be an object of \"dotted.key\": value");
      for (const auto& [k, v] : s.items()) {
        if (k.empty() || k == "config")
          r.fail("set", "key '" + k + "' is not a config key");
        if (v.is_null())
          throw InputError(path, "set." + k, "is null (give a value, or leave the key out for the config's own)");
        sets.emplace_back(k, override_text(v));
      }
    }
    std::vector<std::string> includes;
    if (r.has("include")) {
      const Json& inc = r.raw("include");
      if (!inc.is_array() || inc.empty())
        r.fail("include", "must be a non-empty list of sweep files");
      for (const Json& f : inc) {
        if (!f.is_string())
          r.fail("include", "must list file names (strings)");
        includes.push_back(resolve_path(f.get<std::string>(), path));
        if (!fs::is_regular_file(includes.back()))
          r.fail("include", "file not found: " + includes.back());
      }
    }
    bool has_grid_or_base = r.has("grid") || r.has("base");
    std::string base      = resolve_path(r.string("base", "configs/default.json"), path);
    if (!fs::is_regular_file(base))
      r.fail("base", "file not found: " + base);
    std::vector<SweepAxis> axes;
    if (r.has("grid")) {
      const Json& g = r.raw("grid");
      if (!g.is_object() || g.empty())
        r.fail("grid", "must be a non-empty object of \"dotted.key\": [values]");
      for (const auto& [k, values] : g.items()) {
        std::string field = "grid." + k;
        if (k.empty())
          throw InputError(path, "grid", "empty key");
        if (!values.is_array() || values.empty())
          throw InputError(path, field, "must be a non-empty list of values");
        if (k == "seed" && (seeds > 1 || options.seeds > 1))
          throw InputError(path, field, "a seed grid and \"seeds\"/--seeds > 1 together");
        std::vector<Json> v;
        std::set<std::string> seen;
        for (const Json& x : values) {
          if (x.is_null())
            throw InputError(path, field, "lists null (give values; the config's own is not a grid value)");
          if (k == "config") {
            if (!x.is_string())
              throw InputError(path, field, "must list config files (strings)");
            v.push_back(resolve_path(x.get<std::string>(), path));
            if (!fs::is_regular_file(v.back().get<std::string>()))
              throw InputError(path, field, "file not found: " + v.back().get<std::string>());
          } else
            v.push_back(x);
          if (!seen.insert(v.back().dump()).second)
            throw InputError(path, field, "value " + x.dump() + " listed twice");
        }
        axes.emplace_back(k, std::move(v));
      }
    }
    r.finish();
    if (options.seeds > 0)
      seeds = options.seeds;
    for (const auto& inc : includes)
      load(inc, sets, seeds);
    if (!includes.empty() && !has_grid_or_base) {
      open_files.erase(canonical);
      return;
    }
    if (name == "report")  // OUT/report is the report's (eldrsim report): points never live there
      throw InputError(path, "name",
                       "'report' is where the sweep's report goes (OUT/report): name the sweep otherwise "
                       "(\"name\": \"...\", or rename the file)");
    if (auto [it, fresh] = sweep_names.emplace(name, path); !fresh)
      throw InputError(path, "name", "sweep name '" + name + "' is also used by " + it->second);
    if (seeds > 1) {
      std::vector<Json> s;
      for (int i = 1; i <= seeds; ++i)
        s.push_back(i);
      axes.emplace_back("seed", std::move(s));
    }
    plan.seeds = std::max(plan.seeds, seeds);
    std::set<std::string> names;
    for (auto& params : expand_grid(axes))
      add_point(path, name, base, sets, std::move(params), names);
    open_files.erase(canonical);
  }

  void add_point(const std::string& path, const std::string& sweep, const std::string& base,
                 const std::vector<Override>& sets, std::vector<SweepParam> params, std::set<std::string>& names)
  {
    SweepPoint p;
    p.sweep     = sweep;
    p.config    = base;
    p.overrides = sets;
    std::vector<SweepParam> without_seed;
    for (const auto& q : params) {
      if (q.key == "config")
        p.config = q.value.get<std::string>();
      else
        p.overrides.emplace_back(q.key, override_text(q.value));
      if (q.key != "seed")
        without_seed.push_back(q);
    }
    p.config_label = project_label(p.config);
    p.params       = std::move(params);
    p.name         = point_name(p.params);
    p.group        = point_name(without_seed);
    if (!names.insert(p.name).second)
      throw InputError(path, "grid", "two points share the directory name '" + p.name + "'");
    if (options.validate_points)
      describe(path, p);
    plan.points.push_back(std::move(p));
  }

  // Loads the point's experiment: validates it and fills the CSV columns.
  void describe(const std::string& path, SweepPoint& p)
  {
    Experiment x;
    try {
      x = load_experiment(p.config, p.overrides);
    } catch (const InputError& e) {
      // Name the grid key at fault when one value alone is enough to fail.
      for (const auto& q : p.params) {
        if (q.key == "config" || q.key == "seed")
          continue;
        std::vector<Override> one = p.overrides;
        std::erase_if(one, [&](const Override& o) { return o.first == q.key; });
        one.emplace_back(q.key, override_text(q.value));
        try {
          (void)load_experiment(p.config, {one.begin(), one.end() - 1});
        } catch (const InputError&) {
          continue;  // fails without it too: not this key's fault
        }
        try {
          (void)load_experiment(p.config, one);
        } catch (const InputError& e2) {
          throw InputError(path, "grid." + q.key, "value " + q.value.dump() + ": " + e2.what());
        }
      }
      throw InputError(path, "point " + p.name, e.what());
    }
    p.model              = x.model.name;
    p.workload           = to_string(x.workload.kind);
    p.router             = x.router;
    p.rate_rps           = x.workload.rate_rps;
    p.prefill            = x.topology.prefill.instances;
    p.decode             = x.topology.decode.instances;
    p.seed               = x.seed;
    const RouterFit* fit = fit_at_start(x);
    // The config's own bytes are in the resolved config (a comment or a key's order is no change).
    std::string files;
    for (const auto& f : x.input_files)
      if (f != x.config_file) {
        const std::string label = project_label(f), h = content_hash(f);
        p.input_hashes[label] = h;
        files += label + "=" + h + "\n";
      }
    p.resolved_hash = hash_hex(x.resolved.dump());
    if (warmup_not_shareable(x).empty())
      p.warmup_key = hash_hex(p.config + "\n" + warmup_config(x).dump() + "\n" + files);
    if (fit) {  // the fit reads the same, less what only the run uses
      p.fit           = fit->name;
      Json fit_config = x.resolved;
      for (const char* k : kRunOnlyKeys)
        erase_dotted(fit_config, k);
      for (const char* k : fit->run_only_keys)
        erase_dotted(fit_config, k);
      fit_config.erase("output");
      p.fit_key = hash_hex(fit_config.dump() + "\n" + files);
    }
  }
};

// Keys with a column of their own in combined.csv, besides the routers' result columns.
const std::set<std::string> kStandardKeys = {"config",
                                             "router",
                                             "model",
                                             "workload.kind",
                                             "workload.rate_rps",
                                             "topology.prefill.instances",
                                             "topology.decode.instances",
                                             "seed"};

bool result_column_key(const std::string& key)
{
  static const std::vector<ResultColumn> columns = result_columns();
  return std::any_of(columns.begin(), columns.end(), [&](const ResultColumn& c) { return key == c.key; });
}

}  // namespace

SweepPlan load_sweep(const std::string& path, const SweepOptions& options)
{
  Loader l;
  l.options   = options;
  l.plan.file = path;
  l.load(path, options.sets, 1);
  if (l.plan.points.empty())
    throw InputError(path, "", "no points (give a grid, a base or includes)");
  std::set<std::string> seen;
  for (const auto& p : l.plan.points)
    for (const auto& q : p.params)
      if (!kStandardKeys.contains(q.key) && !result_column_key(q.key) && seen.insert(q.key).second)
        l.plan.extra_keys.push_back(q.key);
  return std::move(l.plan);
}

}  // namespace eldr
