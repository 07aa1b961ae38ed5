#pragma once
// One simulation's full input: plain structs, validated in one place (experiment.cpp).
#include "sim/common/json_reader.hpp"
#include "sim/config/cluster_spec.hpp"
#include "sim/config/config_key.hpp"
#include "sim/config/gating_profile.hpp"
#include "sim/config/hardware.hpp"
#include "sim/config/model_spec.hpp"
#include "sim/config/workload_labels.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace eldr {

// The config's choices, in their declarations' order (experiment_keys.cpp, which also gives their names:
// to_string). ConfigReader::choice_of reads them.
enum class WorkloadKind { task, language, trace };
enum class ArrivalProcess { poisson, trace, file };
enum class ExpertRouting { generated, uniform, trace };  // workload.routing: where tokens' experts come from
enum class UnionMode { expected, sampled };
enum class Placement { contiguous, random, cluster_balanced };
enum class SpeculativeMethod { mtp, ngram, draft };
// eplb.policy: automatic is DeepSeek's and vLLM's rule (hierarchical when the expert groups divide over the nodes).
enum class EplbPolicy : uint8_t { automatic, hierarchical, global };
std::string_view to_string(WorkloadKind k);
std::string_view to_string(ArrivalProcess a);
std::string_view to_string(ExpertRouting r);
std::string_view to_string(UnionMode u);
std::string_view to_string(SpeculativeMethod m);
std::string_view to_string(Placement p);
std::string_view to_string(EplbPolicy p);

// A group of identical instances and where they go: instances fill the listed nodes' GPUs in order.
// A multi-GPU instance (docs/model.md section 3b) splits attention and dense weights over all its GPUs
// (tensor_parallel = gpus_per_instance) and its routed experts either over the GPUs too (expert
// parallel, expert_parallel = gpus_per_instance: each GPU holds experts/ep whole experts, placed by
// `placement`) or tensor-split like the rest (expert_parallel = 1).
//
// The config's values (every field read from a key) have their defaults, units and ranges in the key
// declarations (experiment_keys.cpp), not here: a default-constructed struct holds zeros. Get one
// through load_experiment.
struct InstanceGroup {
  int instances          = 0;
  int gpus_per_instance  = 0;
  int tensor_parallel    = 0;
  int expert_parallel    = 0;
  Placement placement    = Placement::contiguous;  // decode, ep > 1
  double placement_batch = 0;                      // B of the expected-activation weight 1 - (1 - p)^B
  std::vector<int> nodes;
  std::vector<std::vector<int>> gpus;  // resolved: global GPU ids of each instance
};

struct Topology {
  InstanceGroup prefill;
  InstanceGroup decode;
};

// One piece of a drifting label mix: from `at_s` (seconds of measured-phase time) until the next
// piece, labels are drawn with these weights (by label index of the workload kind; relative).
struct MixPhase {
  double at_s = 0;
  std::vector<double> weights;
};

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::task;
  std::vector<TaskLabel> labels;  // task and language: the kind's labels (traces/workload_labels.json)
  std::string trace_dir;          // kind trace: resolved trace directory
  // poisson at rate_rps; trace: a trace's own times; file: the gaps of arrivals_file (Azure 2023 CSV)
  // rescaled to rate_rps
  ArrivalProcess arrivals = ArrivalProcess::poisson;
  std::string arrivals_file;         // resolved; arrivals "file" only
  long calibration_requests    = 0;  // kept apart from served requests (router fitting)
  double rate_rps              = 0;
  long measured_requests       = 0;      // rate_rps x duration_s unless given
  bool measured_requests_given = false;  // set in the config (traces: otherwise all remaining requests)
  double duration_s            = 0;
  long warmup_requests         = 0;
  double warmup_rate_rps       = 0;
  bool drain_after_warmup      = false;  // measured arrivals start once warm-up requests have finished
  double horizon_s             = 0;      // > 0: stop this many simulated seconds after the measured phase
                                         // starts, finished or not (overload studies); 0: run to the end
  int output_tokens     = 0;
  int prompt_min_tokens = 0;
  int prompt_max_tokens = 0;
  long distinct_prompts = 0;     // > 0: requests repeat prompts from a pool of this many (each once in a
                                 // shuffled order, then drawn with replacement); 0: every prompt is new
  int system_prompts       = 0;  // > 0: each request starts with one of this many shared system prompts
  int system_prompt_tokens = 0;  //   of this many tokens
  // The model's chat template (ModelSpec::template_*_tokens) around every prompt of kinds task and
  // language, whose lengths are raw message lengths (workload.chat_template false: none); a trace's
  // lengths are as served. Prompt tokens: template prefix, system prompt, message, template suffix.
  int template_prefix_tokens = 0;
  int template_suffix_tokens = 0;
  int template_tokens() const { return template_prefix_tokens + template_suffix_tokens; }
  std::string lengths_file;                          // resolved path
  ExpertRouting routing = ExpertRouting::generated;  // trace: replay the trace's routing file
  std::string routing_profile_file;                  // generated: resolved models/routing/<name>.json
  // How a step's distinct experts are counted (docs/model.md section 2b): "expected", the exact mean
  // over the tokens' laws (generated and uniform routing; the default there), or "sampled", the union
  // of per-token expert sets (the only choice for replayed traces and expert-parallel instances).
  UnionMode expert_union = UnionMode::expected;
  // Drift (docs/model.md section 4a). Measured requests draw their label from the schedule's piece at
  // their arrival time (empty: the base mix throughout); warm-up and calibration requests from the base mix.
  std::vector<MixPhase> mix_schedule;
  // Measured requests arriving at or after this time draw their sub-topics from a set the calibration
  // split never saw (generated routing only; infinity: never).
  double new_subtopics_after_s = std::numeric_limits<double>::infinity();
};

struct ServingSpec {
  long prefill_token_budget  = 0;
  int max_decode_seqs        = 0;
  double kv_memory_fraction  = 0;
  int prefill_hash_vnodes    = 0;
  double prefill_load_factor = 0;
  bool prefix_cache          = false;  // reuse cached KV blocks of shared prompt prefixes (block_cache.hpp)
  bool decode_prefix_cache   = false;  // with prefix_cache: decode workers cache prompt blocks too
};

// Speculative decoding (docs/speculative.md): each decode step verifies tokens + 1 tokens per sequence
// and emits 1 + a of them, P(a >= i) = acceptance[0] x ... x acceptance[i-1]. tokens = 0: none.
struct SpeculativeSpec {
  SpeculativeMethod method = SpeculativeMethod::mtp;
  int tokens               = 0;    // num_speculative_tokens k
  std::vector<double> acceptance;  // per draft position, given the one before was accepted
  double expert_persistence = 0;   // fraction of a token's experts the next token of its sequence picks too
  int proposer_layers       = 0;   // mtp: decoder layers of the draft module, run once per draft token
  ModelSpec draft;                 // draft: the dense draft model (speculative.draft_model)
  // What the proposer adds to a decode instance (0 without drafts, k = 0, or ngram): its weights, and
  // KV bytes per token next to the target's. mtp: proposer_layers of the target's MoE layers plus
  // the projection of [embedding; hidden] (2 hidden x hidden), embedding and LM head shared with the
  // target as vLLM's proposer does; draft: the draft model's weights and KV.
  double weight_bytes(const ModelSpec& target) const;
  double kv_bytes_per_token(const ModelSpec& target) const;
};

// Expert-parallel load balancing of the decode instances (docs/eplb.md; vLLM's EPLBConfig): redundant
// experts placed by DeepSeek's algorithm from the loads of each instance's last window_size steps,
// recomputed every step_interval steps. enabled = false: none (no section).
struct EplbSpec {
  bool enabled      = false;
  int redundant     = 0;  // num_redundant_experts per MoE layer, over the instance's ranks
  int window_size   = 0;  // steps
  int step_interval = 0;  // steps
  EplbPolicy policy = EplbPolicy::automatic;
  int expert_groups = 1;  // the model's expert groups (group-limited routing; DeepSeek-V3: 8)
  // HBM of the redundant experts on one instance: every MoE layer holds `redundant` more experts.
  double weight_bytes(const ModelSpec& m) const { return enabled ? double(redundant) * m.layers * m.expert_bytes : 0; }
};

struct Experiment {
  std::string config_file;
  // Every file and directory the config read (the config itself, model, cluster, hardware, trace,
  // lengths, a router's files...): inputs an output must keep apart from (output_place.hpp).
  std::vector<std::string> input_files;
  // Every value the run used, given or default, by dotted key (the run's router section only):
  // summary.json's "config".
  Json resolved;
  ClusterSpec cluster;
  Hardware hardware;
  ModelSpec model;
  Calibration calibration;
  GatingProfile routing_profile;  // workload.routing "generated" only
  Topology topology;
  WorkloadSpec workload;
  ServingSpec serving;
  SpeculativeSpec speculative;
  EplbSpec eplb;
  std::string router;
  // Every router's config section as read, defaults included, by router name: where a router's
  // factory reads its parameters (ELDR: eldr_spec() in sim/routing/eldr/eldr_spec.hpp).
  Json router_sections = Json::object();
  uint64_t seed        = 0;
  bool write_steps     = false;
  bool decision_log    = false;  // output.decision_log: decisions.csv, one row per routed request
};

using Override = std::pair<std::string, std::string>;  // dotted key path, value text

class ConfigReader;

// A router's own config section (eldr.*), named after its router: its key declarations (the section
// itself and its members, paths from the top level) and the function that reads and checks it.
struct RouterSection {
  std::string_view name;
  KeyTable keys;
  void (*read)(ConfigReader& section, const std::string& root);  // checks it; `root` resolves file names
  bool every_run = false;  // used whichever router runs (the prefill router's): kept in the resolved config
                           // whenever it records a value
  bool shared = false;     // read by other routers' plugins too (eldr's: the composed locality plugins); a
                           // section neither shared nor every_run is an error under another router
  // Checks the section (as given, in `section`) against the rest of the experiment, read before the
  // routers' sections (serving, workload, topology); may be null.
  void (*check_with)(const ConfigReader& section, const Experiment& x) = nullptr;
};

// What the config reader knows of the routers (the router table, sim/routing/registry/router_registry.hpp,
// builds it): their names with a line each, and their sections.
struct RouterCatalog {
  std::vector<KeyChoice> routers;
  std::vector<RouterSection> sections;
};

// Loads CONFIG, applies overrides (a value is parsed as JSON, else taken as a string), resolves
// the model, hardware and cluster files against the project root, and validates everything. Every
// key is read through its declaration (config_keys); Experiment::resolved gets every value used.
Experiment read_experiment(const std::string& config_path, const RouterCatalog& routers,
                           const std::vector<Override>& overrides = {});
// read_experiment with the router table's catalog. Defined with the table's users, above the routers
// (sim/experiments/load_experiment.cpp), since the config layer cannot know the routers.
Experiment load_experiment(const std::string& config_path, const std::vector<Override>& overrides = {});

// Every declared key: the experiment's (experiment_keys.cpp), `router`'s choices from the catalog,
// then each router section's keys.
std::vector<ConfigKey> config_keys(const RouterCatalog& routers);
// The same for the router table's catalog (sim/experiments/load_experiment.cpp).
std::vector<ConfigKey> config_keys();

// Applies one dotted-path override to a JSON document; errors name `file`.
void apply_override(Json& doc, const Override& o, const std::string& file);

// The directory holding models/, configs/ and traces/: ELDR_HOME if set, else the first ancestor
// of `start` (then of the working directory, then of the executable) that has models/hardware.
std::string project_root(const std::string& start);

// A config key naming a file: an error (at `key` of `r`) when it is missing, a directory or not a regular file.
void require_file(const std::string& path, const ConfigReader& r, const std::string& key);

// KV memory of an instance of `gpus` GPUs: gpus x HBM x memory_fraction - one copy of the weights.
double instance_kv_capacity_bytes(const Hardware& hw, const ModelSpec& m, int gpus, double memory_fraction);
// A decode instance's KV memory in bytes of the target's KV: instance_kv_capacity_bytes less eplb's
// redundant experts and the speculative proposer's weights, scaled by the target's share of each
// token's KV when the proposer keeps KV of its own (exactly the capacity without either).
double decode_kv_capacity_bytes(const Experiment& x);

}  // namespace eldr
