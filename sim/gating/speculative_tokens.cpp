#include "sim/gating/speculative_tokens.hpp"
#include "sim/common/rng.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace eldr {

namespace {

// A uniform in [0, 1) of draw (a, b, c) of stream `seed`: counter-based, so no draw depends on the
// order of the others or shifts any other stream.
double uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
  const uint64_t h = splitmix64(seed ^ splitmix64(a ^ splitmix64(b ^ splitmix64(c))));
  return double(h >> 11) * 0x1.0p-53;
}

}  // namespace

double window_miss(double p, int window, double persistence)
{
  const double one   = 1 - p;
  const double fresh = one > 0 ? std::min(1.0, p * (1 - persistence) / one) : 1.0;
  return one * std::pow(1 - fresh, window);
}

TokenLaw window_law(TokenLaw law, int window, double persistence)
{
  law.window      = window;
  law.persistence = window > 0 ? float(persistence) : 0.f;
  return law;
}

std::vector<uint32_t> hot_cells(const TokenLaw& law, size_t cells, double persistence)
{
  std::vector<uint32_t> hot;
  for (size_t c = 0; c < cells; ++c)
    if (law.probability(c) > persistence)
      hot.push_back(uint32_t(c));
  return hot;
}

void window_masks(const GatingSource& source, const Request& r, int position, int window, double persistence,
                  uint64_t seed, std::span<const uint32_t> hot, std::vector<uint64_t>& out)
{
  const GatingShape& shape = source.shape();
  const size_t words       = size_t(shape.words());
  const size_t first       = out.size();
  const bool laws          = window > 0 && source.has_token_laws();
  const TokenLaw law       = laws ? source.token_law(r, 1) : TokenLaw{};
  // A replayed request has the tokens decode feeds, up to position P + output - 2 (the last output
  // token is never fed): drafts past it repeat that one.
  const int last = laws ? position + window : std::max(position, r.prompt_tokens + r.output_tokens - 2);
  thread_local std::vector<uint64_t> added;
  for (int j = 0; j <= window; ++j) {
    std::span<const uint64_t> m = source.token_experts(r, std::min(position + j, last));
    out.insert(out.end(), m.begin(), m.end());
    if (j == 0 || !laws)
      continue;
    uint64_t* cur        = &out[first + size_t(j) * words];
    const uint64_t* prev = cur - words;
    const uint64_t token = uint64_t(r.id) << 32 | uint32_t(position + j);
    added.assign(words, 0);
    for (int l = 0; l < shape.layers; ++l)
      for (int w = 0; w < shape.words_per_layer; ++w) {
        const size_t i = size_t(l * shape.words_per_layer + w);
        uint64_t next  = 0;
        for (uint64_t b = prev[i]; b != 0; b &= b - 1) {
          const size_t cell = size_t(l) * size_t(shape.experts) + size_t(64 * w + std::countr_zero(b));
          if (uniform(seed, token, cell, 0) < persistence)
            next |= b & -b;
        }
        for (uint64_t b = cur[i] & ~prev[i]; b != 0; b &= b - 1) {
          const size_t cell = size_t(l) * size_t(shape.experts) + size_t(64 * w + std::countr_zero(b));
          const double p    = law.probability(cell);
          if (p >= 1 || uniform(seed, token, cell, 1) * (1 - p) < 1 - persistence)
            next |= b & -b;
        }
        added[i] = next;
      }
    // Where f > p (p > persistence) the own record's p falls short: an expert that neither token
    // picked is added with (f - p) / (1 - p), so P(picked | not before) = p + (1 - p) (f - p) / (1 - p) = f.
    for (uint32_t cell : hot) {
      const int l = int(cell) / shape.experts, e = int(cell) % shape.experts;
      const size_t i   = size_t(l * shape.words_per_layer + e / 64);
      const uint64_t b = uint64_t(1) << (e % 64);
      if ((prev[i] | cur[i]) & b)
        continue;
      const double p = law.probability(cell);
      const double f = std::min(1.0, p * (1 - persistence) / (1 - p));
      if (uniform(seed, token, cell, 3) * (1 - p) < f - p)
        added[i] |= b;
    }
    std::copy(added.begin(), added.end(), cur);
  }
}

int accepted_drafts(uint64_t seed, uint32_t request, int generated, std::span<const double> acceptance)
{
  const double u = uniform(seed, request, uint64_t(generated), 2);
  double reach   = 1;  // P(a >= i)
  int a          = 0;
  for (double alpha : acceptance) {
    reach *= alpha;
    if (u >= reach)
      break;
    ++a;
  }
  return a;
}

double expected_emitted(std::span<const double> acceptance)
{
  double reach = 1, mean = 1;
  for (double alpha : acceptance)
    mean += reach *= alpha;
  return mean;
}

}  // namespace eldr
