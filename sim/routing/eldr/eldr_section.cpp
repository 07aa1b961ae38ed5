// ELDR's config section (eldr.*): its key declarations and reader, listed in the router table
// (router_registry.cpp). The values stay in Experiment::eldr, where the fit, the sweeps and the benches
// read them.
#include "sim/config/config_reader.hpp"
#include "sim/config/experiment.hpp"
#include "sim/routing/eldr/eldr_router.hpp"

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
    {.path    = "eldr.variant",
     .type    = K::choice,
     .def     = "\"counts_idf\"",
     .choices = kVariants,
     .help    = "the prompt signature"},
    {.path    = "eldr.kmeans",
     .type    = K::choice,
     .def     = "\"balanced\"",
     .choices = kKmeans,
     .help    = "the clustering of calibration prompts into one profile per decode worker"},
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

void read_eldr_section(ConfigReader& e, const std::string& root, Experiment& x)
{
  namespace fs          = std::filesystem;
  std::string eldr_file = e.text("model_file");
  if (!eldr_file.empty()) {
    x.eldr.model_file =
        fs::path(eldr_file).is_absolute() || fs::exists(eldr_file) ? eldr_file : (fs::path(root) / eldr_file).string();
    require_file(x.eldr.model_file, e, "model_file");
  }
  x.eldr.variant            = e.choice("variant");
  x.eldr.kmeans             = e.choice("kmeans");
  x.eldr.tau                = e.number("tau");
  x.eldr.min_two            = e.boolean("min_two_candidates");
  x.eldr.refit              = e.choice("refit");
  x.eldr.refit_window_s     = e.number("refit_window_s");
  x.eldr.refit_interval_s   = e.number("refit_interval_s");
  x.eldr.refit_iterations   = int(e.integer("refit_iterations"));
  x.eldr.drift_window_s     = e.number("drift_window_s");
  x.eldr.drift_similarity_z = e.number("drift_similarity_z");
  x.eldr.drift_psi_ratio    = e.number("drift_psi_ratio");
  x.eldr.mask_pairs         = int(e.integer("mask_pairs"));
  x.eldr.mask_min_gain      = e.number("mask_min_gain");
  x.eldr.kmeans_iterations  = int(e.integer("kmeans_iterations"));
  x.eldr.signature_cache    = e.boolean("signature_cache");
  x.eldr.routing_overhead_s = e.number("routing_overhead_ms") * 1e-3;
}

}  // namespace

const RouterSection kEldrSection = {"eldr", kEldrKeys, read_eldr_section};

EldrSpec default_eldr_spec()
{
  static const Json kEmpty = Json::object();
  ConfigReader section(kEmpty, "(defaults)", kEldrKeys, nullptr, "eldr");
  Experiment x;
  read_eldr_section(section, "", x);
  return x.eldr;
}

}  // namespace eldr
