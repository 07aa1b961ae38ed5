#include "sim/gating/prompt_profile.hpp"

#include <algorithm>
#include <bit>
#include <immintrin.h>
#include <numeric>
#include <stdexcept>
#include <string>

namespace eldr {

PromptProfile empty_profile(const GatingShape& shape, ProfileFields fields)
{
  PromptProfile p;
  p.layers           = shape.layers;
  p.experts          = shape.experts;
  const size_t cells = size_t(shape.layers) * size_t(shape.experts);
  p.counts.assign(cells, 0);
  if (fields.gate_prob)
    p.gate_prob.assign(cells, 0.f);
  if (fields.gate_score)
    p.gate_score.assign(cells, 0.f);
  return p;
}

void add_mask_counts(std::span<const uint64_t> masks, const GatingShape& shape, std::span<uint16_t> counts)
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
// Both kernels below add the words [first, first + n) of every run listed in `runs` (a layer's
// words), with a load and a store of the counters per word; counting many masks, the *_regs kernels
// keep a pass of words' counters in registers across masks instead (AVX2: 6 words; figures in
// docs/log/bench.md).
struct WordRun {
  uint32_t first, n;
};

// Each adds `times` (at most 255, and the byte counters must have room) to the counters of the set bits.
__attribute__((target("avx512f,avx512bw"))) void
add_mask_bytes_avx512(const uint64_t* masks, std::span<const WordRun> runs, uint8_t* acc, uint8_t times)
{
  const __m512i m = _mm512_set1_epi8(char(times));
  for (const WordRun& run : runs)
    for (size_t w = run.first; w < run.first + run.n; ++w) {
      const __m512i a = _mm512_loadu_si512(acc + 64 * w);
      _mm512_storeu_si512(acc + 64 * w, _mm512_mask_add_epi8(a, _cvtu64_mask64(masks[w]), a, m));
    }
}

__attribute__((target("avx2"))) void add_mask_bytes_avx2(const uint64_t* masks, std::span<const WordRun> runs,
                                                         uint8_t* acc, uint8_t times)
{
  // Byte i of a 32-bit half takes byte i / 8 of it (each 128-bit lane holds the broadcast dword), then
  // keeps bit i % 8: equal to the selector iff the bit is set.
  const __m256i spread =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
  const __m256i m      = _mm256_set1_epi8(char(times));
  for (const WordRun& run : runs)
    for (size_t w = run.first; w < run.first + run.n; ++w)
      for (int h = 0; h < 2; ++h) {
        __m256i v = _mm256_set1_epi32(int(uint32_t(masks[w] >> (32 * h))));
        v         = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, spread), select), select);
        auto* at  = reinterpret_cast<__m256i*>(acc + 64 * w + 32 * size_t(h));
        _mm256_storeu_si256(at, _mm256_add_epi8(_mm256_loadu_si256(at), _mm256_and_si256(v, m)));
      }
}

// The AVX-512 kernel over the masks of up to 255 tokens (the byte counters' range), for up to
// kRegWords words a token (a router's mask: 2 words a layer for 128 experts): the byte counters stay
// in registers across tokens instead of a load and a store per word and token, then go to acc (64
// bytes a word at 64 * word). (The tokens' masks are looked up beforehand: a call in the loop would
// spill every vector register.)
constexpr int kRegWords = 24;
// Masks m[0, n) with their multiplicities (their sum at most the byte counters' room) on up to
// kRegWords words, prefetching the words of m[t + ahead] while below `known` (ahead 0: no prefetch).
__attribute__((target("avx512f,avx512bw"))) void add_masks_avx512_regs(const MaskCount* m, size_t n, size_t known,
                                                                       size_t ahead, const uint32_t* words, int nw,
                                                                       uint8_t* acc)
{
  __m512i sum[kRegWords];
#pragma GCC unroll 24
  for (int w = 0; w < kRegWords; ++w)
    sum[w] = _mm512_setzero_si512();
  for (size_t t = 0; t < n; ++t) {
    if (ahead && t + ahead < known)
      for (int w = 0; w < nw + 7; w += 8)  // (the words of a copy of a few layers are contiguous)
        __builtin_prefetch(m[t + ahead].masks + words[std::min(w, nw - 1)]);
    const uint64_t* masks = m[t].masks;
    const __m512i times   = _mm512_set1_epi8(char(m[t].count));
#pragma GCC unroll 24
    for (int w = 0; w < kRegWords; ++w)
      if (w < nw)
        sum[w] = _mm512_mask_add_epi8(sum[w], _cvtu64_mask64(masks[words[w]]), sum[w], times);
  }
#pragma GCC unroll 24
  for (int w = 0; w < kRegWords; ++w)
    if (w < nw) {
      uint8_t* at = acc + 64 * size_t(words[w]);
      _mm512_storeu_si512(at, _mm512_add_epi8(_mm512_loadu_si512(at), sum[w]));
    }
}

// The AVX2 counterpart: a word's 64 byte counters take two ymm registers, so a pass holds up to
// kAvx2RegWords words (12 of the 16 registers, a few spilled around the expansion: passes of 4 or 5
// words, spilling none, measured no faster).
// A word's bits become byte lanes as in add_mask_bytes_avx2 (both halves from one broadcast qword).
constexpr int kAvx2RegWords = 6;
template <int NW> __attribute__((target("avx2"))) void
add_masks_avx2_regs(const MaskCount* m, size_t n, size_t known, size_t ahead, const uint32_t* words, uint8_t* acc)
{
  // Byte i of a 128-bit lane takes byte i / 8 (low half) or 4 + i / 8 (high half) of the qword.
  const __m256i spread_lo =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i spread_hi =
      _mm256_setr_epi8(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7);
  const __m256i select = _mm256_set1_epi64x(int64_t(0x8040201008040201ULL));
  // What to prefetch of a record: the first word of each run of consecutive words, and the last (the
  // words of a copy of a few layers are contiguous; of whole records, a layer's words are).
  uint32_t fetch[NW + 1];
  int np = 0;
  for (int w = 0; w < NW; ++w)
    if (w == 0 || words[w] != words[w - 1] + 1)
      fetch[np++] = words[w];
  fetch[np++] = words[NW - 1];
  __m256i sum[2 * NW];
#pragma GCC unroll 12
  for (int i = 0; i < 2 * NW; ++i)
    sum[i] = _mm256_setzero_si256();
  for (size_t t = 0; t < n; ++t) {
    if (ahead && t + ahead < known)
      for (int i = 0; i < np; ++i)
        __builtin_prefetch(m[t + ahead].masks + fetch[i]);
    const uint64_t* masks = m[t].masks;
    const __m256i times   = _mm256_set1_epi8(char(m[t].count));
#pragma GCC unroll 6
    for (int w = 0; w < NW; ++w) {
      const __m256i v  = _mm256_set1_epi64x(int64_t(masks[words[w]]));
      const __m256i lo = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, spread_lo), select), select);
      const __m256i hi = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, spread_hi), select), select);
      sum[2 * w]       = _mm256_add_epi8(sum[2 * w], _mm256_and_si256(lo, times));
      sum[2 * w + 1]   = _mm256_add_epi8(sum[2 * w + 1], _mm256_and_si256(hi, times));
    }
  }
#pragma GCC unroll 6
  for (int w = 0; w < NW; ++w)
    for (int h = 0; h < 2; ++h) {
      auto* at = reinterpret_cast<__m256i*>(acc + 64 * size_t(words[w]) + 32 * size_t(h));
      _mm256_storeu_si256(at, _mm256_add_epi8(_mm256_loadu_si256(at), sum[2 * w + h]));
    }
}

using Avx2RegKernel = void (*)(const MaskCount*, size_t, size_t, size_t, const uint32_t*, uint8_t*);
// By the number of words of a pass, 1 .. kAvx2RegWords.
constexpr Avx2RegKernel kAvx2Regs[kAvx2RegWords] = {add_masks_avx2_regs<1>, add_masks_avx2_regs<2>,
                                                    add_masks_avx2_regs<3>, add_masks_avx2_regs<4>,
                                                    add_masks_avx2_regs<5>, add_masks_avx2_regs<6>};

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
  // The byte counters are a per-thread buffer, all zero between counters (flush() zeroes what it
  // added): a prompt's profile is counted per KV block, and a fresh 6 KB buffer per call cost more
  // than its counting on a few layers.
  static uint8_t* zeroed_bytes(size_t n)
  {
    thread_local std::vector<uint8_t> buffer;
    if (buffer.size() < n)
      buffer.assign(n, 0);
    return buffer.data();
  }
  ~MaskCounter()
  {
    if (pending_ != 0)  // abandoned mid-count (an exception): leave the buffer zero for the next one
      std::fill(acc_, acc_ + size_t(s_.words()) * 64, uint8_t(0));
  }
  MaskCounter(const MaskCounter&)            = delete;
  MaskCounter& operator=(const MaskCounter&) = delete;

  MaskCounter(const GatingShape& s, std::span<uint16_t> counts, int kernel, std::span<const int> only = {})
      : s_(s), counts_(counts), kernel_(kernel), acc_(zeroed_bytes(kernel ? size_t(s.words()) * 64 : 0))
  {
    const uint32_t W = uint32_t(s.words_per_layer);
    if (only.empty()) {
      layers_.resize(size_t(s.layers));
      std::iota(layers_.begin(), layers_.end(), 0);
      runs_.push_back({0, uint32_t(s.words())});
    } else {
      for (int l : only) {
        if (l < 0 || l >= s.layers)
          throw std::invalid_argument("layer " + std::to_string(l) + " outside the model's " +
                                      std::to_string(s.layers));
        layers_.push_back(l);
        runs_.push_back({uint32_t(l) * W, W});
      }
    }
    for (int l : layers_)
      at_.push_back(uint32_t(l) * W);
  }
  // From now on the masks added hold only the layers' words, back to back in their order
  // (GatingSource::distinct_layer_masks); nothing may be pending.
  void use_layer_masks()
  {
    const uint32_t W = uint32_t(s_.words_per_layer);
    runs_.assign(1, {0, uint32_t(layers_.size()) * W});
    for (size_t i = 0; i < layers_.size(); ++i)
      at_[i] = uint32_t(i) * W;
  }
  // Adds `times` tokens of these masks (the caller has checked that the counts have room).
  void add(const uint64_t* masks, uint32_t times = 1)
  {
    if (kernel_ == 0) {
      const int W = s_.words_per_layer;
      for (size_t i = 0; i < layers_.size(); ++i) {
        uint16_t* c = &counts_[size_t(layers_[i]) * size_t(s_.experts)];
        for (int w = 0; w < W; ++w)
          for (uint64_t bits = masks[at_[i] + size_t(w)]; bits; bits &= bits - 1)
            c[w * 64 + std::countr_zero(bits)] = uint16_t(c[w * 64 + std::countr_zero(bits)] + times);
      }
      return;
    }
    while (times > 0) {  // the byte counters take at most 255 tokens between flushes
      const uint32_t n = std::min<uint32_t>(times, uint32_t(255 - pending_));
      if (kernel_ == 2)
        add_mask_bytes_avx512(masks, runs_, acc_, uint8_t(n));
      else
        add_mask_bytes_avx2(masks, runs_, acc_, uint8_t(n));
      times -= n;
      pending_ += int(n);
      if (pending_ == 255)
        flush();
    }
  }
  // Distinct masks with their multiplicities, prefetching a few ahead: the records are spread over a
  // pool larger than L2, so a record read is mostly a wait on L3.
  void add_counted(std::span<const MaskCount> masks)
  {
    // About 32 cache lines in flight: 4 whole records ahead, more of a few layers' words.
    size_t counted = 0;  // words a mask
    for (const WordRun& run : runs_)
      counted += run.n;
    const size_t ahead = std::max<size_t>(4, 32 / std::max<size_t>(1, (counted + 7) / 8));
    auto prefetch      = [&](size_t i) {
      for (const WordRun& run : runs_) {
        for (uint32_t w = run.first; w < run.first + run.n; w += 8)  // a cache line of 8 words
          __builtin_prefetch(masks[i].masks + w);
        __builtin_prefetch(masks[i].masks + run.first + run.n - 1);  // (a run across a line)
      }
    };
    for (size_t i = 0; i < std::min(ahead, masks.size()); ++i)
      prefetch(i);
    if (register_words()) {
      // The counters in registers over the longest runs of masks whose multiplicities fit their room;
      // a mask that exceeds it on its own goes through add(), which flushes in between.
      const size_t n = masks.size();
      for (size_t i = 0; i < n;) {
        const uint32_t room = uint32_t(255 - pending_);
        uint32_t sum        = 0;
        size_t j            = i;
        while (j < n && sum + masks[j].count <= room)
          sum += masks[j++].count;
        if (j == i) {
          add(masks[i].masks, masks[i].count);
          ++i;
          continue;
        }
        add_in_registers(masks.data() + i, j - i, n - i);
        pending_ += int(sum);
        i = j;
        if (pending_ == 255)
          flush();
      }
      return;
    }
    for (size_t i = 0; i < masks.size(); ++i) {
      if (i + ahead < masks.size())
        prefetch(i + ahead);
      add(masks[i].masks, masks[i].count);
    }
  }
  void flush()
  {
    if (pending_ == 0)
      return;
    for (size_t i = 0; i < layers_.size(); ++i) {
      uint8_t* a  = &acc_[size_t(at_[i]) * 64];
      uint16_t* c = &counts_[size_t(layers_[i]) * size_t(s_.experts)];
      for (int e = 0; e < s_.experts; ++e)
        c[e] = uint16_t(c[e] + a[e]);
      std::fill(a, a + s_.experts, uint8_t(0));
    }
    pending_ = 0;
  }
  std::span<const int> layers() const { return layers_; }
  // With a SIMD kernel: words_ = the words counted, and true.
  bool register_words()
  {
    if (kernel_ == 0)
      return false;
    words_.clear();
    for (const WordRun& run : runs_)
      for (uint32_t w = run.first; w < run.first + run.n; ++w)
        words_.push_back(w);
    return !words_.empty();
  }
  // The register kernel over m[0, n) (their counts within the room), kRegWords words at a time with
  // AVX-512 (kAvx2RegWords with AVX2): a whole record of 48 layers is 96 words, each AVX-512 pass reads
  // 3 of its cache lines and prefetches those ahead (m[0, known) may be read ahead; 0: none).
  void add_in_registers(const MaskCount* m, size_t n, size_t known)
  {
    const int nw = int(words_.size());
    if (kernel_ == 1) {
      // Passes of kAvx2RegWords words (the last may have fewer), each prefetching its own words of
      // the records ahead (a pass's words are at most a cache line or two of a record).
      for (int c = 0; c < nw; c += kAvx2RegWords) {
        const int part     = std::min(kAvx2RegWords, nw - c);
        const size_t ahead = known ? 32 : 0;
        kAvx2Regs[part - 1](m, n, known, ahead, words_.data() + c, acc_);
      }
      return;
    }
    for (int c = 0; c < nw; c += kRegWords) {
      const int part     = std::min(kRegWords, nw - c);
      const size_t ahead = known ? std::max(4, 32 / ((part + 7) / 8)) : 0;
      add_masks_avx512_regs(m, n, known, ahead, words_.data() + c, part, acc_);
    }
  }
  // add() of tokens [begin, end) of r, with the counters in registers when they fit.
  void add_range(const GatingSource& routing, const Request& r, int begin, int end)
  {
    // Pooled sources: each distinct record once, with its multiplicity (a 256-token prompt reads ~160
    // records instead of 256). The counts are integers, so this equals counting token by token.
    // A few layers: from the source's copy of only their words, where it has one (a third of the cache
    // lines for a router's mask of 8-9 layers spread over 48).
    thread_local std::vector<MaskCount> distinct;
    distinct.clear();
    if (int(layers_.size()) < s_.layers && pending_ == 0 &&
        routing.distinct_layer_masks(r, begin, end, layers_, distinct)) {
      use_layer_masks();
      add_counted(distinct);
      return;
    }
    if (routing.distinct_masks(r, begin, end, distinct)) {
      add_counted(distinct);
      return;
    }
    if (!register_words()) {
      for (int t = begin; t < end; ++t)
        add(routing.token_experts(r, t).data());
      return;
    }
    MaskCount tokens[255];
    for (int t = begin; t < end;) {
      const int stop = std::min(end, t + (255 - pending_));
      for (int u = t; u < stop; ++u)
        tokens[u - t] = {routing.token_experts(r, u).data(), 1};
      add_in_registers(tokens, size_t(stop - t), 0);
      pending_ += stop - t;
      t = stop;
      if (pending_ == 255)
        flush();
    }
  }

 private:
  const GatingShape& s_;
  std::span<uint16_t> counts_;
  int kernel_;
  uint8_t* acc_;  // byte counter of each bit slot (layer, word, bit): zeroed_bytes()
  std::vector<int> layers_;
  std::vector<uint32_t> at_;  // per layer of layers_, the word its words start at in a mask (and in acc_)
  std::vector<WordRun> runs_;
  std::vector<uint32_t> words_;  // register_words()
  int pending_ = 0;
};

// Throws unless `tokens` more fit in the counts of `layers` (all when empty): only those are added to,
// and a router's profile asks for a few of a model's layers.
void check_room(std::span<const uint16_t> counts, long tokens, const Request* r, int experts = 0,
                std::span<const int> layers = {})
{
  uint16_t mx = 0;
  if (layers.empty())
    mx = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  for (int l : layers)
    if (experts > 0 && l >= 0 && size_t(l + 1) * size_t(experts) <= counts.size()) {  // (others: rejected later)
      const auto row = counts.subspan(size_t(l) * size_t(experts), size_t(experts));
      mx             = std::max(mx, *std::max_element(row.begin(), row.end()));
    }
  if (long(mx) + tokens > 65535)
    throw std::overflow_error("expert activation count" + (r ? " of request " + std::to_string(r->id) : std::string()) +
                              " exceeds 65535");
}

// Adds tokens [begin, end) of `r` to counts. The byte-lane kernels pay a flush of layers x experts
// per call, so a few tokens go the scalar way. (No software prefetch: generated routing's palette
// records stay in L2 and a replayed request's tokens are contiguous.)
void count_range(const GatingSource& routing, const Request& r, int begin, int end, std::span<uint16_t> counts,
                 std::span<const int> only = {})
{
  check_room(counts, long(end) - long(begin), &r, routing.shape().experts, only);
  MaskCounter counter(routing.shape(), counts, end - begin < 8 ? 0 : best_kernel(), only);
  counter.add_range(routing, r, begin, end);
  counter.flush();
}

}  // namespace

bool detail::count_masks_with(int kernel, std::span<const std::span<const uint64_t>> tokens, const GatingShape& shape,
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

bool detail::count_mask_counts_with(int kernel, std::span<const MaskCount> masks, const GatingShape& shape,
                                    std::span<uint16_t> counts, std::span<const int> only_layers)
{
  if (kernel < 0)
    kernel = best_kernel();
  if (kernel > best_kernel())
    return false;
  long tokens = 0;
  for (const MaskCount& m : masks)
    tokens += m.count;
  check_room(counts, tokens, nullptr, shape.experts, only_layers);
  MaskCounter counter(shape, counts, kernel, only_layers);
  counter.add_counted(masks);
  counter.flush();
  return true;
}

void add_tokens(const GatingSource& routing, const Request& r, int begin, int end, PromptProfile& into,
                const GateSource* gates, std::span<const int> only_layers)
{
  const GatingShape& s = routing.shape();
  if (into.layers != s.layers || into.experts != s.experts ||
      into.counts.size() != size_t(s.layers) * size_t(s.experts))
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
  // Per token: the gate values of its picks, in the order of its mask bits.
  count_range(routing, r, begin, end, into.counts, only_layers);
  std::vector<char> take(size_t(s.layers), only_layers.empty() ? 1 : 0);
  for (int l : only_layers)
    take[size_t(l)] = 1;
  std::vector<int> layers;  // ascending, each once
  for (int l = 0; l < s.layers; ++l)
    if (take[size_t(l)])
      layers.push_back(l);
  const size_t E = size_t(s.experts), K = size_t(s.top_k), W = size_t(s.words_per_layer);
  // A token's gate values are a row of a per-palette table far larger than the caches, read a layer
  // at a time: the rows of the token kAhead positions on are prefetched (its spans looked up again
  // when it is added: a source's spans may be valid only until its next call).
  constexpr int kAhead = 8;
  auto prefetch        = [&](int t) {
    const auto [prob, score, experts] = gates->token_gates(r, t);
    const uint64_t* masks             = experts.empty() ? routing.token_experts(r, t).data() : nullptr;
    for (int l : layers) {
      if (masks)
        __builtin_prefetch(&masks[size_t(l) * W]);
      else
        __builtin_prefetch(&experts[size_t(l) * K]);
      if (want_prob)
        __builtin_prefetch(&prob[size_t(l) * K]);
      if (want_score)
        __builtin_prefetch(&score[size_t(l) * K]);
    }
  };
  for (int t = begin; t < std::min(end, begin + kAhead); ++t)
    prefetch(t);
  for (int t = begin; t < end; ++t) {
    if (t + kAhead < end)
      prefetch(t + kAhead);
    const auto [prob, score, experts] = gates->token_gates(r, t);
    if (!experts.empty()) {
      // The same sums in the same order (a cell gets its tokens' values one by one, in token order),
      // from the picks' ids: a fixed number of steps a layer.
      for (int l : layers) {
        const size_t j = size_t(l) * K;
        if (want_prob)
          for (size_t k = 0; k < K; ++k)
            into.gate_prob[size_t(l) * E + experts[j + k]] += prob[j + k];
        if (want_score)
          for (size_t k = 0; k < K; ++k)
            into.gate_score[size_t(l) * E + experts[j + k]] += score[j + k];
      }
      continue;
    }
    std::span<const uint64_t> masks = routing.token_experts(r, t);
    for (int l : layers) {
      size_t j = size_t(l) * K, stop = j + K;
      for (size_t w = 0; w < W; ++w)
        for (uint64_t bits = masks[size_t(l) * W + w]; bits && j < stop; bits &= bits - 1, ++j) {
          const size_t cell = size_t(l) * E + w * 64 + size_t(std::countr_zero(bits));
          if (want_prob)
            into.gate_prob[cell] += prob[j];
          if (want_score)
            into.gate_score[cell] += score[j];
        }
    }
  }
}

PromptProfile count_prompt(const GatingSource& routing, const Request& r, ProfileFields fields, const GateSource* gates,
                           std::span<const int> only_layers)
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

std::vector<uint16_t> count_decode(const GatingSource& routing, const Request& r)
{
  const GatingShape& s = routing.shape();
  std::vector<uint16_t> counts(size_t(s.layers) * size_t(s.experts), 0);
  count_range(routing, r, r.prompt_tokens, r.prompt_tokens + r.output_tokens - 1, counts);
  return counts;
}

}  // namespace eldr
