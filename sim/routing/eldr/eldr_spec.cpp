// ELDR's config section (eldr.*): its key declarations and reader, listed in the router table
// (router_registry.cpp). The section's values, defaults included, stay in the experiment's
// router_sections, from which eldr_spec() reads them for the router, the fit, the sweeps and the benches.
#include "sim/routing/eldr/eldr_spec.hpp"
#include "sim/config/config_reader.hpp"

#include <filesystem>

namespace eldr {

namespace {

using K = KeyType;

constexpr KeyChoice kVariants[] = {
    {"counts", "per-layer activation counts of the prompt's tokens"},
    {"counts_idf", "counts weighted by each expert's inverse document frequency"},
    {"sqrt_counts", "square roots of the counts"},
    {"binary", "1 for every expert the prompt activated"},
    {"gate_prob", "summed gate probabilities of the prompt's tokens"},
    {"gate_score", "summed raw gate scores (logits)"},
};
constexpr KeyChoice kKmeans[] = {
    {"balanced", "every cluster at most ceil(N/K) prompts: each worker's profile an equal share"},
    {"vanilla", "each prompt to its nearest centroid (an ablation)"},
};
constexpr KeyChoice kRefit[] = {
    {"online", "periodic (its old name)"},
    {"periodic", "refit every refit_interval_s on the last refit_window_s of traffic"},
    {"static", "never: the calibration fit throughout"},
    {"triggered", "refit when the drift detector fires"},
};

const ConfigKey kEldrKeys[] = {
    {.path = "eldr", .type = K::section, .help = "ELDR's parameters (docs/eldr.md)"},
    {.path = "eldr.model_file",
     .type = K::text,
     .def  = "\"\"",
     .help = "a fitted model from `eldrsim fit`; empty: fit on the workload's calibration split"},
    {.path         = "eldr.variant",
     .type         = K::choice,
     .default_note = "counts_idf; with model_file: the file's",
     .choices      = kVariants,
     .help         = "the prompt signature"},
    {.path         = "eldr.kmeans",
     .type         = K::choice,
     .default_note = "balanced; with model_file: the file's",
     .choices      = kKmeans,
     .help         = "the clustering of calibration prompts into one profile per decode worker"},
    {.path = "eldr.tau",
     .type = K::number,
     .def  = "0.1",
     .unit = "cosine",
     .min  = 0,
     .max  = 2,
     .help = "locality band: candidates within tau of the best similarity; the least loaded wins"},
    {.path = "eldr.min_two_candidates",
     .type = K::boolean,
     .def  = "true",
     .help = "with tau > 0, always keep at least two candidates"},
    {.path = "eldr.refit", .type = K::choice, .def = "\"online\"", .choices = kRefit, .help = "the refit policy"},
    {.path = "eldr.refit_window_s",
     .type = K::number,
     .def  = "5",
     .unit = "s",
     .min  = 1e-3,
     .max  = 1e6,
     .help = "traffic a refit clusters"},
    {.path = "eldr.refit_interval_s",
     .type = K::number,
     .def  = "1",
     .unit = "s",
     .min  = 1e-3,
     .max  = 1e6,
     .help = "periodic: time between refits"},
    {.path = "eldr.refit_iterations",
     .type = K::integer,
     .def  = "3",
     .min  = 1,
     .max  = 1000,
     .help = "K-means iterations per refit (warm-started)"},
    {.path = "eldr.drift_window_s",
     .type = K::number,
     .def  = "5",
     .unit = "s",
     .min  = 1e-3,
     .max  = 1e6,
     .help = "triggered: the drift detector's window"},
    {.path = "eldr.drift_similarity_z",
     .type = K::number,
     .def  = "6",
     .unit = "noise sd",
     .min  = 0,
     .max  = 1e6,
     .help = "triggered: fire when the mean similarity drops by this many standard errors"},
    {.path = "eldr.drift_psi_ratio",
     .type = K::number,
     .def  = "4",
     .unit = "x stationary",
     .min  = 0,
     .max  = 1e6,
     .help = "triggered: fire when the assignment shift (PSI) exceeds its stationary level this many times"},
    {.path = "eldr.mask_pairs",
     .type = K::integer,
     .def  = "30000",
     .unit = "pairs",
     .min  = 10,
     .max  = 1e7,
     .help = "prompt pairs sampled to choose the layer mask"},
    {.path = "eldr.mask_min_gain",
     .type = K::number,
     .def  = "0.001",
     .unit = "Spearman",
     .min  = 0,
     .max  = 1,
     .help = "a layer joins the mask only if it adds more than this"},
    {.path = "eldr.kmeans_iterations",
     .type = K::integer,
     .def  = "50",
     .min  = 1,
     .max  = 10000,
     .help = "iterations of the calibration fit"},
    {.path = "eldr.signature_cache",
     .type = K::boolean,
     .def  = "true",
     .help = "with prefix caching: per-KV-block expert counts, so cached blocks add to a signature"},
    {.path = "eldr.routing_overhead_ms",
     .type = K::number,
     .def  = "0.86",
     .unit = "ms",
     .min  = 0,
     .max  = 1e4,
     .help = "per request, after its prefill batch: reading its experts, its signature and the decision"},
};

// A fit setting that a model file fixes: absent, the file's value (recorded, so the run's config says
// what ran); given, it must be the file's (the fit is not redone, so another value would not take effect).
std::string fitted_choice(ConfigReader& e, const std::string& key, const std::string& own_default, const Json* model,
                          const std::string& model_file)
{
  if (!model)
    return e.choice(key, own_default);
  JsonReader m(*model, model_file);
  const std::string fitted = m.string(key, own_default);
  const std::string given  = e.choice(key, fitted);
  if (given != fitted)
    e.fail(key, "'" + given + "' differs from the model file's '" + fitted + "' (" + model_file +
                    "): the file's fit is used as it is; remove " + e.key_path(key) +
                    " or fit again with it (eldrsim fit)");
  return given;
}

// `check_model_file`: compare the fit settings with the model file's (when the config is read; the
// resolved section read again later already holds the file's values).
EldrSpec read_eldr_spec(ConfigReader& e, const std::string& root, bool check_model_file)
{
  namespace fs = std::filesystem;
  EldrSpec spec;
  Json model;
  if (std::string file = e.text("model_file"); !file.empty()) {
    spec.model_file = fs::path(file).is_absolute() || fs::exists(file) ? file : (fs::path(root) / file).string();
    require_file(spec.model_file, e, "model_file");
    if (check_model_file)
      model = load_json_file(spec.model_file);
  }
  const Json* fitted      = model.is_object() ? &model : nullptr;
  spec.variant            = fitted_choice(e, "variant", "counts_idf", fitted, spec.model_file);
  spec.kmeans             = fitted_choice(e, "kmeans", "balanced", fitted, spec.model_file);
  spec.tau                = e.number("tau");
  spec.min_two            = e.boolean("min_two_candidates");
  spec.refit              = e.choice("refit");
  spec.refit_window_s     = e.number("refit_window_s");
  spec.refit_interval_s   = e.number("refit_interval_s");
  spec.refit_iterations   = int(e.integer("refit_iterations"));
  spec.drift_window_s     = e.number("drift_window_s");
  spec.drift_similarity_z = e.number("drift_similarity_z");
  spec.drift_psi_ratio    = e.number("drift_psi_ratio");
  spec.mask_pairs         = int(e.integer("mask_pairs"));
  spec.mask_min_gain      = e.number("mask_min_gain");
  spec.kmeans_iterations  = int(e.integer("kmeans_iterations"));
  spec.signature_cache    = e.boolean("signature_cache");
  spec.routing_overhead_s = e.number("routing_overhead_ms") * 1e-3;
  return spec;
}

void check_eldr_section(ConfigReader& e, const std::string& root)
{
  read_eldr_spec(e, root, true);
}

// `section` (an object) outlives the call.
EldrSpec spec_from(const Json& section, const std::string& file, const std::string& root)
{
  ConfigReader r(section, file, kEldrKeys, nullptr, "eldr");
  return read_eldr_spec(r, root, false);
}

}  // namespace

const RouterSection kEldrSection = {"eldr", kEldrKeys, check_eldr_section, false, true};

EldrSpec eldr_spec(const Experiment& x)
{
  static const Json kNone = Json::object();
  const Json& section     = x.router_sections.contains("eldr") ? x.router_sections["eldr"] : kNone;
  return spec_from(section, x.config_file, project_root(x.config_file));
}

EldrSpec default_eldr_spec()
{
  static const Json kNone = Json::object();
  return spec_from(kNone, "(defaults)", "");
}

}  // namespace eldr
