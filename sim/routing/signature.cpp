#include "sim/routing/signature.hpp"
#include "sim/workload/generated_routing.hpp"
#include "sim/workload/replay_routing.hpp"
#include "sim/workload/shared_prefix_routing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <immintrin.h>
#include <numeric>
#include <stdexcept>

namespace eldr {

std::string_view to_string(SignatureVariant v)
{
  switch (v) {
  case SignatureVariant::counts: return "counts";
  case SignatureVariant::counts_idf: return "counts_idf";
  case SignatureVariant::sqrt_counts: return "sqrt_counts";
  case SignatureVariant::binary: return "binary";
  case SignatureVariant::gate_prob: return "gate_prob";
  case SignatureVariant::gate_score: return "gate_score";
  }
  return "?";
}

std::optional<SignatureVariant> parse_signature_variant(std::string_view name)
{
  for (SignatureVariant v : kAllSignatureVariants)
    if (to_string(v) == name)
      return v;
  return std::nullopt;
}

// --- Gate sources --------------------------------------------------------------------------------

namespace {

// Generated routing: a token's gate probabilities are its palette's softmax per layer, its raw scores
// the palette's logits. Both tables are built once (palettes x layers x experts floats each).
class GeneratedGates : public GateSource {
public:
  explicit GeneratedGates(const GeneratedRouting& g) : routing_(g)
  {
    const RoutingShape& s = g.shape();
    const size_t E        = size_t(s.experts);
    prob_.resize(size_t(g.palettes()) * size_t(s.layers) * E);
    for (int p = 0; p < g.palettes(); ++p) {
      std::span<const float> z = g.palette_logits(p);
      for (int l = 0; l < s.layers; ++l) {
        const float* zl = &z[size_t(l) * E];
        float* out      = &prob_[(size_t(p) * size_t(s.layers) + size_t(l)) * E];
        const double zmax = *std::max_element(zl, zl + E);
        double total      = 0;
        for (size_t e = 0; e < E; ++e)
          total += std::exp(double(zl[e]) - zmax);
        for (size_t e = 0; e < E; ++e)
          out[e] = float(std::exp(double(zl[e]) - zmax) / total);
      }
    }
  }
  bool has_scores() const override { return true; }
  int token_table(const Request& r, int token) const override { return routing_.palette_of(r, token); }
  std::span<const float> table_prob(int table) const override
  {
    const size_t cells = size_t(routing_.shape().layers) * size_t(routing_.shape().experts);
    return {&prob_[size_t(table) * cells], cells};
  }
  std::span<const float> table_score(int table) const override { return routing_.palette_logits(table); }
  void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const override
  {
    const RoutingShape& s = routing_.shape();
    const size_t E = size_t(s.experts), K = size_t(s.top_k);
    const int pal  = routing_.palette_of(r, token);
    const float* p = &prob_[size_t(pal) * size_t(s.layers) * E];
    const float* z = routing_.palette_logits(pal).data();
    std::span<const uint64_t> masks = routing_.token_experts(r, token);
    for (int l = 0; l < s.layers; ++l) {
      size_t j = size_t(l) * K, end = j + K;
      for (int w = 0; w < s.words_per_layer; ++w)
        for (uint64_t bits = masks[size_t(l * s.words_per_layer + w)]; bits && j < end; bits &= bits - 1) {
          const size_t cell = size_t(l) * E + size_t(w * 64 + std::countr_zero(bits));
          prob[j] = p[cell];
          if (!score.empty())
            score[j] = z[cell];
          ++j;
        }
    }
  }

private:
  const GeneratedRouting& routing_;
  std::vector<float> prob_;
};

// Replayed routing with gate values: the recorded values, already in ascending expert order.
class ReplayGates : public GateSource {
public:
  explicit ReplayGates(const ReplayRouting& r) : routing_(r) {}
  bool has_scores() const override { return false; }
  void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const override
  {
    if (!score.empty())
      throw std::invalid_argument("replayed routing records gate values, not raw gate scores");
    std::span<const float> g = routing_.token_gates(r, token);
    std::copy(g.begin(), g.end(), prob.begin());
  }

private:
  const ReplayRouting& routing_;
};

// Gates of a source whose shared prompt tokens route as another request's: the same remapping.
class SharedPrefixGates : public GateSource {
public:
  SharedPrefixGates(const SharedPrefixRouting& routing, std::unique_ptr<GateSource> inner)
      : routing_(routing), inner_(std::move(inner))
  {
  }
  bool has_scores() const override { return inner_->has_scores(); }
  void token_gates(const Request& r, int token, std::span<float> prob, std::span<float> score) const override
  {
    inner_->token_gates(routing_.owner(r, token), token, prob, score);
  }
  int token_table(const Request& r, int token) const override { return inner_->token_table(routing_.owner(r, token), token); }
  std::span<const float> table_prob(int t) const override { return inner_->table_prob(t); }
  std::span<const float> table_score(int t) const override { return inner_->table_score(t); }

private:
  const SharedPrefixRouting& routing_;
  std::unique_ptr<GateSource> inner_;
};

}  // namespace

std::unique_ptr<GateSource> make_gate_source(const ExpertRoutingSource& routing)
{
  if (const auto* s = dynamic_cast<const SharedPrefixRouting*>(&routing)) {
    auto inner = make_gate_source(s->inner());
    return inner ? std::make_unique<SharedPrefixGates>(*s, std::move(inner)) : nullptr;
  }
  if (const auto* g = dynamic_cast<const GeneratedRouting*>(&routing))
    return std::make_unique<GeneratedGates>(*g);
  if (const auto* r = dynamic_cast<const ReplayRouting*>(&routing); r && r->has_gates())
    return std::make_unique<ReplayGates>(*r);
  return nullptr;
}

bool gates_support(const GateSource* gates, SignatureVariant v)
{
  if (v == SignatureVariant::gate_prob)
    return gates != nullptr;
  if (v == SignatureVariant::gate_score)
    return gates != nullptr && gates->has_scores();
  return true;
}

// --- Profiles ------------------------------------------------------------------------------------

ProfileFields fields_for(SignatureVariant v)
{
  ProfileFields f;
  f.gate_prob  = v == SignatureVariant::gate_prob;
  f.gate_score = v == SignatureVariant::gate_score;
  return f;
}

PromptProfile empty_profile(const RoutingShape& shape, ProfileFields fields)
{
  PromptProfile p;
  p.layers     = shape.layers;
  p.experts    = shape.experts;
  const size_t cells = size_t(shape.layers) * size_t(shape.experts);
  p.counts.assign(cells, 0);
  if (fields.gate_prob)
    p.gate_prob.assign(cells, 0.f);
  if (fields.gate_score)
    p.gate_score.assign(cells, 0.f);
  return p;
}

void add_mask_counts(std::span<const uint64_t> masks, const RoutingShape& shape, std::span<uint16_t> counts)
{
  uint16_t* c       = counts.data();
  const int W       = shape.words_per_layer;
  const uint64_t* m = masks.data();
  for (int l = 0; l < shape.layers; ++l, c += shape.experts, m += W)
    for (int w = 0; w < W; ++w)
      for (uint64_t bits = m[w]; bits; bits &= bits - 1)
        ++c[w * 64 + std::countr_zero(bits)];
}

namespace {

// Counting many tokens: every mask bit gets a byte counter (layer, word, bit), incremented by SIMD
// compares whatever the number of set bits, and flushed into the 16-bit counts every 255 tokens, before
// a byte can wrap. The scalar loop over set bits costs ~4 cycles a pick (its exits mispredict and every
// pick is a load-add-store); AVX-512BW turns a mask word into 64 byte lanes in one instruction
// (vpmovm2b: set bit -> 0xff = -1, subtracted), AVX2 in four per 32 bits. On Qwen3-30B-A3B (96 words,
// 384 picks a token) a token costs ~570 ns scalar, ~95 ns with AVX-512BW (bench/bm_signature.cpp).
// Both kernels add the words [first, first + n) of every run listed in `runs` (a layer's words).
struct WordRun {
  uint32_t first, n;
};

__attribute__((target("avx512f,avx512bw"))) void add_mask_bytes_avx512(const uint64_t* masks,
                                                                       std::span<const WordRun> runs, uint8_t* acc)
{
  for (const WordRun& run : runs)
    for (size_t w = run.first; w < run.first + run.n; ++w) {
      const __m512i a = _mm512_loadu_si512(acc + 64 * w);
      const __m512i v = _mm512_movm_epi8(_cvtu64_mask64(masks[w]));
      _mm512_storeu_si512(acc + 64 * w, _mm512_sub_epi8(a, v));
    }
}

__attribute__((target("avx2"))) void add_mask_bytes_avx2(const uint64_t* masks, std::span<const WordRun> runs,
                                                         uint8_t* acc)
{
  // Byte i of a 32-bit half takes byte i / 8 of it (each 128-bit lane holds the broadcast dword), then
  // keeps bit i % 8: equal to the selector iff the bit is set.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
  for (const WordRun& run : runs)
    for (size_t w = run.first; w < run.first + run.n; ++w)
      for (int h = 0; h < 2; ++h) {
        __m256i v = _mm256_set1_epi32(int(uint32_t(masks[w] >> (32 * h))));
        v         = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, spread), select), select);
        auto* at  = reinterpret_cast<__m256i*>(acc + 64 * w + 32 * size_t(h));
        _mm256_storeu_si256(at, _mm256_sub_epi8(_mm256_loadu_si256(at), v));
      }
}

// The AVX-512 kernel over the masks of up to 255 tokens (the byte counters' range), for up to
// kRegWords words a token (a router's mask: 2 words a layer for 128 experts): the byte counters stay
// in registers across tokens instead of a load and a store per word and token, then go to acc (64
// bytes a word at 64 * word). (The tokens' masks are looked up beforehand: a call in the loop would
// spill every vector register.)
constexpr int kRegWords = 24;
__attribute__((target("avx512f,avx512bw"))) void add_masks_avx512_regs(const uint64_t* const* tokens, int n,
                                                                      const uint32_t* words, int nw, uint8_t* acc)
{
  __m512i sum[kRegWords];
#pragma GCC unroll 24
  for (int w = 0; w < kRegWords; ++w)
    sum[w] = _mm512_setzero_si512();
  for (int t = 0; t < n; ++t) {
    const uint64_t* masks = tokens[t];
#pragma GCC unroll 24
    for (int w = 0; w < kRegWords; ++w)
      if (w < nw)
        sum[w] = _mm512_sub_epi8(sum[w], _mm512_movm_epi8(_cvtu64_mask64(masks[words[w]])));
  }
#pragma GCC unroll 24
  for (int w = 0; w < kRegWords; ++w)
    if (w < nw) {
      uint8_t* at = acc + 64 * size_t(words[w]);
      _mm512_storeu_si512(at, _mm512_add_epi8(_mm512_loadu_si512(at), sum[w]));
    }
}

int best_kernel()
{
  static const int k = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") ? 2
                       : __builtin_cpu_supports("avx2")                                        ? 1
                                                                                               : 0;
  return k;
}

// Adds tokens' masks to [layer][expert] counts with one of the kernels (0 scalar, 1 AVX2, 2 AVX-512BW),
// on the layers `only` (all when empty; other layers' counts are left alone).
class MaskCounter {
public:
  MaskCounter(const RoutingShape& s, std::span<uint16_t> counts, int kernel, std::span<const int> only = {})
      : s_(s), counts_(counts), kernel_(kernel), acc_(kernel ? size_t(s.words()) * 64 : 0, 0)
  {
    const uint32_t W = uint32_t(s.words_per_layer);
    if (only.empty()) {
      layers_.resize(size_t(s.layers));
      std::iota(layers_.begin(), layers_.end(), 0);
      runs_.push_back({0, uint32_t(s.words())});
    } else {
      for (int l : only) {
        if (l < 0 || l >= s.layers)
          throw std::invalid_argument("layer " + std::to_string(l) + " outside the model's " + std::to_string(s.layers));
        layers_.push_back(l);
        runs_.push_back({uint32_t(l) * W, W});
      }
    }
  }
  void add(const uint64_t* masks)
  {
    if (kernel_ == 0) {
      const int W = s_.words_per_layer;
      for (int l : layers_) {
        uint16_t* c = &counts_[size_t(l) * size_t(s_.experts)];
        for (int w = 0; w < W; ++w)
          for (uint64_t bits = masks[size_t(l * W + w)]; bits; bits &= bits - 1)
            ++c[w * 64 + std::countr_zero(bits)];
      }
      return;
    }
    if (kernel_ == 2)
      add_mask_bytes_avx512(masks, runs_, acc_.data());
    else
      add_mask_bytes_avx2(masks, runs_, acc_.data());
    if (++pending_ == 255)
      flush();
  }
  void flush()
  {
    if (pending_ == 0)
      return;
    for (int l : layers_) {
      uint8_t* a  = &acc_[size_t(l * s_.words_per_layer) * 64];
      uint16_t* c = &counts_[size_t(l) * size_t(s_.experts)];
      for (int e = 0; e < s_.experts; ++e)
        c[e] = uint16_t(c[e] + a[e]);
      std::fill(a, a + s_.experts, uint8_t(0));
    }
    pending_ = 0;
  }
  std::span<const int> layers() const { return layers_; }
  // add() of tokens [begin, end) of r, with the counters in registers when they fit.
  void add_range(const ExpertRoutingSource& routing, const Request& r, int begin, int end)
  {
    size_t nw = 0;
    for (const WordRun& run : runs_)
      nw += run.n;
    if (kernel_ != 2 || nw > size_t(kRegWords)) {
      for (int t = begin; t < end; ++t)
        add(routing.token_experts(r, t).data());
      return;
    }
    uint32_t words[kRegWords];
    nw = 0;
    for (const WordRun& run : runs_)
      for (uint32_t w = run.first; w < run.first + run.n; ++w)
        words[nw++] = w;
    const uint64_t* tokens[255];
    for (int t = begin; t < end;) {
      const int stop = std::min(end, t + (255 - pending_));
      for (int u = t; u < stop; ++u)
        tokens[u - t] = routing.token_experts(r, u).data();
      add_masks_avx512_regs(tokens, stop - t, words, int(nw), acc_.data());
      pending_ += stop - t;
      t = stop;
      if (pending_ == 255)
        flush();
    }
  }

private:
  const RoutingShape& s_;
  std::span<uint16_t> counts_;
  int kernel_;
  std::vector<uint8_t> acc_;  // byte counter of each bit slot (layer, word, bit)
  std::vector<int> layers_;
  std::vector<WordRun> runs_;
  int pending_ = 0;
};

void check_room(std::span<const uint16_t> counts, long tokens, const Request* r)
{
  const uint16_t mx = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  if (long(mx) + tokens > 65535)
    throw std::overflow_error("expert activation count" + (r ? " of request " + std::to_string(r->id) : std::string()) +
                              " exceeds 65535");
}

// Adds tokens [begin, end) of `r` to counts. The byte-lane kernels pay a flush of layers x experts
// per call, so a few tokens go the scalar way. (No software prefetch: generated routing's palette
// records stay in L2 and a replayed request's tokens are contiguous.)
void count_range(const ExpertRoutingSource& routing, const Request& r, int begin, int end, std::span<uint16_t> counts,
                 std::span<const int> only = {})
{
  check_room(counts, long(end) - long(begin), &r);
  MaskCounter counter(routing.shape(), counts, end - begin < 8 ? 0 : best_kernel(), only);
  counter.add_range(routing, r, begin, end);
  counter.flush();
}

}  // namespace

bool detail::count_masks_with(int kernel, std::span<const std::span<const uint64_t>> tokens, const RoutingShape& shape,
                              std::span<uint16_t> counts)
{
  if (kernel < 0)
    kernel = best_kernel();
  if (kernel > best_kernel())
    return false;
  check_room(counts, long(tokens.size()), nullptr);
  MaskCounter counter(shape, counts, kernel);
  for (std::span<const uint64_t> t : tokens)
    counter.add(t.data());
  counter.flush();
  return true;
}

void add_tokens(const ExpertRoutingSource& routing, const Request& r, int begin, int end, PromptProfile& into,
                const GateSource* gates, std::span<const int> only_layers)
{
  const RoutingShape& s = routing.shape();
  if (into.layers != s.layers || into.experts != s.experts || into.counts.size() != size_t(s.layers) * size_t(s.experts))
    throw std::invalid_argument("profile shape differs from the routing source's");
  const bool want_prob = !into.gate_prob.empty(), want_score = !into.gate_score.empty();
  if ((want_prob || want_score) && !gates)
    throw std::invalid_argument("gate sums requested but the routing source has no gate values");
  if (want_score && !gates->has_scores())
    throw std::invalid_argument("gate_score sums requested but the routing source records no raw gate scores");
  if (begin >= end)
    return;
  if (!want_prob && !want_score) {
    count_range(routing, r, begin, end, into.counts, only_layers);
    return;
  }
  const size_t cells = into.counts.size();

  if (gates->token_table(r, begin) >= 0) {
    // Dense tables: count the tokens of each table apart, then gates = counts x the table's values.
    check_room(into.counts, long(end) - long(begin), &r);
    std::vector<int> ids;
    std::vector<std::vector<uint16_t>> counts;
    std::vector<MaskCounter> counters;
    counts.reserve(GateSource::kMaxGateTables);
    counters.reserve(GateSource::kMaxGateTables);
    for (int t = begin; t < end; ++t) {
      const int id = gates->token_table(r, t);
      size_t k     = size_t(std::find(ids.begin(), ids.end(), id) - ids.begin());
      if (k == ids.size()) {
        if (ids.size() == GateSource::kMaxGateTables)
          throw std::logic_error("a request's tokens use more than " + std::to_string(GateSource::kMaxGateTables) + " gate tables");
        ids.push_back(id);
        counts.emplace_back(cells, 0);
        counters.emplace_back(s, counts.back(), end - begin < 8 ? 0 : best_kernel(), only_layers);
      }
      counters[k].add(routing.token_experts(r, t).data());
    }
    const size_t E = size_t(s.experts);
    for (size_t k = 0; k < ids.size(); ++k) {
      counters[k].flush();
      const std::vector<uint16_t>& c = counts[k];
      std::span<const float> prob = gates->table_prob(ids[k]), score = gates->table_score(ids[k]);
      for (int l : counters[k].layers())
        for (size_t i = size_t(l) * E; i < size_t(l + 1) * E; ++i) {
          into.counts[i] = uint16_t(into.counts[i] + c[i]);
          if (want_prob)
            into.gate_prob[i] += float(c[i]) * prob[i];
          if (want_score)
            into.gate_score[i] += float(c[i]) * score[i];
        }
    }
    return;
  }

  // Per token: the gate values of its picks, in the order of its mask bits.
  count_range(routing, r, begin, end, into.counts, only_layers);
  std::vector<char> take(size_t(s.layers), only_layers.empty() ? 1 : 0);
  for (int l : only_layers)
    take[size_t(l)] = 1;
  const size_t E = size_t(s.experts), K = size_t(s.top_k), group = size_t(s.layers) * K;
  std::vector<float> prob(group), score(want_score ? group : 0);
  for (int t = begin; t < end; ++t) {
    gates->token_gates(r, t, prob, score);
    std::span<const uint64_t> masks = routing.token_experts(r, t);
    for (int l = 0; l < s.layers; ++l) {
      if (!take[size_t(l)])
        continue;
      size_t j = size_t(l) * K, stop = j + K;
      for (int w = 0; w < s.words_per_layer; ++w)
        for (uint64_t bits = masks[size_t(l * s.words_per_layer + w)]; bits && j < stop; bits &= bits - 1, ++j) {
          const size_t cell = size_t(l) * E + size_t(w * 64 + std::countr_zero(bits));
          if (want_prob)
            into.gate_prob[cell] += prob[j];
          if (want_score)
            into.gate_score[cell] += score[j];
        }
    }
  }
}

PromptProfile count_prompt(const ExpertRoutingSource& routing, const Request& r, ProfileFields fields,
                           const GateSource* gates, std::span<const int> only_layers)
{
  PromptProfile p = empty_profile(routing.shape(), fields);
  add_tokens(routing, r, 0, r.prompt_tokens, p, gates, only_layers);
  return p;
}

void add_profile(PromptProfile& into, const PromptProfile& part)
{
  if (into.layers != part.layers || into.experts != part.experts || into.counts.size() != part.counts.size())
    throw std::invalid_argument("add_profile: profiles of different shapes");
  if ((!part.gate_prob.empty() && into.gate_prob.size() != part.gate_prob.size()) ||
      (!part.gate_score.empty() && into.gate_score.size() != part.gate_score.size()))
    throw std::invalid_argument("add_profile: gate sums missing in the destination");
  for (size_t c = 0; c < into.counts.size(); ++c) {
    const unsigned sum = unsigned(into.counts[c]) + part.counts[c];
    if (sum > 65535)
      throw std::overflow_error("add_profile: expert activation count exceeds 65535");
    into.counts[c] = uint16_t(sum);
  }
  for (size_t c = 0; c < part.gate_prob.size(); ++c)
    into.gate_prob[c] += part.gate_prob[c];
  for (size_t c = 0; c < part.gate_score.size(); ++c)
    into.gate_score[c] += part.gate_score[c];
}

std::vector<uint16_t> count_decode(const ExpertRoutingSource& routing, const Request& r)
{
  const RoutingShape& s = routing.shape();
  std::vector<uint16_t> counts(size_t(s.layers) * size_t(s.experts), 0);
  count_range(routing, r, r.prompt_tokens, r.prompt_tokens + r.output_tokens - 1, counts);
  return counts;
}

// --- IDF -----------------------------------------------------------------------------------------

IdfTable fit_idf(std::span<const PromptProfile> calibration)
{
  if (calibration.empty())
    throw std::invalid_argument("fit_idf: no calibration profiles");
  IdfTable t;
  t.layers   = calibration[0].layers;
  t.experts  = calibration[0].experts;
  t.requests = int(calibration.size());
  const size_t cells = size_t(t.layers) * size_t(t.experts);
  std::vector<uint32_t> df(cells, 0);
  for (const PromptProfile& p : calibration) {
    if (p.layers != t.layers || p.experts != t.experts || p.counts.size() != cells)
      throw std::invalid_argument("fit_idf: profiles of different shapes");
    for (size_t c = 0; c < cells; ++c)
      df[c] += p.counts[c] > 0;
  }
  t.idf.resize(cells);
  const double n1 = double(t.requests) + 1;
  for (size_t c = 0; c < cells; ++c)
    t.idf[c] = float(std::log(n1 / (double(df[c]) + 1)));
  return t;
}

// --- Signatures ----------------------------------------------------------------------------------

void layer_values(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, int layer, std::span<float> out)
{
  const size_t E = size_t(p.experts), base = size_t(layer) * E;
  if (layer < 0 || layer >= p.layers || out.size() < E)
    throw std::invalid_argument("layer_values: layer outside the profile or output too small");
  const uint16_t* c = &p.counts[base];
  switch (v) {
  case SignatureVariant::counts:
    for (size_t e = 0; e < E; ++e)
      out[e] = float(c[e]);
    break;
  case SignatureVariant::counts_idf: {
    if (!idf || idf->layers != p.layers || idf->experts != p.experts)
      throw std::invalid_argument("counts_idf signature needs an IDF table of the profile's shape");
    const float* w = &idf->idf[base];
    for (size_t e = 0; e < E; ++e)
      out[e] = float(c[e]) * w[e];
    break;
  }
  case SignatureVariant::sqrt_counts:
    for (size_t e = 0; e < E; ++e)
      out[e] = std::sqrt(float(c[e]));
    break;
  case SignatureVariant::binary:
    for (size_t e = 0; e < E; ++e)
      out[e] = c[e] > 0 ? 1.f : 0.f;
    break;
  case SignatureVariant::gate_prob:
  case SignatureVariant::gate_score: {
    const std::vector<float>& g = v == SignatureVariant::gate_prob ? p.gate_prob : p.gate_score;
    if (g.empty())
      throw std::invalid_argument(std::string(to_string(v)) + " signature needs a profile with that gate sum");
    std::copy(g.begin() + std::ptrdiff_t(base), g.begin() + std::ptrdiff_t(base + E), out.begin());
    break;
  }
  }
}

void make_signature(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, std::span<const int> mask_layers,
                    std::span<float> out)
{
  const size_t E = size_t(p.experts);
  if (out.size() != mask_layers.size() * E)
    throw std::invalid_argument("make_signature: output must hold |mask| x experts floats");
  for (size_t k = 0; k < mask_layers.size(); ++k)
    layer_values(p, v, idf, mask_layers[k], out.subspan(k * E, E));
  double norm2 = 0;
  for (float x : out)
    norm2 += double(x) * double(x);
  if (norm2 > 0) {
    const float inv = float(1.0 / std::sqrt(norm2));
    for (float& x : out)
      x *= inv;
  }
}

Signature make_signature(const PromptProfile& p, SignatureVariant v, const IdfTable* idf, std::span<const int> mask_layers)
{
  Signature s(mask_layers.size() * size_t(p.experts));
  make_signature(p, v, idf, mask_layers, s);
  return s;
}

__attribute__((target_clones("avx2", "default"))) float dot(std::span<const float> a, std::span<const float> b)
{
  return detail::dot_kernel(a.data(), b.data(), std::min(a.size(), b.size()));
}

double cosine(std::span<const float> a, std::span<const float> b)
{
  const double ab = dot(a, b), aa = dot(a, a), bb = dot(b, b);
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}


// --- Similarity to K centroids ---------------------------------------------------------------------

namespace {

__attribute__((target("avx512f,f16c"))) void to_half(const float* from, uint16_t* to, size_t n)
{
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + i),
                        _mm512_maskz_cvtps_ph(__mmask16(0xFFFF), _mm512_loadu_ps(from + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i)
    to[i] = _cvtss_sh(from[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

__attribute__((target("avx512f,f16c"))) double half_value(uint16_t h)
{
  return double(_cvtsh_ss(h));
}

}  // namespace

CentroidTable::CentroidTable(std::span<const float> row_major, int rows, int cols)
    : rows_(rows), cols_(cols), stride_((rows + 15) / 16 * 16)
{
  if (rows < 0 || cols < 0 || row_major.size() != size_t(rows) * size_t(cols))
    throw std::invalid_argument("CentroidTable: rows x cols values expected");
  values_.assign(size_t(cols) * size_t(stride_), 0.f);
  for (int k = 0; k < rows; ++k)
    for (int i = 0; i < cols; ++i)
      values_[size_t(i) * size_t(stride_) + size_t(k)] = row_major[size_t(k) * size_t(cols) + size_t(i)];
  if (__builtin_cpu_supports("avx512f")) {
    half_.resize(values_.size());
    to_half(values_.data(), half_.data(), values_.size());
    // f_k = |c - h|_2 (the estimate's centroid error, Cauchy-Schwarz with |x|_2) + gamma (|c|_2 + |h|_2)
    // (float rounding of the exact and the estimated sums: at most n + 64 operations on any path, each
    // within 2^-24 relative) + 2^-20 (1 + |h|_2) (rounding of approx +- bound itself), 1 % on top.
    const double gamma = double(cols + 64) * 0x1.0p-24;
    for (int k = 0; k < rows; ++k) {
      double e2 = 0, c2 = 0, h2 = 0;
      for (int i = 0; i < cols; ++i) {
        const double c = values_[size_t(i) * size_t(stride_) + size_t(k)];
        const double h = half_value(half_[size_t(i) * size_t(stride_) + size_t(k)]);
        e2 += (c - h) * (c - h);
        c2 += c * c;
        h2 += h * h;
      }
      const double f = std::sqrt(e2) + gamma * (std::sqrt(c2) + std::sqrt(h2)) + 0x1.0p-20 * (1 + std::sqrt(h2));
      half_error_.push_back(float(f * 1.01));
    }
  }
}

namespace {

// dot_kernel's order, which centroid_dots reproduces: dimension i < n32 goes to partial sum i % 32,
// n32 <= i < n8 to partial sum i % 8 (after all of the former), each sum in ascending i; the 32 sums
// reduce by a fixed tree, then dimensions n8 .. n - 1 are added one by one.
struct DotLayout {
  size_t n, n32, n8;
  explicit DotLayout(size_t d) : n(d), n32(d & ~size_t(31)), n8(d & ~size_t(7)) {}
};

// The non-zero dimensions of x below n8, ascending; the returned count is where those from n32 start.
// Reused across calls (one thread runs the whole simulation; the buffer only grows).
std::vector<uint32_t>& nonzero_buffer(size_t n)
{
  thread_local std::vector<uint32_t> idx;
  if (idx.size() < n + 16)
    idx.resize(n + 16);
  return idx;
}

// GCC would contract a multiply and an add into an FMA across statements; clang (which has no
// optimize attribute) contracts only within one expression, and the intrinsics below are separate.
#if defined(__clang__)
#define ELDR_NO_FP_CONTRACT
#else
#define ELDR_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif

// centroid_dots_avx512's helpers are functions of its target, not lambdas: clang does not give a
// lambda its enclosing function's target.

// Appends to idx[count..] the indices in [from, to) where x is non-zero; returns the new count.
__attribute__((target("avx512f"), always_inline)) inline size_t compact_nonzero_avx512(const float* x, size_t from,
                                                                                     size_t to, uint32_t* idx,
                                                                                     size_t count)
{
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (size_t b = from; b < to; b += 16) {
    const __mmask16 valid = to - b >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (to - b)) - 1);
    const __mmask16 nz = _mm512_mask_cmpneq_ps_mask(valid, _mm512_maskz_loadu_ps(valid, x + b), _mm512_setzero_ps());
    // Compress in a register and store all 16 lanes (the buffer has 16 spare): a masked compress
    // to memory is several times slower on Intel cores.
    _mm512_storeu_si512(idx + count, _mm512_maskz_compress_epi32(nz, _mm512_add_epi32(lane, _mm512_set1_epi32(int(b)))));
    count += size_t(std::popcount(unsigned(nz)));
  }
  return count;
}

// acc[0..16) += xi * c[0..16), multiply then add.
__attribute__((target("avx512f"), always_inline)) ELDR_NO_FP_CONTRACT inline void
add_scaled_avx512(float* acc, float xi, const float* c)
{
  const __m512 p = _mm512_mul_ps(_mm512_set1_ps(xi), _mm512_load_ps(c));
  _mm512_store_ps(acc, _mm512_add_ps(_mm512_load_ps(acc), p));
}

// Lane-wise IEEE multiply then add (no contraction into FMA: dot_kernel rounds the product), so every
// lane holds exactly what dot_kernel computes for its centroid.
__attribute__((target("avx512f"))) ELDR_NO_FP_CONTRACT void centroid_dots_avx512(const CentroidTable& t,
                                                                                      const float* x, float* out)
{
  const DotLayout d(size_t(t.cols()));
  uint32_t* idx = nonzero_buffer(d.n).data();
  const size_t count32 = compact_nonzero_avx512(x, 0, d.n32, idx, 0);
  const size_t count   = compact_nonzero_avx512(x, d.n32, d.n8, idx, count32);

  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const float* c = t.data() + g;
    alignas(64) float acc[32][16];
    for (auto& a : acc)
      _mm512_store_ps(a, _mm512_setzero_ps());
    for (size_t q = 0; q < count32; ++q)
      add_scaled_avx512(acc[idx[q] & 31], x[idx[q]], c + size_t(idx[q]) * stride);
    for (size_t q = count32; q < count; ++q)
      add_scaled_avx512(acc[idx[q] & 7], x[idx[q]], c + size_t(idx[q]) * stride);
    __m512 s[8];
    for (int l = 0; l < 8; ++l)
      s[l] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(acc[l]), _mm512_load_ps(acc[8 + l])),
                           _mm512_add_ps(_mm512_load_ps(acc[16 + l]), _mm512_load_ps(acc[24 + l])));
    __m512 r = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[4]), _mm512_add_ps(s[1], s[5])),
                             _mm512_add_ps(_mm512_add_ps(s[2], s[6]), _mm512_add_ps(s[3], s[7])));
    for (size_t i = d.n8; i < d.n; ++i)
      r = _mm512_add_ps(r, _mm512_mul_ps(_mm512_set1_ps(x[i]), _mm512_load_ps(c + i * stride)));
    const int left = t.rows() - g;
    _mm512_mask_storeu_ps(out + g, left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1), r);
  }
}

// The same computation with generic 16-float vectors (two AVX2 or four SSE registers: neither target
// has FMA, so nothing is contracted) and a scalar compaction.
__attribute__((target_clones("avx2", "default"))) void centroid_dots_portable(const CentroidTable& t, const float* x,
                                                                               float* out)
{
  using v16 = float __attribute__((vector_size(64)));
  const DotLayout d(size_t(t.cols()));
  uint32_t* idx = nonzero_buffer(d.n).data();
  size_t count = 0, count32 = 0;
  for (size_t i = 0; i < d.n8; ++i) {
    count32 = i == d.n32 ? count : count32;
    idx[count] = uint32_t(i);
    count += x[i] != 0;
  }
  if (d.n32 == d.n8)
    count32 = count;

  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const float* c = t.data() + g;
    v16 acc[32] = {};
    v16 v;  // (loaded through memcpy, no vector-valued helper: its ABI differs per target)
    for (size_t q = 0; q < count; ++q) {
      __builtin_memcpy(&v, c + idx[q] * stride, sizeof v);
      acc[idx[q] & (q < count32 ? 31 : 7)] += x[idx[q]] * v;
    }
    v16 s[8];
    for (int l = 0; l < 8; ++l)
      s[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
    v16 r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (size_t i = d.n8; i < d.n; ++i) {
      __builtin_memcpy(&v, c + i * stride, sizeof v);
      r += x[i] * v;
    }
    for (int k = 0; k < 16 && g + k < t.rows(); ++k)
      out[g + k] = r[k];
  }
}

// Estimates from the float16 table: the non-zero dimensions of x compacted as for the exact kernel,
// then four independent fused chains per 16 centroids (their order does not matter: the bound covers
// any order).
__attribute__((target("avx512f"))) bool approx_dots_avx512(const CentroidTable& t, const float* x, float* approx,
                                                          float* bound)
{
  const size_t n     = size_t(t.cols());
  uint32_t* idx      = nonzero_buffer(n).data();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 sq          = _mm512_setzero_ps();
  size_t count       = 0;
  for (size_t b = 0; b < n; b += 16) {
    const __mmask16 valid = n - b >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - b)) - 1);
    const __m512 v        = _mm512_maskz_loadu_ps(valid, x + b);
    const __mmask16 nz    = _mm512_mask_cmpneq_ps_mask(valid, v, _mm512_setzero_ps());
    sq                    = _mm512_fmadd_ps(v, v, sq);
    _mm512_storeu_si512(idx + count, _mm512_maskz_compress_epi32(nz, _mm512_add_epi32(lane, _mm512_set1_epi32(int(b)))));
    count += size_t(std::popcount(unsigned(nz)));
  }
  alignas(64) float squares[16];
  _mm512_store_ps(squares, sq);
  float sum = 0;
  for (float v : squares)
    sum += v;
  const float norm = std::sqrt(sum) * 1.001f;
  if (!std::isfinite(norm))
    return false;
  const size_t stride = size_t(t.stride());
  for (int g = 0; g < t.rows(); g += 16) {
    const uint16_t* h = t.half_data() + g;
    // (A macro, not a lambda: a lambda would not inherit the target, and would return vectors.)
#define ELDR_APPROX_TERM(acc, q)                                                                          \
  acc = _mm512_fmadd_ps(                                                                                 \
      _mm512_set1_ps(x[idx[q]]),                                                                         \
      _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), _mm256_load_si256(reinterpret_cast<const __m256i*>(h + idx[q] * stride))), \
      acc)
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t q = 0;
    for (; q + 4 <= count; q += 4)
      for (int u = 0; u < 4; ++u)
        ELDR_APPROX_TERM(a[u], q + size_t(u));
    for (; q < count; ++q)
      ELDR_APPROX_TERM(a[0], q);
#undef ELDR_APPROX_TERM
    const int left        = t.rows() - g;
    const __mmask16 store = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    _mm512_mask_storeu_ps(approx + g, store, _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
  }
  for (int k = 0; k < t.rows(); ++k)
    bound[k] = t.half_error(k) * norm;
  return true;
}

int best_dots_kernel()
{
  static const int k = __builtin_cpu_supports("avx512f") ? 1 : 0;
  return k;
}

}  // namespace

bool detail::centroid_dots_with(int kernel, const CentroidTable& t, std::span<const float> x, std::span<float> out)
{
  if (x.size() != size_t(t.cols()) || out.size() != size_t(t.rows()))
    throw std::invalid_argument("centroid_dots: " + std::to_string(x.size()) + " dimensions and " +
                                std::to_string(out.size()) + " outputs for a " + std::to_string(t.rows()) + " x " +
                                std::to_string(t.cols()) + " table");
  if (kernel < 0)
    kernel = best_dots_kernel();
  if (kernel > best_dots_kernel())
    return false;
  if (kernel == 1)
    centroid_dots_avx512(t, x.data(), out.data());
  else
    centroid_dots_portable(t, x.data(), out.data());
  return true;
}

bool approx_centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> approx,
                          std::span<float> bound)
{
  if (x.size() != size_t(t.cols()) || approx.size() != size_t(t.rows()) || bound.size() != size_t(t.rows()))
    throw std::invalid_argument("approx_centroid_dots: sizes differ from the table's");
  return t.has_half() && approx_dots_avx512(t, x.data(), approx.data(), bound.data());
}

void centroid_dots(const CentroidTable& t, std::span<const float> x, std::span<float> out)
{
  detail::centroid_dots_with(-1, t, x, out);
}

}  // namespace eldr
