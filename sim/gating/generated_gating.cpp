#include "sim/gating/generated_gating.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/build_id.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/result_dir.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace eldr {

namespace {

double normal(Rng& rng)
{
  // Box-Muller; one deviate per call keeps the stream simple.
  double u1 = 1.0 - rng.uniform01();
  double u2 = rng.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

constexpr int kMaxWordsPerLayer = 8;  // 512 experts: the models have at most 256

// Vose's alias table for O(1) draws from a discrete distribution.
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& p)
  {
    const size_t n = p.size();
    std::vector<double> prob(n);
    alias_.resize(n);
    std::vector<double> scaled(n);
    std::vector<size_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      scaled[i] = p[i] * double(n);
      (scaled[i] < 1.0 ? small : large).push_back(i);
    }
    while (!small.empty() && !large.empty()) {
      size_t s = small.back(), l = large.back();
      small.pop_back();
      large.pop_back();
      prob[s]   = scaled[s];
      alias_[s] = uint32_t(l);
      scaled[l] = scaled[l] + scaled[s] - 1.0;
      (scaled[l] < 1.0 ? small : large).push_back(l);
    }
    for (size_t i : large)
      prob[i] = 1.0;
    for (size_t i : small)
      prob[i] = 1.0;
    // The coin u32 * 2^-32 < prob is, for integer u32, exactly u32 < ceil(prob * 2^32) (scaling by
    // 2^32 is exact): an integer compare per draw.
    threshold_.resize(n);
    for (size_t i = 0; i < n; ++i)
      threshold_[i] = uint64_t(std::ceil(std::max(prob[i], 0.0) * 0x1.0p32));
  }
  // One 64-bit draw: the high half picks the column (multiply-shift), the low half the coin. The coin
  // selects without a branch (it is unpredictable: a mispredict every few draws otherwise).
  uint32_t draw(Rng& rng) const
  {
    const uint64_t x    = rng();
    const size_t i      = size_t(((x >> 32) * uint64_t(alias_.size())) >> 32);
    const uint32_t keep = uint32_t(0) - uint32_t((x & 0xffffffffULL) < threshold_[i]);
    return (uint32_t(i) & keep) | (alias_[i] & ~keep);
  }

 private:
  std::vector<uint64_t> threshold_;
  std::vector<uint32_t> alias_;
};

// Per-language log-frequencies of real expert counts (lang,layer,e0..eN), for the language kind.
std::map<std::string, std::vector<double>> read_language_log_freq(const std::string& path, int layers, int experts)
{
  std::ifstream in = open_input_file(path);
  std::string line;
  std::getline(in, line);
  std::map<std::string, std::vector<double>> counts;
  long lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty())
      continue;
    std::stringstream ss(line);
    std::string lang, cell;
    std::getline(ss, lang, ',');
    std::getline(ss, cell, ',');
    int layer = std::atoi(cell.c_str());
    if (layer < 0 || layer >= layers)
      throw InputError(path, "line " + std::to_string(lineno),
                       "layer " + cell + " outside the model's " + std::to_string(layers) + " layers");
    auto& v = counts[lang];
    v.resize(size_t(layers) * experts, 0);
    int e = 0;
    while (std::getline(ss, cell, ',')) {
      if (e >= experts)
        throw InputError(path, "line " + std::to_string(lineno), "more expert columns than the model's experts");
      v[size_t(layer) * experts + e++] = std::atof(cell.c_str());
    }
    if (e != experts)
      throw InputError(path, "line " + std::to_string(lineno),
                       "expected " + std::to_string(experts) + " expert columns");
  }
  for (auto& [lang, v] : counts)
    for (int l = 0; l < layers; ++l) {
      double total = 0;
      for (int e = 0; e < experts; ++e)
        total += v[size_t(l) * experts + e];
      for (int e = 0; e < experts; ++e) {
        double& c = v[size_t(l) * experts + e];
        c         = std::log((c + 0.5) / (total + 0.5 * experts));
      }
    }
  return counts;
}

}  // namespace

double layer_weight(const GatingProfile& p, int layer, int layers)
{
  const double x = layers > 1 ? double(layer) / double(layers - 1) : 0.5;
  const double z = (x - p.layer_peak) / p.layer_width;
  return p.layer_floor + (1.0 - p.layer_floor) * std::exp(-z * z);
}

GeneratedGating::GeneratedGating(const ModelSpec& model, const GatingProfile& profile, const std::string& kind,
                                 const std::vector<std::string>& labels, uint64_t seed, const std::string& profile_file,
                                 double novel_after_s, const std::string& cache_dir)
{
  novel_after_s_           = novel_after_s;
  shape_.layers            = model.layers;
  shape_.experts           = model.experts;
  shape_.top_k             = model.top_k;
  shape_.words_per_layer   = (model.experts + 63) / 64;
  labels_                  = int(labels.size());
  subtopics_               = profile.subtopics_per_label;
  records_                 = profile.palette_records;
  seed_                    = seed;
  norm_topk_prob_          = model.norm_topk_prob;
  const LabelLocality& loc = profile.locality(kind, profile_file);
  mix_max_                 = subtopics_ > 1 ? loc.request_mix_max : 0.0;
  if (subtopics_ > 1 && loc.subtopic_zipf > 0) {
    std::vector<double> w(static_cast<size_t>(subtopics_), 0.0);
    for (int k = 0; k < subtopics_; ++k)
      w[size_t(k)] = std::pow(k + 1.0, -loc.subtopic_zipf);
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    double sum         = 0;
    for (double x : w) {
      sum += x;
      subtopic_cdf_.push_back(uint64_t(std::ldexp(sum / total, 32)));
    }
    subtopic_cdf_.back() = uint64_t(1) << 32;  // every draw below it, whatever the rounding
  }
  std::string key, file;
  if (!cache_dir.empty()) {
    key  = build_key(profile, kind, labels, seed, profile_file);
    file = (std::filesystem::path(cache_dir) / ("generated-" + fnv1a64_hex(key) + ".bin")).string();
    if (load_built(file, key))
      return;
  }
  build_logits(profile, kind, labels, seed, profile_file);
  sample_palettes(seed);
  if (!cache_dir.empty())
    save_built(file, key);
}

std::string GeneratedGating::build_key(const GatingProfile& p, const std::string& kind,
                                       const std::vector<std::string>& labels, uint64_t seed,
                                       const std::string& profile_file) const
{
  // The executable's build ID keeps a file made by another build (a cache dir reused across
  // rebuilds) from being read; bump the version for builds linked without one when build_logits or
  // sample_palettes change what they make.
  std::string k = "eldr-sim generated routing, build 2\n";
  auto add      = [&](const std::string& name, const std::string& v) {
    k += name + " " + std::to_string(v.size()) + " " + v + "\n";  // length-prefixed: no ambiguity
  };
  auto num = [](double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%a", v);  // exact
    return std::string(b);
  };
  const LabelLocality& loc = p.locality(kind, profile_file);
  add("binary", executable_build_id());
  add("layers", std::to_string(shape_.layers));
  add("experts", std::to_string(shape_.experts));
  add("top_k", std::to_string(shape_.top_k));
  add("subtopics", std::to_string(subtopics_));
  add("records", std::to_string(records_));
  add("kind", kind);
  add("labels", std::to_string(labels.size()));
  for (const auto& l : labels)
    add("label", l);
  add("seed", std::to_string(seed));
  add("novel", novel_after_s_ != std::numeric_limits<double>::infinity() ? "1" : "0");
  add("popularity_sigma", num(loc.popularity_sigma));
  add("label_strength", num(loc.label_strength));
  add("subtopic_strength", num(loc.subtopic_strength));
  add("phase_drift", num(loc.phase_drift));
  add("shared_subtopics", loc.shared_subtopics ? "1" : "0");
  add("layer_floor", num(p.layer_floor));
  add("layer_peak", num(p.layer_peak));
  add("layer_width", num(p.layer_width));
  if (kind == "language" && !p.language_counts_file.empty()) {
    add("language_counts", read_input_file(p.language_counts_file));
  }
  return k;
}

namespace {

// Version 2 ends in the FNV-1a 64 of everything before it: a cache file damaged in place (same
// size, other bytes) is rebuilt, never used.
constexpr char kBuiltMagic[8] = {'E', 'L', 'D', 'R', 'P', 'A', 'L', '2'};

template <class T> void append_array(std::string& out, const T* data, size_t n)
{
  const uint64_t count = n;
  out.append(reinterpret_cast<const char*>(&count), sizeof count);
  out.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

// Reads from a buffer, front to back; every read fails once one has.
struct BufferReader {
  std::string_view buf;
  size_t pos = 0;
  bool ok    = true;
  bool read(void* out, size_t n)
  {
    ok = ok && n <= buf.size() - pos;
    if (ok) {
      std::memcpy(out, buf.data() + pos, n);
      pos += n;
    }
    return ok;
  }
  template <class T> bool array(T* data, size_t n)
  {
    uint64_t count = 0;
    return read(&count, sizeof count) && (ok = count == n) && read(data, n * sizeof(T));
  }
};

void cache_note(const std::string& file, const std::string& why)
{
  std::fprintf(stderr, "eldrsim: note: %s: %s; rebuilding the routing cache file\n", file.c_str(), why.c_str());
}

// A cache file's contents, read whole and checked (version and checksum); null when it is not
// there or does not check out (noted unless `quiet`).
std::shared_ptr<const std::string> read_checked(const std::string& file, bool quiet)
{
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return nullptr;
  auto buf = std::make_shared<std::string>();
  try {
    *buf = read_input_file(file);
  } catch (const InputError& e) {
    if (!quiet)
      cache_note(file, e.what());
    return nullptr;
  }
  uint64_t stored_sum = 0;
  if (buf->size() < sizeof kBuiltMagic + 2 * sizeof(uint64_t) ||
      !std::equal(kBuiltMagic, kBuiltMagic + 8, buf->data())) {
    if (!quiet)
      cache_note(file, "not a routing cache file of this version");
    return nullptr;
  }
  std::memcpy(&stored_sum, buf->data() + buf->size() - sizeof stored_sum, sizeof stored_sum);
  if (fnv1a64(buf->data(), buf->size() - sizeof stored_sum) != stored_sum) {
    if (!quiet)
      cache_note(file, "its contents fail their checksum (the file was damaged)");
    return nullptr;
  }
  return buf;
}

// preload_routing_cache's files by path, and their bytes in all.
std::map<std::string, std::shared_ptr<const std::string>> g_preloaded;
size_t g_preloaded_bytes = 0;

}  // namespace

void preload_routing_cache(const std::string& cache_dir)
{
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cache_dir, ec)) {
    const std::string name = e.path().filename().string(), file = e.path().string();
    if (!name.starts_with("generated-") || !name.ends_with(".bin") || g_preloaded.contains(file))
      continue;
    if (g_preloaded_bytes + size_t(e.file_size(ec)) > kPreloadBytes)
      continue;  // left on disk, read by each run that needs it
    if (auto buf = read_checked(file, true)) {
      g_preloaded_bytes += buf->size();
      g_preloaded.emplace(file, std::move(buf));
    }
  }
}

bool GeneratedGating::load_built(const std::string& file, const std::string& key)
{
  const auto it                                 = g_preloaded.find(file);
  const std::shared_ptr<const std::string> held = it != g_preloaded.end() ? it->second : read_checked(file, false);
  if (!held)
    return false;
  const std::string_view buf(held->data(), held->size() - sizeof(uint64_t));  // less the checksum
  BufferReader in{buf, sizeof kBuiltMagic};
  uint64_t key_size = 0;
  if (!in.read(&key_size, sizeof key_size) || key_size != key.size() || buf.compare(in.pos, key.size(), key) != 0)
    return false;  // another build's file under a colliding name: rebuilt, quietly
  in.pos += key.size();
  // The sizes build_logits and sample_palettes make.
  const bool novel   = novel_after_s_ != std::numeric_limits<double>::infinity();
  const size_t cells = size_t(shape_.layers) * size_t(shape_.experts);
  const size_t T     = size_t(labels_) * size_t(subtopics_) * 2 * (novel ? 2 : 1);
  const size_t P     = T + 1;  // the chat template's palette last
  std::vector<float> logits(P * cells), frequency(P * cells);
  HugePageBuffer pool(P * size_t(records_) * size_t(shape_.words()));
  if (!in.array(logits.data(), logits.size()) || !in.array(frequency.data(), frequency.size()) ||
      !in.array(pool.data(), pool.size()) || in.pos != buf.size()) {
    cache_note(file, "its arrays are not of the sizes this build makes");
    return false;
  }
  novel_offset_     = novel ? labels_ * subtopics_ * 2 : 0;
  template_palette_ = int(T);
  logits_           = std::move(logits);
  frequency_        = std::move(frequency);
  pool_             = std::move(pool);
  return true;
}

void GeneratedGating::save_built(const std::string& file, const std::string& key) const
{
  std::string out(kBuiltMagic, sizeof kBuiltMagic);
  const uint64_t key_size = key.size();
  out.append(reinterpret_cast<const char*>(&key_size), sizeof key_size);
  out += key;
  append_array(out, logits_.data(), logits_.size());
  append_array(out, frequency_.data(), frequency_.size());
  append_array(out, pool_.data(), pool_.size());
  const uint64_t sum = fnv1a64(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  // The cache only saves later runs the build: one that cannot be written (a full disk, a directory
  // in the file's place) is a note, and this run goes on with what it built.
  try {
    write_file_atomically(file, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eldrsim: note: %s; going on without the routing cache file\n", e.what());
  }
}

void GeneratedGating::build_logits(const GatingProfile& p, const std::string& kind,
                                   const std::vector<std::string>& labels, uint64_t seed,
                                   const std::string& profile_file)
{
  const int L = shape_.layers, E = shape_.experts, S = subtopics_, C = labels_;
  const size_t cells       = size_t(L) * E;
  const LabelLocality& loc = p.locality(kind, profile_file);
  Rng rng(seed, "routing.generated.preferences");
  auto draw = [&](std::vector<double>& v) {
    v.resize(cells);
    for (double& x : v)
      x = normal(rng);
  };

  // Shared popularity and per-label preferences: real per-language counts where given, else random.
  std::vector<double> shared;
  std::vector<std::vector<double>> label(static_cast<size_t>(C));
  double random_label_scale = 1;  // the spread of preferences drawn for a label without data
  std::map<std::string, std::vector<double>> real;
  if (kind == "language" && !p.language_counts_file.empty())
    real = read_language_log_freq(p.language_counts_file, L, E);
  draw(shared);
  for (auto& v : label)
    draw(v);
  if (!real.empty()) {
    // Shared = mean log-frequency over the measured languages; a label = its language's deviation from
    // it. Labels without data ("rest") average the languages not named as labels; a label with neither
    // ("ru") keeps random preferences of the same spread as the measured deviations.
    std::vector<double> mean(cells, 0);
    for (const auto& [lang, v] : real)
      for (size_t i = 0; i < cells; ++i)
        mean[i] += v[i] / double(real.size());
    double spread = 0;
    for (const auto& [lang, v] : real)
      for (size_t i = 0; i < cells; ++i)
        spread += (v[i] - mean[i]) * (v[i] - mean[i]);
    spread             = std::sqrt(spread / double(cells * real.size()));
    shared             = mean;
    random_label_scale = spread;
    for (int c = 0; c < C; ++c) {
      auto it                = real.find(labels[size_t(c)]);
      std::vector<double>& v = label[size_t(c)];
      if (it != real.end()) {
        for (size_t i = 0; i < cells; ++i)
          v[i] = it->second[i] - mean[i];
      } else if (labels[size_t(c)] == "rest") {
        std::vector<double> acc(cells, 0);
        int n = 0;
        for (const auto& [lang, lv] : real)
          if (std::find(labels.begin(), labels.end(), lang) == labels.end()) {
            for (size_t i = 0; i < cells; ++i)
              acc[i] += lv[i] - mean[i];
            ++n;
          }
        for (size_t i = 0; i < cells; ++i)
          v[i] = n ? acc[i] / n : v[i] * spread;
      } else {
        for (double& x : v)
          x *= spread;
      }
    }
  }

  // Sub-topic preferences and prefill->decode drift are always drawn. Novel sub-topics (drift) are a
  // second set per label, appended after the usual palettes and drawn from their own stream, so the
  // usual palettes are the same with or without them. Shared sub-topics (topics every label has) are
  // drawn with the first label and reused by the others.
  const bool novel  = novel_after_s_ != std::numeric_limits<double>::infinity();
  novel_offset_     = novel ? C * S * 2 : 0;
  template_palette_ = C * S * 2 * (novel ? 2 : 1);
  logits_.assign((size_t(template_palette_) + 1) * cells, 0.f);
  std::vector<double> sub, drift;
  std::vector<std::vector<double>> topic(static_cast<size_t>(S));  // shared sub-topics' preferences
  Rng novel_rng(seed, "routing.generated.novel_subtopics");
  for (int set = 0; set < (novel ? 2 : 1); ++set)
    for (int c = 0; c < C; ++c)
      for (int s = 0; s < S; ++s) {
        const bool own_sub = !loc.shared_subtopics || c == 0;
        if (set == 1) {
          if (own_sub)
            for (double& x : sub)
              x = normal(novel_rng);
          for (double& x : drift)
            x = normal(novel_rng);
        } else {
          if (own_sub)
            draw(sub);
          draw(drift);
        }
        if (loc.shared_subtopics) {
          if (c == 0)
            topic[size_t(s)] = sub;
          else
            sub = topic[size_t(s)];
        }
        for (int phase = 0; phase < 2; ++phase) {
          float* out = &logits_[(size_t(set * novel_offset_) + (size_t(c) * S + s) * 2 + phase) * cells];
          for (int l = 0; l < L; ++l) {
            const double w = layer_weight(p, l, L);
            for (int e = 0; e < E; ++e) {
              size_t i = size_t(l) * E + e;
              double z = loc.popularity_sigma * shared[i] + w * loc.label_strength * label[size_t(c)][i] +
                         w * loc.subtopic_strength * sub[i] + (phase == 1 ? loc.phase_drift * drift[i] : 0.0);
              out[i] = float(z);
            }
          }
        }
      }

  // The chat template's tokens (Workload::template_request) are content of their own, the same in
  // every prompt: the shared popularity plus preferences of their own, drawn like a label's
  // without data, from their own stream (the other palettes are the same with or without it).
  Rng template_rng(seed, "routing.generated.chat_template");
  std::vector<double> own(cells);
  for (double& x : own)
    x = normal(template_rng) * random_label_scale;
  float* out = &logits_[size_t(template_palette_) * cells];
  for (int l = 0; l < L; ++l) {
    const double w = layer_weight(p, l, L);
    for (int e = 0; e < E; ++e) {
      const size_t i = size_t(l) * E + e;
      out[i]         = float(loc.popularity_sigma * shared[i] + w * loc.label_strength * own[i]);
    }
  }
}

namespace {

// Plackett-Luce top-k records of one layer: draws from the softmax, rejecting experts already picked,
// until k distinct; each record's layer mask goes to out (records `words` apart), each pick into `count`
// (the record frequencies). Template W = the words a layer (0: any, given at run time): for W <= 2
// the layer's mask lives in registers (a store-to-load round trip per draw otherwise), and the
// rejection is branch-free (a repeat sets no new bit and does not count; an unpredictable branch per
// draw otherwise). Every variant draws the same numbers in the same order.
template <int W> void sample_layer_records(const AliasTable& table, Rng& rng, int records, int top_k,
                                           int words_per_layer, size_t words, uint64_t* out, uint32_t* count)
{
  for (int rec = 0; rec < records; ++rec, out += words) {
    if constexpr (W == 1) {
      uint64_t m = 0;
      for (int picked = 0; picked < top_k;) {
        const uint32_t e   = table.draw(rng);
        const uint64_t bit = uint64_t(1) << e;
        const uint32_t now = (m & bit) == 0;
        m |= bit;
        count[e] += now;
        picked += int(now);
      }
      out[0] = m;
    } else if constexpr (W == 2) {
      uint64_t m0 = 0, m1 = 0;
      for (int picked = 0; picked < top_k;) {
        const uint32_t e    = table.draw(rng);
        const uint64_t bit  = uint64_t(1) << (e % 64);
        const uint64_t high = uint64_t(0) - uint64_t(e / 64);  // all ones for the second word
        const uint64_t b0 = bit & ~high, b1 = bit & high;
        const uint32_t now = ((m0 & b0) | (m1 & b1)) == 0;
        m0 |= b0;
        m1 |= b1;
        count[e] += now;
        picked += int(now);
      }
      out[0] = m0;
      out[1] = m1;
    } else {
      uint64_t local[kMaxWordsPerLayer] = {};
      for (int picked = 0; picked < top_k;) {
        const uint32_t e   = table.draw(rng);
        const uint64_t bit = uint64_t(1) << (e % 64);
        const uint64_t was = local[e / 64];
        local[e / 64]      = was | bit;
        const uint32_t now = (was & bit) == 0;
        count[e] += now;
        picked += int(now);
      }
      for (int w = 0; w < words_per_layer; ++w)
        out[w] = local[w];
    }
  }
}

}  // namespace

void GeneratedGating::sample_palettes(uint64_t seed)
{
  const int L = shape_.layers, E = shape_.experts, W = shape_.words_per_layer;
  if (W > kMaxWordsPerLayer)
    throw std::invalid_argument("generated routing supports at most " + std::to_string(64 * kMaxWordsPerLayer) +
                                " experts");
  const size_t words = size_t(shape_.words());
  const int P        = palettes();
  pool_              = HugePageBuffer(size_t(P) * records_ * words);
  frequency_.assign(size_t(P) * L * E, 0.f);
  Rng rng(seed, "routing.generated.palettes");
  std::vector<double> prob(static_cast<size_t>(E));
  std::vector<uint32_t> count(static_cast<size_t>(E));
  for (int pal = 0; pal < P; ++pal)
    for (int l = 0; l < L; ++l) {
      const float* z = &logits_[(size_t(pal) * L + l) * E];
      double zmax    = *std::max_element(z, z + E);
      double total   = 0;
      for (int e = 0; e < E; ++e)
        total += prob[size_t(e)] = std::exp(double(z[e]) - zmax);
      for (double& x : prob)
        x /= total;
      AliasTable table(prob);
      std::fill(count.begin(), count.end(), 0);
      uint64_t* out = &pool_[size_t(pal) * records_ * words + size_t(l) * W];
      if (W == 1)
        sample_layer_records<1>(table, rng, records_, shape_.top_k, W, words, out, count.data());
      else if (W == 2)
        sample_layer_records<2>(table, rng, records_, shape_.top_k, W, words, out, count.data());
      else
        sample_layer_records<0>(table, rng, records_, shape_.top_k, W, words, out, count.data());
      // count / records is exact in float: records is a power of two below 2^24.
      float* f = &frequency_[(size_t(pal) * L + l) * E];
      for (int e = 0; e < E; ++e)
        f[e] = float(count[size_t(e)]) / float(records_);
    }
}

namespace {

// Uniform integer in [0, n) from 32 random bits (multiply-shift: no division on the hot path).
inline uint32_t scaled(uint64_t bits32, uint32_t n)
{
  return uint32_t(((bits32 & 0xffffffffULL) * n) >> 32);
}

}  // namespace

GeneratedGating::Traits GeneratedGating::traits(const Request& r) const
{
  Traits t;
  const uint64_t h = splitmix64(r.routing_seed ^ 0x5bd1e9955bd1e995ULL);
  const auto S     = uint32_t(subtopics_);
  if (subtopic_cdf_.empty())
    t.primary = int(scaled(h, S));
  else  // the first sub-topic whose cumulative share exceeds the draw
    t.primary =
        int(std::upper_bound(subtopic_cdf_.begin(), subtopic_cdf_.end(), h & 0xffffffffULL) - subtopic_cdf_.begin());
  t.secondary      = S > 1 ? int((uint32_t(t.primary) + 1 + scaled(h >> 32, S - 1)) % S) : t.primary;
  const uint64_t g = splitmix64(h);
  t.prefill_mix    = mix_max_ * double(g & 0xffffff) / double(1 << 24);
  t.decode_mix     = mix_max_ * double((g >> 24) & 0xffffff) / double(1 << 24);
  return t;
}

int GeneratedGating::first_palette(const Request& r) const
{
  // Only measured requests can be novel: the calibration split and the warm-up never see these sub-topics.
  return r.measured && r.arrival_s >= novel_after_s_ ? novel_offset_ : 0;
}

int GeneratedGating::palette_of(const Request& r, int token) const
{
  return int(record_of(r, token) / size_t(records_));
}

const GeneratedGating::RequestKey& GeneratedGating::key(const Request& r) const
{
  constexpr uint32_t kMaxCached = 1u << 22;  // ids beyond (never a real workload's) share one slot
  if (r.id < kMaxCached && r.id >= keys_.size() && r.label != kTemplateLabel)
    keys_.resize(size_t(r.id) + 1);
  RequestKey& k   = r.label == kTemplateLabel ? template_key_ : r.id < kMaxCached ? keys_[r.id] : uncached_;
  const int first = first_palette(r);
  if (k.prompt_tokens == r.prompt_tokens && k.routing_seed == r.routing_seed && k.label == r.label && k.first == first)
    return k;
  if (r.label == kTemplateLabel) {
    k = RequestKey{r.routing_seed, r.prompt_tokens, r.label, first, {}, {}};
    for (auto& phase : k.palette)
      phase[0] = phase[1] = uint32_t(template_palette_);
    return k;
  }
  const Traits t  = traits(r);
  k.routing_seed  = r.routing_seed;
  k.prompt_tokens = r.prompt_tokens;
  k.label         = r.label;
  k.first         = first;
  for (int phase = 0; phase < 2; ++phase) {
    k.palette[phase][0] = uint32_t(first + (int(r.label) * subtopics_ + t.primary) * 2 + phase);
    k.palette[phase][1] = uint32_t(first + (int(r.label) * subtopics_ + t.secondary) * 2 + phase);
    // A token draws from the secondary iff its hash's low 24 bits x, as a fraction x / 2^24, fall
    // below the mix: for integer x that is exactly x < ceil(mix * 2^24) (scaling by 2^24 is exact).
    k.threshold[phase] = uint32_t(std::ceil((phase ? t.decode_mix : t.prefill_mix) * double(1 << 24)));
  }
  return k;
}

// The low 24 bits of the token's hash choose the sub-topic, the high 32 the record.
size_t GeneratedGating::record_of(const RequestKey& k, int token) const
{
  const uint64_t h = splitmix64(k.routing_seed + uint64_t(token) * 0x9e3779b97f4a7c15ULL);
  const int phase  = token >= k.prompt_tokens ? 1 : 0;
  const int second = (h & 0xffffff) < k.threshold[phase] ? 1 : 0;
  return size_t(k.palette[phase][second]) * size_t(records_) + size_t((h >> 32) & uint64_t(records_ - 1));
}

size_t GeneratedGating::record_of(const Request& r, int token) const
{
  return record_of(key(r), token);
}

std::span<const uint64_t> GeneratedGating::record_experts(size_t record) const
{
  return {&pool_[record * size_t(shape_.words())], size_t(shape_.words())};
}

std::span<const uint64_t> GeneratedGating::token_experts(const Request& r, int token) const
{
  return record_experts(record_of(r, token));
}

void GeneratedGating::accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const
{
  const size_t words = size_t(shape_.words());
  // Prefill ORs a batch's prompts into one union, a chunk per call, and a prompt repeats records (a
  // 256-token prompt hits ~160 distinct records of its palettes' 512): a record already in the union
  // cannot change it. The records ORed so far are remembered across calls for as long as the union
  // passed in still contains the one they went into, which keeps skipping them exact whoever calls.
  const bool prompt = !tokens.empty() && tokens[0].position < tokens[0].request->prompt_tokens;
  if (prompt) {
    seen_.resize((pool_.size() / words + 63) / 64);
    seen_union_.resize(words);
    if (!contains(union_masks, seen_union_))
      std::fill(seen_.begin(), seen_.end(), 0);
  }
  offsets_.clear();
  const Request* last = nullptr;
  const RequestKey* k = nullptr;
  for (const TokenRef& t : tokens) {
    // Consecutive tokens are usually of one request (a prompt chunk): look its key up once.
    if (t.request != last) {
      last = t.request;
      k    = &key(*t.request);
    }
    const size_t rec = record_of(*k, t.position);
    if (prompt) {
      uint64_t& w        = seen_[rec / 64];
      const uint64_t bit = uint64_t(1) << (rec % 64);
      if (w & bit)
        continue;
      w |= bit;
    }
    offsets_.push_back(rec * words);
  }
  or_records(pool_.data(), offsets_, words, union_masks);
  if (prompt)
    std::copy(union_masks.begin(), union_masks.end(), seen_union_.begin());
}

void GeneratedGating::distinct_records(const Request& r, int begin, int end, const uint64_t* base, size_t stride,
                                       std::vector<MaskCount>& out) const
{
  hits_.resize(pool_.size() / size_t(shape_.words()));
  hit_order_.clear();
  const RequestKey& k = key(r);
  for (int t = begin; t < end; ++t) {
    const size_t rec = record_of(k, t);
    if (hits_[rec]++ == 0)
      hit_order_.push_back(uint32_t(rec));
  }
  // In order of first hit: deterministic, and the counts are integers, so any order sums alike.
  for (uint32_t rec : hit_order_) {
    out.push_back({base + size_t(rec) * stride, hits_[rec]});
    hits_[rec] = 0;
  }
}

bool GeneratedGating::distinct_masks(const Request& r, int begin, int end, std::vector<MaskCount>& out) const
{
  distinct_records(r, begin, end, pool_.data(), size_t(shape_.words()), out);
  return true;
}

bool GeneratedGating::distinct_layer_masks(const Request& r, int begin, int end, std::span<const int> layers,
                                           std::vector<MaskCount>& out) const
{
  const size_t W = size_t(shape_.words_per_layer), words = size_t(shape_.words());
  if (layers.empty())
    return false;
  if (!std::equal(layers.begin(), layers.end(), compact_layers_.begin(), compact_layers_.end())) {
    for (int l : layers)
      if (l < 0 || l >= shape_.layers)
        return false;
    // (One copy, for the last layer set asked: a run's router asks for one mask.)
    const size_t records = pool_.size() / words, stride = layers.size() * W;
    compact_ = HugePageBuffer(records * stride);
    for (size_t rec = 0; rec < records; ++rec)
      for (size_t i = 0; i < layers.size(); ++i)
        std::copy_n(&pool_[rec * words + size_t(layers[i]) * W], W, &compact_[rec * stride + i * W]);
    compact_layers_.assign(layers.begin(), layers.end());
  }
  distinct_records(r, begin, end, compact_.data(), layers.size() * W, out);
  return true;
}

TokenLaw GeneratedGating::token_law(const Request& r, int phase) const
{
  const RequestKey& k = key(r);
  const size_t cells  = size_t(shape_.layers) * shape_.experts;
  // record_of() takes the secondary iff 24 hash bits fall below the threshold: share threshold / 2^24.
  return {&frequency_[k.palette[phase][0] * cells], &frequency_[k.palette[phase][1] * cells],
          float(double(k.threshold[phase]) / double(1 << 24))};  // exact: at most 2^24
}

std::span<const float> GeneratedGating::palette_logits(int palette) const
{
  const size_t cells = size_t(shape_.layers) * shape_.experts;
  return {&logits_[size_t(palette) * cells], cells};
}

}  // namespace eldr
