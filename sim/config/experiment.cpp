#include "sim/config/experiment.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/utf8.hpp"
#include "sim/config/config_reader.hpp"
#include "sim/config/experiment_keys.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <unistd.h>

namespace eldr {

namespace fs = std::filesystem;

static bool has_project_layout(const fs::path& dir)
{
  std::error_code ec;
  return fs::is_directory(dir / "models" / "hardware", ec);
}

static std::string search_up(fs::path dir)
{
  std::error_code ec;
  dir = fs::absolute(dir, ec);
  for (; !dir.empty(); dir = dir.parent_path()) {
    if (has_project_layout(dir))
      return dir.string();
    if (dir == dir.root_path())
      break;
  }
  return "";
}

std::string project_root(const std::string& start)
{
  if (const char* home = std::getenv("ELDR_HOME"); home && *home)
    return home;
  std::string found = search_up(fs::path(start).parent_path());
  if (found.empty())
    found = search_up(fs::current_path());
  if (found.empty()) {
    std::error_code ec;
    found = search_up(fs::read_symlink("/proc/self/exe", ec).parent_path());
  }
  return found.empty() ? "." : found;
}

// A name resolves to DIR/NAME.json under the project; anything that looks like a path is used as is.
static std::string resolve_named_file(const std::string& root, const std::string& dir, const std::string& value)
{
  if (value.find('/') != std::string::npos || value.ends_with(".json"))
    return value;
  return (fs::path(root) / dir / (value + ".json")).string();
}

void require_file(const std::string& path, const ConfigReader& r, const std::string& key)
{
  std::error_code ec;
  if (fs::is_directory(path, ec))
    r.fail(key, path + " is a directory, not a file");
  if (!fs::exists(path, ec))
    r.fail(key, "file not found: " + path);
  check_input_file(path);  // a device or FIFO: an error naming it, not "not found"
  r.note_input(path);
}

double instance_kv_capacity_bytes(const Hardware& hw, const ModelSpec& m, int gpus, double memory_fraction)
{
  return double(gpus) * hw.hbm_bytes * memory_fraction - m.weight_bytes();
}

double SpeculativeSpec::weight_bytes(const ModelSpec& target) const
{
  if (tokens == 0 || method == SpeculativeMethod::ngram)
    return 0;
  if (method == SpeculativeMethod::draft)
    return draft.weight_bytes();
  const double layer =
      target.non_expert_bytes_per_layer + target.experts * target.expert_bytes + target.shared_expert_bytes;
  return proposer_layers * (layer + 2.0 * target.hidden * target.hidden * target.weight_bytes_per_param);
}

double SpeculativeSpec::kv_bytes_per_token(const ModelSpec& target) const
{
  if (tokens == 0 || method == SpeculativeMethod::ngram)
    return 0;
  if (method == SpeculativeMethod::draft)
    return draft.kv_bytes_per_token;
  return proposer_layers * target.kv_bytes_per_token / target.attention_layers();
}

double decode_kv_capacity_bytes(const Experiment& x)
{
  const double room = instance_kv_capacity_bytes(x.hardware, x.model, x.topology.decode.gpus_per_instance,
                                                 x.serving.kv_memory_fraction) -
                      x.eplb.weight_bytes(x.model) - x.speculative.weight_bytes(x.model);
  // 1 exactly without a proposer's KV: the capacity as before speculative decoding existed.
  const double target_share =
      x.model.kv_bytes_per_token / (x.model.kv_bytes_per_token + x.speculative.kv_bytes_per_token(x.model));
  return room * target_share;
}

// Requests of one run, measured and warm-up each: a request costs about 500 bytes while the run lasts
// (1.2 million took 580 MB), so ten million stay within a workstation's memory.
constexpr long kMaxRunRequests = 10000000;

void apply_override(Json& doc, const Override& o, const std::string& file)
{
  const auto& [path, text] = o;
  if (path.empty())
    throw InputError(file, "--set", "empty key in '=" + text + "'");
  require_utf8(path, file, "--set key '" + path + "'");
  require_utf8(text, file, "--set " + path);
  Json value;
  try {
    value = parse_json_guarded(text, file, "--set " + path);
  } catch (const Json::parse_error&) {
    if (looks_numeric(text))  // 010, 0x10, 1.: not a number as JSON reads one, and never a string
      throw InputError(file, "--set " + path, number_text_problem(text, false));
    value = text;  // bare words are strings: --set model=gpt-oss-120b
  } catch (const Json::exception&) {
    throw InputError(file, "--set " + path, "value '" + text + "' is not a usable JSON value (a number too large?)");
  }
  // The key path nests as deep as the parsed JSON may (a 60,000-segment key would build an object
  // too deep to copy).
  if (size_t(std::count(path.begin(), path.end(), '.')) + 1 >= kMaxJsonDepth)
    throw InputError(file, "--set",
                     "key path nests deeper than " + std::to_string(kMaxJsonDepth) + " levels ('" + path.substr(0, 40) +
                         "...')");
  Json* node   = &doc;
  size_t begin = 0;
  while (true) {
    size_t dot      = path.find('.', begin);
    std::string key = path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (key.empty())
      throw InputError(file, path, "malformed key path in --set");
    if (!node->is_object())
      throw InputError(file, path, "cannot set a field inside a non-object value");
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    if (node->is_null())
      *node = Json::object();
    begin = dot + 1;
  }
}

static void place_group(InstanceGroup& g, const ClusterSpec& c, std::set<int>& used, const ConfigReader& r)
{
  for (int node : g.nodes)
    if (node >= c.nodes)
      r.fail("nodes", "node " + std::to_string(node) + " does not exist (cluster '" + c.name + "' has " +
                          std::to_string(c.nodes) + " nodes)");
  std::vector<int> free;
  for (int node : g.nodes)
    for (int k = 0; k < c.gpus_per_node; ++k) {
      int gpu = node * c.gpus_per_node + k;
      if (!used.count(gpu))
        free.push_back(gpu);
    }
  long need = long(g.instances) * g.gpus_per_instance;
  if (need > long(free.size()))
    r.fail("instances", std::to_string(g.instances) + " instances x " + std::to_string(g.gpus_per_instance) +
                            " GPUs do not fit on the listed nodes (" + std::to_string(free.size()) + " free GPUs)");
  size_t next = 0;
  for (int i = 0; i < g.instances; ++i) {
    std::vector<int> gpus;
    for (int k = 0; k < g.gpus_per_instance; ++k) {
      gpus.push_back(free[next]);
      used.insert(free[next++]);
    }
    g.gpus.push_back(std::move(gpus));
  }
}

// Every key of `r` must name a label of the kind; the error lists them.
static void require_label_keys(const JsonReader& r, const std::vector<TaskLabel>& labels, const std::string& kind)
{
  for (const auto& k : r.keys())
    if (std::none_of(labels.begin(), labels.end(), [&](const TaskLabel& l) { return l.name == k; })) {
      std::string names;
      for (const auto& l : labels)
        names += (names.empty() ? "" : ", ") + l.name;
      r.fail(k, "not a label of workload kind '" + kind + "' (" + names + ")");
    }
}

// "share": {label: fraction, ...}: those labels get these fractions of the traffic, the others share
// the rest in their usual proportions (a burst of one label is one key). Resolved to weights by index.
static std::vector<double> read_mix_share(ConfigReader& e, const std::vector<TaskLabel>& labels,
                                          const std::string& kind)
{
  const Json& sj = e.value("share");
  if (!sj.is_object() || sj.empty())
    e.fail("share", "must be a non-empty object {label: fraction of traffic, ...}");
  JsonReader sr(sj, e.file(), e.key_path("share"));
  require_label_keys(sr, labels, kind);
  double given = 0, rest = 0;
  std::vector<double> share(labels.size(), -1);
  for (size_t k = 0; k < labels.size(); ++k)
    if (sr.has(labels[k].name))
      given += share[k] = sr.number(labels[k].name, 0, 0, 1);
    else
      rest += labels[k].weight;
  if (given > 1 + 1e-9)
    e.fail("share", "fractions add up to " + std::to_string(given) + ", more than 1");
  if (given <= 0 && rest <= 0)
    e.fail("share", "needs at least one label with a fraction above 0");
  for (size_t k = 0; k < labels.size(); ++k)
    if (share[k] < 0)
      share[k] = rest > 0 ? (1 - given) * labels[k].weight / rest : 0;
  return share;
}

// speculative.draft_model: a dense model file (a name under models/ or a path), as vLLM's
// speculative_config.model for method draft_model.
static ModelSpec read_draft_model(ConfigReader& s, const std::string& root)
{
  const std::string file = resolve_named_file(root, "models", s.text("draft_model"));
  require_file(file, s, "draft_model");
  ModelSpec draft = load_model(file);
  if (draft.experts > 0)
    s.fail("draft_model", "'" + draft.name + "' is a MoE model (" + std::to_string(draft.experts) +
                              " experts): a draft model is dense (experts 0, intermediate_size), e.g. qwen3-0.6b");
  if (draft.sliding_kv_fraction > 0)
    s.fail("draft_model", "'" + draft.name + "' has sliding-window layers, which a draft's cost does not model");
  return draft;
}

// speculative: the acceptance list is checked here (a list of fractions, one per draft position).
static SpeculativeSpec read_speculative(ConfigReader s, const std::string& root)
{
  SpeculativeSpec spec;
  spec.method             = s.choice_of<SpeculativeMethod>("method");
  spec.tokens             = int(s.integer("num_speculative_tokens"));
  spec.expert_persistence = s.number("expert_persistence");
  spec.proposer_layers    = int(s.integer("proposer_layers"));
  if (spec.method == SpeculativeMethod::draft) {
    if (!s.has("draft_model"))
      s.fail("draft_model", "is required with method draft: a dense model file (a name under models/ or a path), "
                            "e.g. qwen3-0.6b");
    if (s.has("proposer_layers"))
      s.fail("proposer_layers", "applies only to method mtp (a draft model's layers are in its file): remove it");
    spec.draft = read_draft_model(s, root);
  } else if (s.has("draft_model")) {
    s.fail("draft_model", "applies only to method draft (this section's method is " +
                              std::string(to_string(spec.method)) + "): set method draft, or remove draft_model");
  } else {
    s.ignore("draft_model");  // absent: no key in the resolved config
  }
  if (!s.has("acceptance")) {
    if (spec.tokens > 0)
      s.fail("acceptance", "is required with num_speculative_tokens " + std::to_string(spec.tokens) +
                               ": give one acceptance probability per draft position, e.g. [0.85]");
    s.ignore("acceptance");
  } else {
    const Json& list = s.value("acceptance");
    if (!list.is_array())
      s.fail("acceptance", "must be a list of probabilities, one per draft position, e.g. [0.85, 0.8]");
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number() || !(list[i].get<double>() >= 0 && list[i].get<double>() <= 1))
        throw InputError(s.file(), s.key_path("acceptance") + "[" + std::to_string(i) + "]",
                         "must be a probability between 0 and 1");
      spec.acceptance.push_back(list[i].get<double>());
    }
    if (long(list.size()) < spec.tokens)
      s.fail("acceptance", "has " + std::to_string(list.size()) + " values for num_speculative_tokens " +
                               std::to_string(spec.tokens) + ": give one per draft position");
    spec.acceptance.resize(size_t(spec.tokens));  // a longer list serves a sweep over k; the run uses the first k
  }
  s.finish();
  return spec;
}

// eplb: what vLLM requires of its EPLBConfig and of the instance it balances.
static EplbSpec read_eplb(ConfigReader e, const Experiment& x)
{
  EplbSpec spec;
  spec.enabled       = e.boolean("enabled");
  spec.redundant     = int(e.integer("num_redundant_experts"));
  spec.window_size   = int(e.integer("window_size"));
  spec.step_interval = int(e.integer("step_interval"));
  spec.policy        = e.choice_of<EplbPolicy>("policy");
  spec.expert_groups = int(e.integer("expert_groups"));
  e.finish();
  if (!spec.enabled)
    return spec;
  const InstanceGroup& d = x.topology.decode;
  if (d.expert_parallel <= 1)
    throw InputError(e.file(), "eplb",
                     "balances expert-parallel decode instances: set topology.decode.expert_parallel to "
                     "gpus_per_instance, or remove the eplb section");
  if (d.placement != Placement::contiguous)
    throw InputError(e.file(), "eplb",
                     "places the experts itself, starting from vLLM's linear placement: set "
                     "topology.decode.placement to \"contiguous\"");
  if (spec.redundant % d.expert_parallel != 0)
    e.fail("num_redundant_experts", std::to_string(spec.redundant) + " redundant experts do not split over " +
                                        std::to_string(d.expert_parallel) +
                                        " ranks: give a multiple of expert_parallel (vLLM requires it)");
  if (d.expert_parallel > 64)
    throw InputError(e.file(), "eplb",
                     "balances at most 64 expert-parallel ranks per instance: lower topology.decode.expert_parallel");
  if (x.model.experts + spec.redundant > 65535)
    e.fail("num_redundant_experts", "too many physical experts per layer (at most 65535)");
  if (x.model.experts % spec.expert_groups != 0)
    e.fail("expert_groups", std::to_string(x.model.experts) + " experts of model '" + x.model.name +
                                "' do not split into " + std::to_string(spec.expert_groups) + " groups");
  return spec;
}

// workload.mix_schedule: [{"at_s": T, "weights": {label: w, ...} | "base"} or {"at_s": T, "share":
// {label: fraction}}, ...], starting at 0, strictly increasing; with weights, labels left out weigh 0.
// Resolved to weights by label index.
static std::vector<MixPhase> read_mix_schedule(ConfigReader& w, KeyTable keys, WorkloadKind kind,
                                               const std::vector<TaskLabel>& labels)
{
  std::vector<MixPhase> schedule;
  if (!w.has("mix_schedule")) {
    w.ignore("mix_schedule");
    return schedule;
  }
  const Json& list = w.value("mix_schedule");
  if (!list.is_array() || list.empty())
    w.fail("mix_schedule", "must be a non-empty list of {\"at_s\": seconds, \"weights\": {label: weight} or \"base\"}");
  if (kind == WorkloadKind::trace)
    w.fail("mix_schedule", "drifts the label mix of generated workloads; a trace brings its own labels");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = w.key_path("mix_schedule") + "[" + std::to_string(i) + "]";
    if (!list[i].is_object())
      throw InputError(w.file(), path, "must be an object {\"at_s\": seconds, \"weights\": ...}");
    ConfigReader e(list[i], w.file(), keys, nullptr, path);  // the resolved config keeps the list as given
    MixPhase phase;
    phase.at_s = e.number("at_s");
    if (i == 0 && phase.at_s != 0)
      e.fail("at_s", "the first piece must start at 0 (the start of the measured phase)");
    if (i > 0 && phase.at_s <= schedule.back().at_s)
      e.fail("at_s", "must be later than the previous piece's (" + std::to_string(schedule.back().at_s) + " s)");
    if (e.has("share") == e.has("weights"))
      e.fail(e.has("share") ? "share" : "weights", "give exactly one of weights (relative, by label) and share "
                                                   "(fractions of traffic for some labels, the rest in the usual mix)");
    if (e.has("share")) {
      phase.weights = read_mix_share(e, labels, std::string(to_string(kind)));
      e.finish();
      schedule.push_back(std::move(phase));
      continue;
    }
    const Json& wj = e.value("weights");
    if (wj.is_string() && wj.get<std::string>() == "base") {
      for (const auto& l : labels)
        phase.weights.push_back(l.weight);
    } else if (wj.is_object()) {
      JsonReader ws(wj, w.file(), e.key_path("weights"));
      double total = 0;
      for (const auto& l : labels)
        total += phase.weights.emplace_back(ws.number(l.name, 0, 0, 1e9));
      require_label_keys(ws, labels, std::string(to_string(kind)));
      if (total <= 0)
        e.fail("weights", "needs at least one label with a weight above 0");
    } else {
      e.fail("weights", "must be an object {label: weight, ...} or the string \"base\"");
    }
    e.finish();
    schedule.push_back(std::move(phase));
  }
  return schedule;
}

static InstanceGroup read_group(ConfigReader r, const ClusterSpec& c, const ModelSpec& m, std::set<int>& used,
                                std::vector<long> default_nodes, bool decode)
{
  InstanceGroup g;
  g.instances         = int(r.integer("instances"));
  g.gpus_per_instance = int(r.integer("gpus_per_instance"));
  const int n         = g.gpus_per_instance;
  g.tensor_parallel   = int(r.integer("tensor_parallel", n));
  if (g.tensor_parallel != n)
    r.fail("tensor_parallel", "must equal gpus_per_instance (" + std::to_string(n) +
                                  "): attention is split over all of an instance's GPUs");
  g.expert_parallel = int(r.integer("expert_parallel", n));
  if (g.expert_parallel != 1 && g.expert_parallel != n)
    r.fail("expert_parallel", "must be 1 (experts tensor-split) or gpus_per_instance (" + std::to_string(n) + ")");
  if (g.expert_parallel > 255)
    r.fail("expert_parallel", "at most 255 ranks");
  if (m.experts % g.expert_parallel != 0)
    r.fail("expert_parallel", std::to_string(m.experts) + " experts of model '" + m.name +
                                  "' do not split evenly over " + std::to_string(g.expert_parallel) + " GPUs");
  g.placement       = r.choice_of<Placement>("placement");
  g.placement_batch = r.number("placement_batch");
  if (g.placement != Placement::contiguous && g.expert_parallel == 1)
    r.fail("placement", "places experts on the GPUs of an expert-parallel instance; needs expert_parallel > 1");
  if (g.placement != Placement::contiguous && !decode)
    r.fail("placement", "prefill instances model no expert placement (their MoE layers are compute-bound); "
                        "set it on topology.decode");
  for (long node : r.integer_list("nodes", default_nodes))
    g.nodes.push_back(int(node));
  if (g.nodes.empty())
    r.fail("nodes", "must list at least one node");
  r.finish();
  place_group(g, c, used, r);
  // Collectives run over the node's xGMI fabric: an instance's GPUs must share a node.
  for (size_t i = 0; i < g.gpus.size(); ++i)
    if (g.gpus[i].front() / c.gpus_per_node != g.gpus[i].back() / c.gpus_per_node)
      r.fail("gpus_per_instance", "instance " + std::to_string(i) + " would span nodes " +
                                      std::to_string(g.gpus[i].front() / c.gpus_per_node) + " and " +
                                      std::to_string(g.gpus[i].back() / c.gpus_per_node) +
                                      " (its collectives run over one node's xGMI): use a divisor of " +
                                      std::to_string(c.gpus_per_node) + " GPUs per instance");
  return g;
}

std::vector<ConfigKey> config_keys(const RouterCatalog& routers)
{
  std::vector<ConfigKey> keys(experiment_keys().begin(), experiment_keys().end());
  for (ConfigKey& k : keys)
    if (k.path == "router")
      k.choices = routers.routers;
  for (const RouterSection& s : routers.sections)
    keys.insert(keys.end(), s.keys.begin(), s.keys.end());
  return keys;
}

Experiment read_experiment(const std::string& config_path, const RouterCatalog& routers,
                           const std::vector<Override>& overrides)
{
  Experiment x;
  x.config_file = config_path;
  Json doc      = load_json_file(config_path);
  if (!doc.is_object())
    throw InputError(config_path, "(top level)", "must be a JSON object");
  for (const auto& o : overrides)
    apply_override(doc, o, config_path);

  const std::string root            = project_root(config_path);
  const std::vector<ConfigKey> keys = config_keys(routers);
  x.resolved                        = Json::object();
  ConfigReader r(doc, config_path, keys, &x.resolved);
  x.input_files = {config_path};
  r.collect_inputs(&x.input_files);
  r.text("description");  // unused, but kept in the resolved config: it names the run

  std::string cluster_file = resolve_named_file(root, "configs/cluster", r.text("cluster"));
  require_file(cluster_file, r, "cluster");
  x.cluster = load_cluster(cluster_file);

  std::string hw_file = resolve_named_file(root, "models/hardware", x.cluster.hardware);
  if (!fs::exists(hw_file))
    throw InputError(cluster_file, "hardware", "file not found: " + hw_file);
  check_input_file(hw_file);
  r.note_input(hw_file);
  x.hardware = load_hardware(hw_file);

  std::string model_file = resolve_named_file(root, "models", r.text("model"));
  require_file(model_file, r, "model");
  x.model = load_model(model_file);
  if (x.model.experts == 0)
    r.fail("model", "'" + x.model.name +
                        "' is a dense model (experts 0): the served model is a MoE model; a dense one serves as "
                        "speculative.draft_model");
  x.calibration = x.model.calibration_for(x.hardware.name, model_file, x.hardware.calibration_from);
  if (x.model.gemm_dtype == "fp8" && x.hardware.dense_fp8_flops <= 0)
    throw InputError(hw_file, "dense_fp8_TFLOPs",
                     "model '" + x.model.name + "' runs fp8 GEMMs but hardware '" + x.hardware.name +
                         "' gives no fp8 peak");

  std::set<int> used;
  auto topo          = r.section("topology");
  x.topology.prefill = read_group(topo.section("prefill"), x.cluster, x.model, used, {0}, false);
  x.topology.decode  = read_group(topo.section("decode"), x.cluster, x.model, used, {1, 2}, true);
  topo.finish();

  auto w           = r.section("workload");
  x.workload.kind  = w.choice_of<WorkloadKind>("kind");
  const bool trace = x.workload.kind == WorkloadKind::trace;
  if (!trace)
    x.workload.labels = load_workload_labels((fs::path(root) / "traces/workload_labels.json").string(),
                                             std::string(to_string(x.workload.kind)));
  x.workload.distinct_prompts     = w.integer("distinct_prompts");
  x.workload.system_prompts       = int(w.integer("system_prompts"));
  x.workload.system_prompt_tokens = int(w.integer("system_prompt_tokens"));
  if ((x.workload.system_prompts > 0) != (x.workload.system_prompt_tokens > 0))
    w.fail(x.workload.system_prompts > 0 ? "system_prompt_tokens" : "system_prompts",
           "system prompts need both a count (system_prompts) and a length (system_prompt_tokens) above 0");
  if (trace && (x.workload.distinct_prompts > 0 || x.workload.system_prompts > 0))
    w.fail(x.workload.distinct_prompts > 0 ? "distinct_prompts" : "system_prompts",
           "prompt sharing is generated for kinds 'task' and 'language'; a trace brings its own prefix_hashes");
  if (w.boolean("chat_template") && !trace) {
    x.workload.template_prefix_tokens = x.model.template_prefix_tokens;
    x.workload.template_suffix_tokens = x.model.template_suffix_tokens;
  }
  x.workload.calibration_requests = w.integer("calibration_requests");
  x.workload.arrivals             = w.choice_of<ArrivalProcess>("arrivals");
  std::string arrivals_file       = w.text("arrivals_file");
  if (x.workload.arrivals == ArrivalProcess::file) {
    x.workload.arrivals_file =
        fs::path(arrivals_file).is_absolute() ? arrivals_file : (fs::path(root) / arrivals_file).string();
    if (!fs::exists(x.workload.arrivals_file))
      w.fail("arrivals_file", "file not found: " + x.workload.arrivals_file);
    check_input_file(x.workload.arrivals_file);
    w.note_input(x.workload.arrivals_file);
    if (trace)
      w.fail("arrivals", "'file' re-times generated workloads; a trace uses 'trace' or 'poisson'");
  }
  if (trace) {
    std::string dir            = w.text("trace");
    x.workload.trace_dir       = fs::path(dir).is_absolute() || fs::exists(dir) ? dir : (fs::path(root) / dir).string();
    const std::string manifest = (fs::path(x.workload.trace_dir) / "trace.json").string();
    if (fs::exists(manifest))
      check_input_file(manifest);
    else
      w.fail("trace", "not a trace directory (no trace.json): " + x.workload.trace_dir +
                          " (make one with `eldrsim trace import ...`; see docs/trace-format.md)");
    w.note_input(x.workload.trace_dir);
  } else {
    w.ignore("trace");
    if (x.workload.arrivals == ArrivalProcess::trace)
      w.fail("arrivals", "'trace' needs workload.kind 'trace'");
  }
  x.workload.rate_rps   = w.number("rate_rps");
  x.workload.duration_s = w.number("duration_s");
  // Absent: rate x duration (a trace: all its remaining requests). Given, it is a count: at least 1
  // (0 is an error, not "the default").
  x.workload.measured_requests_given = w.has("measured_requests");
  if (x.workload.measured_requests_given || !trace) {
    const double n = x.workload.rate_rps * x.workload.duration_s + 0.5;  // rounded by the cast below
    if (!x.workload.measured_requests_given && n > double(kMaxRunRequests))
      w.fail("rate_rps", "rate_rps x duration_s is " + std::to_string(long(n)) + " requests, more than the " +
                             std::to_string(kMaxRunRequests) +
                             " a run may hold in memory; lower rate_rps or duration_s, or set measured_requests");
    x.workload.measured_requests =
        w.integer("measured_requests", x.workload.measured_requests_given ? 0L : std::max(1L, long(n)));
  } else {
    w.ignore("measured_requests");
  }
  x.workload.warmup_requests    = w.integer("warmup_requests");
  x.workload.warmup_rate_rps    = w.number("warmup_rate_rps");
  x.workload.drain_after_warmup = w.boolean("drain_after_warmup");
  // Absent: no horizon. Given, a duration above 0 (0 is not "none").
  if (w.has("horizon_s"))
    x.workload.horizon_s = w.number("horizon_s", 0.0);
  else
    w.ignore("horizon_s");
  x.workload.output_tokens     = int(w.integer("output_tokens"));
  x.workload.prompt_min_tokens = int(w.integer("prompt_min_tokens"));
  x.workload.prompt_max_tokens = int(w.integer("prompt_max_tokens"));
  if (x.workload.prompt_max_tokens < x.workload.prompt_min_tokens)
    w.fail("prompt_max_tokens", "must be at least prompt_min_tokens (" + std::to_string(x.workload.prompt_min_tokens) +
                                    "), got " + std::to_string(x.workload.prompt_max_tokens));
  // Prompt lengths: task prompts from the task datasets; language (chat) prompts from WildChat first
  // user turns, as the testbed's language workload.
  std::string lengths =
      w.text("lengths_file", x.workload.kind == WorkloadKind::language ? "traces/wildchat_first_turn_cl100k.csv"
                                                                       : "traces/task_lengths_cl100k.csv");
  x.workload.lengths_file = fs::path(lengths).is_absolute() ? lengths : (fs::path(root) / lengths).string();
  if (!fs::exists(x.workload.lengths_file))
    w.fail("lengths_file", "file not found: " + x.workload.lengths_file);
  check_input_file(x.workload.lengths_file);
  w.note_input(x.workload.lengths_file);
  // A config written from scratch gets the expert locality the simulator is about: the calibrated
  // generator, or a trace's own routing.
  x.workload.routing = w.choice_of<ExpertRouting>("routing", trace ? ExpertRouting::trace : ExpertRouting::generated);
  if (x.workload.routing == ExpertRouting::trace && !trace)
    w.fail("routing", "'trace' replays a trace's routing file and needs workload.kind 'trace'");
  std::string profile = w.text("routing_profile", x.model.name);
  if (x.workload.routing == ExpertRouting::generated) {
    x.workload.routing_profile_file = resolve_named_file(root, "models/routing", profile);
    if (!w.has("routing_profile") && !fs::exists(x.workload.routing_profile_file))
      w.fail(w.has("routing") ? "routing" : "routing_profile",
             "model '" + x.model.name + "' has no routing profile (" + x.workload.routing_profile_file +
                 "): give workload.routing_profile, or set workload.routing to \"uniform\" (no locality)");
    require_file(x.workload.routing_profile_file, w, "routing_profile");
    x.routing_profile = load_routing_profile(x.workload.routing_profile_file, root);
    if (x.routing_profile.model != x.model.name)
      throw InputError(x.workload.routing_profile_file, "model",
                       "profile is for '" + x.routing_profile.model + "' but the experiment runs '" + x.model.name +
                           "'");
    x.routing_profile.locality(trace ? "task" : std::string(to_string(x.workload.kind)),
                               x.workload.routing_profile_file);
  }
  {
    // workload.union: expected where tokens have laws and the decode instances' unions are single-rank.
    const bool has_laws = x.workload.routing != ExpertRouting::trace;
    const bool ep       = x.topology.decode.expert_parallel > 1;
    x.workload.expert_union =
        w.choice_of<UnionMode>("union", has_laws && !ep ? UnionMode::expected : UnionMode::sampled);
    if (x.workload.expert_union == UnionMode::expected && !has_laws)
      w.fail("union",
             "'expected' needs per-token laws: a replayed trace knows only its tokens' experts (use 'sampled')");
    if (x.workload.expert_union == UnionMode::expected && ep)
      w.fail("union", "'expected' is not built for expert-parallel decode instances yet (use 'sampled')");
  }
  x.workload.mix_schedule = read_mix_schedule(w, keys, x.workload.kind, x.workload.labels);
  if (!x.workload.mix_schedule.empty() && x.workload.distinct_prompts > 0)
    w.fail("mix_schedule", "cannot drift the mix of a prompt pool (distinct_prompts): its prompts' labels are fixed");
  if (w.has("new_subtopics_after_s")) {
    x.workload.new_subtopics_after_s = w.number("new_subtopics_after_s", 0.0);
    if (x.workload.routing != ExpertRouting::generated)
      w.fail("new_subtopics_after_s", "needs workload.routing 'generated' (sub-topics are the routing generator's)");
  } else {
    w.ignore("new_subtopics_after_s");
  }
  w.finish();

  auto s                         = r.section("serving");
  x.serving.prefill_token_budget = s.integer("prefill_token_budget");
  x.serving.max_decode_seqs      = int(s.integer("max_decode_seqs"));
  x.serving.kv_memory_fraction   = s.number("kv_memory_fraction");
  x.serving.prefill_hash_vnodes  = int(s.integer("prefill_hash_vnodes"));
  x.serving.prefill_load_factor  = s.number("prefill_load_factor");
  x.serving.prefix_cache         = s.boolean("prefix_cache");
  x.serving.decode_prefix_cache  = s.boolean("decode_prefix_cache");
  s.finish();
  const int template_tokens = x.workload.template_tokens();
  const int longest_prompt  = x.workload.prompt_max_tokens + x.workload.system_prompt_tokens + template_tokens;
  if (x.serving.prefill_token_budget < longest_prompt)
    throw InputError(config_path, "serving.prefill_token_budget",
                     std::string("must be at least workload.prompt_max_tokens") +
                         (x.workload.system_prompt_tokens > 0 ? " + system_prompt_tokens" : "") +
                         (template_tokens > 0 ? " + the model's chat template" : "") + " (" +
                         std::to_string(longest_prompt) + ") or the longest prompts could never be prefilled");

  if (r.has("speculative"))  // absent: no key in the resolved config, as before the section existed
    x.speculative = read_speculative(r.section("speculative"), root);

  if (r.has("eplb"))  // absent: no key in the resolved config, as before the section existed
    x.eplb = read_eplb(r.section("eplb"), x);

  x.router = r.choice("router");
  x.seed   = uint64_t(r.integer("seed"));

  // Every router's section is read, so a typo in one is an error before any run; the resolved config
  // keeps the run's router's only, and the prefill router's when it is a composition.
  for (const RouterSection& rs : routers.sections) {
    const std::string name(rs.name);
    ConfigReader section = r.section(name);
    rs.read(section, root);
    section.finish();
    // A section only its own router reads would do nothing under another: a sweep of its values would
    // give identical points labelled differently.
    if (name != x.router && !rs.every_run && !rs.shared && doc.contains(name) && doc[name].is_object() &&
        !doc[name].empty())
      r.fail(name, "applies only to router '" + name + "', but the run's router is '" + x.router + "': set router " +
                       name + ", or remove the " + name + " keys");
    if (rs.check_with)
      rs.check_with(section, x);
    x.router_sections[name] = x.resolved[name];
    if (name != x.router && !(rs.every_run && !x.resolved[name].empty()))
      x.resolved.erase(name);
  }

  auto out       = r.section("output");
  x.write_steps  = out.boolean("steps_csv");
  x.decision_log = out.boolean("decision_log");
  out.finish();
  r.finish();

  // The largest request must fit in an instance's KV memory next to the weights (an instance of g GPUs
  // holds g x the memory and one copy of the weights): decode instances always, prefill instances too.
  // Admission reserves whole KV blocks for prompt + output: check the same size.
  double largest = x.model.kv_reserved_bytes(longest_prompt + x.workload.output_tokens);
  for (const InstanceGroup* g : {&x.topology.decode, &x.topology.prefill}) {
    const bool decode = g == &x.topology.decode;
    const double kv_capacity =
        decode ? decode_kv_capacity_bytes(x)
               : instance_kv_capacity_bytes(x.hardware, x.model, g->gpus_per_instance, x.serving.kv_memory_fraction);
    std::string taken = "model weights";
    if (decode && x.eplb.weight_bytes(x.model) > 0)
      taken += " and eplb's redundant experts";
    if (decode && x.speculative.weight_bytes(x.model) > 0)
      taken += x.speculative.method == SpeculativeMethod::draft
                   ? " and the draft model '" + x.speculative.draft.name + "' (its weights and KV)"
                   : " and the MTP module (its weights and KV)";
    if (kv_capacity < largest)
      throw InputError(model_file, "(weights)",
                       taken + " leave no room for one request's KV cache on " +
                           (g->gpus_per_instance == 1
                                ? "'" + x.hardware.name + "'"
                                : std::to_string(g->gpus_per_instance) + " x '" + x.hardware.name + "'") +
                           " (" + std::to_string(kv_capacity / 1e9) + " GB free at kv_memory_fraction " +
                           std::to_string(x.serving.kv_memory_fraction) +
                           (g == &x.topology.prefill ? ", prefill instances" : "") + ")");
  }
  return x;
}

}  // namespace eldr
