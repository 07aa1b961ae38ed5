#include "sim/gating/gate_source.hpp"
#include "sim/common/atomic_file.hpp"
#include "sim/common/build_id.hpp"
#include "sim/common/input_error.hpp"
#include "sim/common/input_file.hpp"
#include "sim/common/rng.hpp"
#include "sim/gating/generated_gating.hpp"
#include "sim/gating/pick_gates.hpp"
#include "sim/gating/replay_gating.hpp"
#include "sim/gating/shared_prefix_gating.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

namespace eldr {

namespace {

// Generated routing: a token's gate values are its own (pick_gates.hpp): the softmax of its own
// logits, the palette's plus the Gumbel noise its top-k law implies, at its picks (renormalized over
// them for a norm_topk_prob model), and those logits.
// They are drawn a palette at a time, on the first read of one of its tokens (only the gate variants
// read them, and mostly of prompt palettes), each palette from its own stream, so the values do not
// depend on the order of use, nor on which process drew them: a palette's table is kept by the
// inputs it is drawn from (gate_key), in this process and in the gate cache directory.
struct GateTable {
  std::vector<float> prob, score;  // [record][layer][pick], picks in ascending expert id
};

std::string g_cache_dir;
std::map<std::string, std::shared_ptr<const GateTable>> g_tables;  // by gate_key, this process's
size_t g_drawn = 0;

// Two independent 64-bit digests of a buffer, 8 bytes a step (a palette's records are ~0.4 MB): the
// cache key carries these instead of the bytes.
std::pair<uint64_t, uint64_t> digest(const void* data, size_t bytes)
{
  const auto* b = static_cast<const unsigned char*>(data);
  uint64_t h1 = 0x9e3779b97f4a7c15ull, h2 = 0xc2b2ae3d27d4eb4full;
  size_t i = 0;
  for (uint64_t w = 0; i + 8 <= bytes; i += 8) {
    std::memcpy(&w, b + i, 8);
    h1 = splitmix64(h1 ^ w);
    h2 = splitmix64(h2 + std::rotl(w, 29));
  }
  for (; i < bytes; ++i) {
    h1 = splitmix64(h1 ^ b[i]);
    h2 = splitmix64(h2 + b[i]);
  }
  return {splitmix64(h1 ^ bytes), splitmix64(h2 + bytes)};
}

std::string hex(uint64_t v)
{
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Everything a palette's table is drawn from, as text: the executable's build ID (the sampler's code;
// a directory reused across rebuilds is then safe), the shape, the seed, the palette, the
// renormalization, and its logits and records by content.
std::string gate_key(const GeneratedGating& g, size_t palette)
{
  const GatingShape& s = g.shape();
  const size_t R = size_t(g.records_per_palette()), W = size_t(s.words());
  const std::span<const float> z = g.palette_logits(int(palette));
  const auto [z1, z2]            = digest(z.data(), z.size_bytes());
  const auto [p1, p2]            = digest(g.record_experts(palette * R).data(), R * W * sizeof(uint64_t));
  return "gates 1 binary " + executable_build_id() + " layers " + std::to_string(s.layers) + " experts " +
         std::to_string(s.experts) + " top_k " + std::to_string(s.top_k) + " words_per_layer " +
         std::to_string(s.words_per_layer) + " records " + std::to_string(R) + " seed " + std::to_string(g.seed()) +
         " palette " + std::to_string(palette) + " norm_topk_prob " + (g.norm_topk_prob() ? "1" : "0") + " logits " +
         hex(z1) + hex(z2) + " records " + hex(p1) + hex(p2);
}

// A table file: the magic, the key, the two arrays (each its count first), the digest of all that.
constexpr char kGateMagic[8] = {'E', 'L', 'D', 'R', 'G', 'A', 'T', '1'};

std::string gate_file(const std::string& key)
{
  return (std::filesystem::path(g_cache_dir) / ("gates-" + hex(digest(key.data(), key.size()).first) + ".bin"))
      .string();
}

void append_floats(std::string& out, const std::vector<float>& v)
{
  const uint64_t n = v.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// The file's table when it holds exactly this key and `n` values per array, else null (then the
// palette is drawn again and the file replaced).
std::shared_ptr<const GateTable> load_table(const std::string& file, const std::string& key, size_t n)
{
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return nullptr;
  std::string buf;
  try {
    buf = read_input_file(file);
  } catch (const InputError&) {
    return nullptr;
  }
  const size_t arrays = 2 * (sizeof(uint64_t) + n * sizeof(float));
  const size_t size   = sizeof kGateMagic + sizeof(uint64_t) + key.size() + arrays + 2 * sizeof(uint64_t);
  if (buf.size() != size || !std::equal(kGateMagic, kGateMagic + 8, buf.data()))
    return nullptr;
  uint64_t sum[2], key_size = 0, count = 0;
  std::memcpy(sum, buf.data() + size - sizeof sum, sizeof sum);
  const auto [s1, s2] = digest(buf.data(), size - sizeof sum);
  std::memcpy(&key_size, buf.data() + sizeof kGateMagic, sizeof key_size);
  size_t at = sizeof kGateMagic + sizeof key_size;
  if (sum[0] != s1 || sum[1] != s2 || key_size != key.size() || buf.compare(at, key.size(), key) != 0)
    return nullptr;
  at += key.size();
  auto t = std::make_shared<GateTable>();
  for (std::vector<float>* v : {&t->prob, &t->score}) {
    std::memcpy(&count, buf.data() + at, sizeof count);
    if (count != n)
      return nullptr;
    v->resize(n);
    std::memcpy(v->data(), buf.data() + at + sizeof count, n * sizeof(float));
    at += sizeof count + n * sizeof(float);
  }
  return t;
}

// Keeping a table only saves other processes the draw: one that cannot be written is a note.
void save_table(const std::string& file, const std::string& key, const GateTable& t)
{
  std::string out(kGateMagic, sizeof kGateMagic);
  const uint64_t key_size = key.size();
  out.append(reinterpret_cast<const char*>(&key_size), sizeof key_size);
  out += key;
  append_floats(out, t.prob);
  append_floats(out, t.score);
  const auto [s1, s2]  = digest(out.data(), out.size());
  const uint64_t sum[] = {s1, s2};
  out.append(reinterpret_cast<const char*>(sum), sizeof sum);
  try {
    write_file_atomically(file, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eldrsim: note: %s; going on without the gate cache file\n", e.what());
  }
}

// Draws palette `palette`'s table (see GeneratedGates).
GateTable draw_table(const GeneratedGating& routing, size_t palette)
{
  GateTable t;
  const GatingShape& s = routing.shape();
  const size_t E = size_t(s.experts), K = size_t(s.top_k), R = size_t(routing.records_per_palette());
  t.prob.resize(R * size_t(s.layers) * K);
  t.score.resize(t.prob.size());
  Rng rng(splitmix64(stream_seed(routing.seed(), "routing.generated.gates") + palette));
  std::span<const float> z = routing.palette_logits(int(palette));
  std::vector<GateLayer> layers;
  for (int l = 0; l < s.layers; ++l)
    layers.push_back(gate_layer(z.subspan(size_t(l) * E, E)));
  const uint64_t* pool = routing.record_experts(palette * R).data();
  std::vector<int> picked;
  for (size_t rec = 0; rec < R; ++rec)
    for (int l = 0; l < s.layers; ++l) {
      picked.clear();
      const uint64_t* masks = pool + rec * size_t(s.words()) + size_t(l * s.words_per_layer);
      for (int w = 0; w < s.words_per_layer; ++w)
        for (uint64_t bits = masks[w]; bits; bits &= bits - 1)
          picked.push_back(w * 64 + std::countr_zero(bits));
      const size_t at = (rec * size_t(s.layers) + size_t(l)) * K;
      sample_pick_gates(layers[size_t(l)], picked, routing.norm_topk_prob(), rng, std::span(&t.prob[at], K),
                        std::span(&t.score[at], K));
    }
  return t;
}

// A palette's table: this process's, else the cache directory's, else drawn (and kept in both).
std::shared_ptr<const GateTable> shared_table(const GeneratedGating& routing, size_t palette)
{
  const std::string key = gate_key(routing, palette);
  if (auto it = g_tables.find(key); it != g_tables.end())
    return it->second;
  const GatingShape& s               = routing.shape();
  const size_t n                     = size_t(routing.records_per_palette()) * size_t(s.layers) * size_t(s.top_k);
  const std::string file             = g_cache_dir.empty() ? "" : gate_file(key);
  std::shared_ptr<const GateTable> t = file.empty() ? nullptr : load_table(file, key, n);
  if (!t) {
    t = std::make_shared<const GateTable>(draw_table(routing, palette));
    ++g_drawn;
    if (!file.empty())
      save_table(file, key, *t);
  }
  return g_tables.emplace(key, std::move(t)).first->second;
}

class GeneratedGates : public GateSource {
 public:
  explicit GeneratedGates(const GeneratedGating& g)
      : routing_(g), tables_(size_t(g.palettes())), experts_(size_t(g.palettes()))
  {
  }
  bool has_scores() const override { return true; }
  TokenGates token_gates(const Request& r, int token) const override
  {
    const size_t rec = routing_.record_of(r, token), R = size_t(routing_.records_per_palette());
    const size_t n     = size_t(routing_.shape().layers) * size_t(routing_.shape().top_k);
    const GateTable& t = table(rec / R);
    const size_t at    = (rec % R) * n;
    return {{&t.prob[at], n}, {&t.score[at], n}, {&experts_[rec / R][at], n}};
  }

 private:
  const GateTable& table(size_t palette) const
  {
    std::shared_ptr<const GateTable>& t = tables_[palette];
    if (!t) {
      t                 = shared_table(routing_, palette);
      experts_[palette] = pick_experts(palette);
    }
    return *t;
  }
  // The palette's records' picks as expert ids, [record][layer][pick] (every record has top_k picks a
  // layer: draw_table's sampler takes exactly that many).
  std::vector<uint16_t> pick_experts(size_t palette) const
  {
    const GatingShape& s = routing_.shape();
    const size_t R = size_t(routing_.records_per_palette()), K = size_t(s.top_k);
    std::vector<uint16_t> ids(R * size_t(s.layers) * K);
    const uint64_t* m = routing_.record_experts(palette * R).data();
    for (size_t rl = 0; rl < R * size_t(s.layers); ++rl, m += s.words_per_layer) {
      size_t j = rl * K, stop = j + K;
      for (int w = 0; w < s.words_per_layer; ++w)
        for (uint64_t bits = m[w]; bits && j < stop; bits &= bits - 1)
          ids[j++] = uint16_t(w * 64 + std::countr_zero(bits));
    }
    return ids;
  }

  const GeneratedGating& routing_;
  mutable std::vector<std::shared_ptr<const GateTable>> tables_;  // by palette, filled on first use
  mutable std::vector<std::vector<uint16_t>> experts_;            // by palette, with tables_
};

// Replayed routing with gate values: the recorded values, already in ascending expert order.
class ReplayGates : public GateSource {
 public:
  explicit ReplayGates(const ReplayGating& r) : routing_(r) {}
  bool has_scores() const override { return false; }
  TokenGates token_gates(const Request& r, int token) const override
  {
    return {routing_.token_gates(r, token), {}, {}};
  }

 private:
  const ReplayGating& routing_;
};

// Gates of a source whose shared prompt tokens route as another request's: the same remapping.
class SharedPrefixGates : public GateSource {
 public:
  SharedPrefixGates(const SharedPrefixGating& routing, std::unique_ptr<GateSource> inner)
      : routing_(routing), inner_(std::move(inner))
  {
  }
  bool has_scores() const override { return inner_->has_scores(); }
  TokenGates token_gates(const Request& r, int token) const override
  {
    return inner_->token_gates(routing_.owner(r, token), token);
  }

 private:
  const SharedPrefixGating& routing_;
  std::unique_ptr<GateSource> inner_;
};

}  // namespace

void set_gate_cache_dir(const std::string& dir)
{
  g_cache_dir = dir;
}

size_t gate_palettes_drawn()
{
  return g_drawn;
}

void forget_gate_tables()
{
  g_tables.clear();
}

std::unique_ptr<GateSource> make_gate_source(const GatingSource& routing)
{
  if (const auto* s = dynamic_cast<const SharedPrefixGating*>(&routing)) {
    auto inner = make_gate_source(s->inner());
    return inner ? std::make_unique<SharedPrefixGates>(*s, std::move(inner)) : nullptr;
  }
  if (const auto* g = dynamic_cast<const GeneratedGating*>(&routing))
    return std::make_unique<GeneratedGates>(*g);
  if (const auto* r = dynamic_cast<const ReplayGating*>(&routing); r && r->has_gates())
    return std::make_unique<ReplayGates>(*r);
  return nullptr;
}

}  // namespace eldr
