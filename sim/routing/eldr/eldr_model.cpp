#include "sim/routing/eldr/eldr_model.hpp"
#include "sim/common/json_reader.hpp"
#include "sim/common/result_dir.hpp"

#include <stdexcept>

namespace eldr {

Signature EldrModel::signature(const PromptProfile& p) const
{
  return make_signature(p, variant, &idf, mask);
}

EldrModel fit_eldr(std::span<const Request> calibration, const GatingSource& routing, const GateSource* gates,
                   const std::string& model_name, const EldrFitOptions& opt)
{
  if (int(calibration.size()) < opt.clusters)
    throw std::invalid_argument("ELDR needs at least as many calibration requests as decode workers (" +
                                std::to_string(calibration.size()) + " < " + std::to_string(opt.clusters) + ")");
  if (!gates_support(gates, opt.variant))
    throw std::invalid_argument("signature variant '" + std::string(to_string(opt.variant)) +
                                "' needs gate values the routing source does not have");
  const GatingShape& shape = routing.shape();
  std::vector<PromptProfile> prompts;
  std::vector<std::vector<uint16_t>> decode;
  prompts.reserve(calibration.size());
  for (const Request& r : calibration) {
    prompts.push_back(count_prompt(routing, r, fields_for(opt.variant), gates));
    decode.push_back(count_decode(routing, r));
  }
  EldrModel m;
  m.model                = model_name;
  m.layers               = shape.layers;
  m.experts              = shape.experts;
  m.variant              = opt.variant;
  m.kmeans               = opt.kmeans;
  m.seed                 = opt.seed;
  m.calibration_requests = int(calibration.size());
  m.idf                  = fit_idf(prompts);
  LayerMaskOptions mo;
  mo.pairs        = opt.mask_pairs;
  mo.seed         = opt.seed;
  mo.min_gain     = opt.mask_min_gain;
  LayerMask mask  = fit_layer_mask(prompts, decode, opt.variant, &m.idf, mo);
  m.mask          = mask.layers;
  m.mask_spearman = mask.score();
  if (m.mask.empty())
    throw std::invalid_argument("the layer mask selected no layer: the calibration prompts carry no signal");
  DenseMatrix points(int(prompts.size()), m.dimension());
  for (size_t i = 0; i < prompts.size(); ++i)
    make_signature(prompts[i], m.variant, &m.idf, m.mask, points.row(int(i)));
  KMeansOptions ko;
  ko.variant          = opt.kmeans;
  ko.max_iterations   = opt.kmeans_iterations;
  ko.seed             = opt.seed;
  KMeansResult km     = fit_spherical_kmeans(points, opt.clusters, ko);
  m.centroids         = std::move(km.centroids);
  m.kmeans_iterations = km.iterations;
  return m;
}

std::string eldr_model_json(const EldrModel& m)
{
  Json j;
  j["format"]               = "eldr-router-model";
  j["version"]              = 1;
  j["model"]                = m.model;
  j["layers"]               = m.layers;
  j["experts"]              = m.experts;
  j["variant"]              = std::string(to_string(m.variant));
  j["kmeans"]               = m.kmeans == KMeansVariant::balanced ? "balanced" : "vanilla";
  j["seed"]                 = m.seed;
  j["calibration_requests"] = m.calibration_requests;
  j["kmeans_iterations"]    = m.kmeans_iterations;
  j["mask"]                 = m.mask;
  j["mask_spearman"]        = m.mask_spearman;
  j["idf"]                  = m.idf.idf;
  Json c                    = Json::array();
  for (int k = 0; k < m.centroids.rows; ++k) {
    auto row = m.centroids.row(k);
    c.push_back(std::vector<float>(row.begin(), row.end()));
  }
  j["centroids"] = c;
  // A checksum of the rest, so a file damaged with its JSON intact (a cached fit, say) is caught.
  j["fnv1a64"] = fnv1a64_hex(j.dump());
  return j.dump() + "\n";
}

EldrModel read_eldr_model(const std::string& path)
{
  Json j = load_json_file(path);
  // Files written before the checksum (or by hand) have none and are read as they are.
  if (j.is_object() && j.contains("fnv1a64")) {
    const Json sum = j["fnv1a64"];
    j.erase("fnv1a64");
    if (!sum.is_string() || sum.get<std::string>() != fnv1a64_hex(j.dump()))
      throw InputError(path, "fnv1a64",
                       "does not match the file's contents: it was damaged or edited after "
                       "`eldrsim fit` wrote it (fit again)");
  }
  JsonReader r(j, path);
  if (r.require_string("format") != "eldr-router-model")
    r.fail("format", "not an ELDR router model file (expected \"eldr-router-model\")");
  if (r.require_integer("version", 0, 1000) != 1)
    r.fail("version", "unsupported version (this eldrsim reads version 1)");
  EldrModel m;
  m.model   = r.require_string("model");
  m.layers  = int(r.require_integer("layers", 1, 1000));
  m.experts = int(r.require_integer("experts", 1, 4096));
  auto v    = parse_signature_variant(r.require_string("variant"));
  if (!v)
    r.fail("variant", "unknown signature variant");
  m.variant = *v;
  m.kmeans  = r.choice("kmeans", "balanced", {"balanced", "vanilla"}) == "balanced" ? KMeansVariant::balanced
                                                                                    : KMeansVariant::vanilla;
  m.seed    = uint64_t(r.integer("seed", 1, 0, std::numeric_limits<long>::max()));
  m.calibration_requests = int(r.integer("calibration_requests", 0, 0, 1 << 30));
  m.kmeans_iterations    = int(r.integer("kmeans_iterations", 0, 0, 1 << 30));
  m.mask_spearman        = r.number("mask_spearman", 0, -1, 1);
  for (long l : r.integer_list("mask", {}, 0, m.layers - 1))
    m.mask.push_back(int(l));
  if (m.mask.empty())
    r.fail("mask", "must list at least one layer");
  const Json& idf = r.raw("idf");
  if (!idf.is_array() || idf.size() != size_t(m.layers) * size_t(m.experts))
    r.fail("idf", "must be a list of layers x experts numbers");
  m.idf.layers   = m.layers;
  m.idf.experts  = m.experts;
  m.idf.requests = m.calibration_requests;
  for (const Json& x : idf) {
    if (!x.is_number())
      r.fail("idf", "must hold numbers only");
    m.idf.idf.push_back(x.get<float>());
  }
  const Json& c = r.raw("centroids");
  if (!c.is_array() || c.empty())
    r.fail("centroids", "must be a non-empty list of centroids");
  m.centroids = DenseMatrix(int(c.size()), m.dimension());
  for (size_t k = 0; k < c.size(); ++k) {
    if (!c[k].is_array() || c[k].size() != size_t(m.dimension()))
      r.fail("centroids", "centroid " + std::to_string(k) +
                              " must have |mask| x experts = " + std::to_string(m.dimension()) + " numbers");
    for (size_t i = 0; i < c[k].size(); ++i) {
      if (!c[k][i].is_number())
        r.fail("centroids", "centroid " + std::to_string(k) + " holds a non-number");
      m.centroids.row(int(k))[i] = c[k][i].get<float>();
    }
  }
  r.finish();
  return m;
}

}  // namespace eldr
