#pragma once
// Where expert choices come from. For a request, token t (prompt tokens 0..P-1, then output tokens
// P..P+O-1; output token P is sampled by prefill, P+1.. by decode steps) picks top_k experts at each
// layer. A source returns them as a bit mask per layer: `words_per_layer` 64-bit words per layer,
// layers back to back, bit e of layer l set iff the token picked expert e there. Masks make the hot
// path (the union over a batch) a run of ORs and popcounts.
//
// "Gating" is the MoE gate's choice of experts per token ("routing" in the config keys and file
// formats, which keep their names); sim/routing is where requests go. GateSource (gate_source.hpp)
// adds the gate values of the experts a GatingSource picked.
#include "sim/workload/request.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace eldr {

struct GatingShape {
  int layers          = 0;
  int experts         = 0;
  int top_k           = 0;
  int words_per_layer = 0;  // ceil(experts / 64)
  int words() const { return layers * words_per_layer; }
};

// One token of one request: position `position` in its prompt-then-output stream.
struct TokenRef {
  const Request* request;
  int position;
};

// The law one token of a request draws its experts from, where tokens are independent given their
// request (generated and uniform routing): it picks expert e at layer l with probability
// p[l][e] = (1 - share) * primary[l][e] + share * secondary[l][e], two tables of layers x experts
// (record frequencies of the palettes the sampled mode draws whole-token records from). Law
// identity is the pair of tables, the share and the window, so equal laws compare equal.
//
// window > 0: the law of window + 1 consecutive tokens of one sequence as one member (a decode step
// verifying `window` speculative tokens, speculative_tokens.hpp): each keeps an expert of the token
// before it with probability `persistence`, so the expected-union kernels multiply in that run's
// miss probability, window_miss(p, window, persistence), instead of 1 - p.
struct TokenLaw {
  const float* primary   = nullptr;
  const float* secondary = nullptr;
  float share            = 0;
  int window             = 0;
  float persistence      = 0;
  // In single precision, as the expected-union kernels compute it.
  float probability(size_t cell) const { return (1.0f - share) * primary[cell] + share * secondary[cell]; }
  bool operator==(const TokenLaw&) const = default;
};

// Prompt positions [from, to) of a request follow `law`, as the tokens of `owner` at those positions
// (two prompts that share a prefix route its tokens as one owner's: the same tokens).
struct PromptRun {
  TokenLaw law;
  const Request* owner;
  int from;
  int to;
};

// One mask that `count` tokens share: a pooled source's record that several tokens drew.
struct MaskCount {
  const uint64_t* masks;
  uint32_t count;
};

// Adds `token`'s choices into a per-layer union (an AVX2 clone where the CPU has it).
void accumulate(std::span<uint64_t> union_masks, std::span<const uint64_t> token);

// ORs the records at pool + offsets[i] (each `words` long) into a union, prefetching a few records
// ahead so the ORs do not wait on the cache: the decode hot loop (an AVX2 clone where the CPU has it).
void or_records(const uint64_t* pool, std::span<const size_t> offsets, size_t words, std::span<uint64_t> union_masks);

// Pooled sources: token i's record is pool[record(i) * words ...].
template <class RecordOf>
void accumulate_records(const uint64_t* pool, size_t words, size_t n, RecordOf record, std::span<uint64_t> union_masks)
{
  thread_local std::vector<size_t> offsets;
  offsets.resize(n);
  for (size_t i = 0; i < n; ++i)
    offsets[i] = record(i) * words;
  or_records(pool, offsets, words, union_masks);
}

class GatingSource {
 public:
  virtual ~GatingSource()                  = default;
  virtual const GatingShape& shape() const = 0;
  // Masks of token `token` of `r`: shape().words() words, valid until the next call on this source.
  virtual std::span<const uint64_t> token_experts(const Request& r, int token) const = 0;
  // ORs every token's choices into `union_masks`: the hot path, once per decode step over the batch.
  // Sources may override it to overlap memory accesses; the result must equal this default.
  virtual void accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const
  {
    for (const TokenRef& t : tokens)
      accumulate(union_masks, token_experts(*t.request, t.position));
  }

  // Optional, for counting (ELDR's profiles): tokens [begin, end) of r as their distinct masks with
  // multiplicities, appended to `out` (the counts sum to end - begin). Pooled sources draw a record
  // per token, and a prompt repeats records, so counting each once with its multiplicity reads fewer
  // records. The masks stay valid as long as the source. False, nothing appended, where the source
  // has no stable records (the caller then goes token by token).
  virtual bool distinct_masks(const Request&, int, int, std::vector<MaskCount>&) const { return false; }
  // Optional, as distinct_masks on `layers` only (in range, each once): each mask is the words of those
  // layers back to back, words_per_layer each in the order listed, from a copy of the records that
  // holds only them. Counting a few layers (a router's mask) then reads a few cache lines a record
  // instead of one per layer. False, nothing appended, where the source keeps no such copy.
  virtual bool distinct_layer_masks(const Request&, int, int, std::span<const int>, std::vector<MaskCount>&) const
  {
    return false;
  }

  // Expected unions (workload.union = expected) need tokens independent given their request, with a
  // known law. Sources that replay real per-token experts have none.
  virtual bool has_token_laws() const { return false; }
  // The law of r's prompt tokens (phase 0) or output tokens (phase 1).
  virtual TokenLaw token_law(const Request& r, int phase) const;
  // Sources with structure below the labels (the generator's sub-topics): r's primary sub-topic
  // within its label (what GatingStatsOptions::subtopic measures locality by).
  virtual bool has_subtopics() const { return false; }
  virtual int primary_subtopic(const Request&) const { return -1; }
  // Appends the runs that prompt tokens [from, to) of r consist of: by default one, r's own.
  virtual void prompt_runs(const Request& r, int from, int to, std::vector<PromptRun>& out) const
  {
    out.push_back({token_law(r, 0), &r, from, to});
  }
};

// Distinct experts per layer of a union; returns their sum over layers.
inline long count_distinct(std::span<const uint64_t> union_masks, const GatingShape& shape, std::span<uint16_t> out)
{
  long total = 0;
  for (int l = 0; l < shape.layers; ++l) {
    int d = 0;
    for (int k = 0; k < shape.words_per_layer; ++k)
      d += std::popcount(union_masks[size_t(l * shape.words_per_layer + k)]);
    out[size_t(l)] = uint16_t(d);
    total += d;
  }
  return total;
}

// True when every bit set in `part` is set in `whole` (masks of one shape).
inline bool contains(std::span<const uint64_t> whole, std::span<const uint64_t> part)
{
  for (size_t i = 0; i < part.size(); ++i)
    if (part[i] & ~whole[i])
      return false;
  return true;
}

// True when every layer's union holds all experts (nothing more can be added).
inline bool union_is_full(std::span<const uint64_t> union_masks, const GatingShape& shape)
{
  for (int l = 0; l < shape.layers; ++l)
    for (int k = 0; k < shape.words_per_layer; ++k) {
      int bits      = std::min(64, shape.experts - 64 * k);
      uint64_t full = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
      if (union_masks[size_t(l * shape.words_per_layer + k)] != full)
        return false;
    }
  return true;
}

}  // namespace eldr
