#include "sim/gating/gating_stats.hpp"
#include "sim/common/rng.hpp"
#include "sim/gating/expected_union.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>

namespace eldr {

double pearson(const std::vector<double>& x, const std::vector<double>& y)
{
  const size_t n = x.size();
  if (n < 2)
    return 0;
  double mx  = std::accumulate(x.begin(), x.end(), 0.0) / double(n);
  double my  = std::accumulate(y.begin(), y.end(), 0.0) / double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

static std::vector<double> ranks(const std::vector<double>& v)
{
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]])
      ++j;
    double avg = (double(i) + double(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k)
      r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y)
{
  return pearson(ranks(x), ranks(y));
}

double js_divergence(std::span<const double> a, std::span<const double> b)
{
  double sa = 0, sb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sa += a[i];
    sb += b[i];
  }
  if (sa <= 0 || sb <= 0)
    return 0;
  double js = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double p = a[i] / sa, q = b[i] / sb, m = (p + q) / 2;
    if (p > 0)
      js += 0.5 * p * std::log2(p / m);
    if (q > 0)
      js += 0.5 * q * std::log2(q / m);
  }
  return js;
}

namespace {

// Adds a token's picks to per-(layer, expert) counts.
void add_counts(std::span<const uint64_t> masks, const GatingShape& shape, std::vector<float>& counts)
{
  for (int l = 0; l < shape.layers; ++l)
    for (int w = 0; w < shape.words_per_layer; ++w) {
      uint64_t bits = masks[size_t(l * shape.words_per_layer + w)];
      while (bits) {
        int e = std::countr_zero(bits);
        counts[size_t(l) * shape.experts + size_t(w * 64 + e)] += 1.f;
        bits &= bits - 1;
      }
    }
}

// Adds a token's gate values (one per pick, in the order of the set bits) to per-(layer, expert) sums.
void add_gates(std::span<const uint64_t> masks, const GatingShape& shape, std::span<const float> prob,
               std::vector<float>& sums)
{
  for (int l = 0; l < shape.layers; ++l) {
    size_t j = size_t(l) * size_t(shape.top_k), end = j + size_t(shape.top_k);
    for (int w = 0; w < shape.words_per_layer; ++w)
      for (uint64_t bits = masks[size_t(l * shape.words_per_layer + w)]; bits && j < end; bits &= bits - 1)
        sums[size_t(l) * shape.experts + size_t(w * 64 + std::countr_zero(bits))] += prob[j++];
  }
}

double cosine(const std::vector<double>& a, const std::vector<double>& b)
{
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

}  // namespace

GatingStats measure_routing(const std::vector<Request>& pool, const std::vector<Request>& calibration,
                            const GatingSource& source, const GatingStatsOptions& opt)
{
  const GatingShape& shape = source.shape();
  const size_t cells       = size_t(shape.layers) * shape.experts;
  Rng rng(opt.seed, "stats.routing");
  GatingStats st;
  if (pool.empty())
    return st;

  // Sample requests.
  std::vector<const Request*> sample;
  for (int i = 0; i < opt.requests; ++i)
    sample.push_back(&pool[rng.below(pool.size())]);
  st.sampled_requests = int(sample.size());

  // Per-request prefill and decode counts.
  std::vector<std::vector<float>> pre(sample.size(), std::vector<float>(cells, 0.f));
  std::vector<std::vector<float>> dec(sample.size(), std::vector<float>(cells, 0.f));
  std::vector<std::vector<float>> gate(opt.token_gates ? sample.size() : 0, std::vector<float>(cells, 0.f));
  std::vector<double> layer_totals(cells, 0.0);
  for (size_t i = 0; i < sample.size(); ++i) {
    const Request& r = *sample[i];
    // Positions that run through the model: the prompt, and every output token but the last.
    for (int t = 0; t < r.prompt_tokens + r.output_tokens - 1; ++t)
      add_counts(source.token_experts(r, t), shape, t < r.prompt_tokens ? pre[i] : dec[i]);
    if (opt.token_gates)
      for (int t = 0; t < r.prompt_tokens; ++t) {
        add_gates(source.token_experts(r, t), shape, opt.token_gates(r, t), gate[i]);
      }
    for (size_t c = 0; c < cells; ++c)
      layer_totals[c] += pre[i][c] + dec[i][c];
  }

  // Prefill vs decode, per request.
  double psum = 0;
  for (size_t i = 0; i < sample.size(); ++i)
    psum +=
        pearson(std::vector<double>(pre[i].begin(), pre[i].end()), std::vector<double>(dec[i].begin(), dec[i].end()));
  st.pearson_prefill_decode = psum / double(sample.size());

  // Gate value per pick, per (label, layer, expert) cell, over the sampled prompts.
  if (opt.token_gates) {
    std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_label;  // label -> (gate sums, picks)
    for (size_t i = 0; i < sample.size(); ++i) {
      auto& [g, n] = by_label[sample[i]->label];
      g.resize(cells, 0.0), n.resize(cells, 0.0);
      for (size_t c = 0; c < cells; ++c)
        g[c] += gate[i][c], n[c] += pre[i][c];
    }
    std::vector<double> per_pick;
    for (const auto& [label, gn] : by_label)
      for (size_t c = 0; c < cells; ++c)
        if (gn.second[c] >= GatingStats::kMinGateCellPicks)
          per_pick.push_back(gn.first[c] / gn.second[c]);
    if (!per_pick.empty()) {
      std::sort(per_pick.begin(), per_pick.end());
      auto at             = [&](double q) { return per_pick[size_t(q * double(per_pick.size() - 1) + 0.5)]; };
      st.gate_per_pick_p5 = at(0.05), st.gate_per_pick_p50 = at(0.5), st.gate_per_pick_p95 = at(0.95);
    }
  }

  // Divergence between labels, per layer.
  std::map<int, std::vector<double>> label_counts;
  for (size_t i = 0; i < sample.size(); ++i) {
    auto& v = label_counts[sample[i]->label];
    v.resize(cells, 0.0);
    for (size_t c = 0; c < cells; ++c)
      v[c] += pre[i][c] + dec[i][c];
  }
  if (label_counts.size() >= 2) {
    std::vector<double> per_layer(size_t(shape.layers), 0.0);
    int pairs = 0;
    for (auto a = label_counts.begin(); a != label_counts.end(); ++a)
      for (auto b = std::next(a); b != label_counts.end(); ++b, ++pairs)
        for (int l = 0; l < shape.layers; ++l) {
          const size_t off = size_t(l) * shape.experts;
          per_layer[size_t(l)] += js_divergence({a->second.data() + off, size_t(shape.experts)},
                                                {b->second.data() + off, size_t(shape.experts)});
        }
    for (double& x : per_layer)
      x /= pairs;
    auto [lo, hi]         = std::minmax_element(per_layer.begin(), per_layer.end());
    st.label_js_mean      = std::accumulate(per_layer.begin(), per_layer.end(), 0.0) / shape.layers;
    st.label_js_min_layer = *lo;
    st.label_js_max_layer = *hi;
    st.label_js_max_at    = int(hi - per_layer.begin());
  }

  // Popularity skew.
  st.top_share_min     = 1;
  st.top_share_uniform = 1.0 / shape.experts;
  for (int l = 0; l < shape.layers; ++l) {
    const double* row = &layer_totals[size_t(l) * shape.experts];
    double total      = std::accumulate(row, row + shape.experts, 0.0);
    double share      = total > 0 ? *std::max_element(row, row + shape.experts) / total : 0;
    st.top_share_mean += share / shape.layers;
    st.top_share_min = std::min(st.top_share_min, share);
    st.top_share_max = std::max(st.top_share_max, share);
  }

  // IDF over the calibration prompts: ln((N+1)/(df+1)).
  const std::vector<Request>& idf_set = calibration.empty() ? pool : calibration;
  std::vector<double> df(cells, 0.0);
  std::vector<uint64_t> seen(size_t(shape.words()));
  for (const Request& r : idf_set) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int t = 0; t < r.prompt_tokens; ++t)
      accumulate(seen, source.token_experts(r, t));
    for (int l = 0; l < shape.layers; ++l)
      for (int e = 0; e < shape.experts; ++e)
        if (seen[size_t(l * shape.words_per_layer + e / 64)] >> (e % 64) & 1)
          df[size_t(l) * shape.experts + e] += 1;
  }
  std::vector<double> idf(cells);
  for (size_t c = 0; c < cells; ++c)
    idf[c] = std::log((double(idf_set.size()) + 1) / (df[c] + 1));

  // Signatures per variant and decode profiles.
  auto signature = [&](size_t i, int variant) {
    std::vector<double> v(cells);
    for (size_t c = 0; c < cells; ++c) {
      double x = pre[i][c];
      v[c]     = variant == 0 ? x : variant == 1 ? x * idf[c] : variant == 2 ? std::sqrt(x) : (x > 0 ? 1.0 : 0.0);
    }
    return v;
  };
  const int variants = opt.token_gates ? 5 : 4;  // the fifth: summed gate probabilities
  std::vector<std::vector<std::vector<double>>> sig(static_cast<size_t>(variants));
  for (int v = 0; v < 4; ++v)
    for (size_t i = 0; i < sample.size(); ++i)
      sig[size_t(v)].push_back(signature(i, v));
  for (size_t i = 0; i < gate.size(); ++i)
    sig[4].emplace_back(gate[i].begin(), gate[i].end());
  std::vector<std::vector<double>> prof;
  for (size_t i = 0; i < sample.size(); ++i)
    prof.emplace_back(dec[i].begin(), dec[i].end());
  std::vector<double> target;
  std::vector<std::vector<double>> sims(static_cast<size_t>(variants));
  for (int p = 0; p < opt.pairs; ++p) {
    size_t a = rng.below(sample.size()), b = rng.below(sample.size() - 1);
    if (b >= a)
      ++b;
    target.push_back(cosine(prof[a], prof[b]));
    for (int v = 0; v < variants; ++v)
      sims[size_t(v)].push_back(cosine(sig[size_t(v)][a], sig[size_t(v)][b]));
  }
  st.spearman_counts     = spearman(sims[0], target);
  st.spearman_counts_idf = spearman(sims[1], target);
  st.spearman_sqrt       = spearman(sims[2], target);
  st.spearman_binary     = spearman(sims[3], target);
  if (opt.token_gates) {
    st.spearman_gate_prob = spearman(sims[4], target);
    st.has_gate_prob      = true;
  }

  // Batch locality: one random output token per sequence, batches of one label vs of the whole mix.
  const bool laws = opt.subtopic && source.has_token_laws();
  std::map<int, std::vector<const Request*>> by_label;
  std::map<std::pair<int, int>, std::vector<const Request*>> by_subtopic;
  for (const Request& r : pool) {
    by_label[r.label].push_back(&r);
    if (laws)
      by_subtopic[{int(r.label), opt.subtopic(r)}].push_back(&r);
  }
  std::vector<uint64_t> u(size_t(shape.words()));
  std::vector<uint16_t> tokens(size_t(shape.layers) * size_t(shape.experts));  // per (layer, expert)
  const int tile = std::max(1, opt.tile_tokens);
  // A batch's distinct experts and fused-MoE tiles, each per layer.
  auto batch_counts = [&](auto pick, int size) {
    std::fill(u.begin(), u.end(), 0);
    std::fill(tokens.begin(), tokens.end(), 0);
    for (int k = 0; k < size; ++k) {
      const Request* r            = pick();
      int t                       = r->prompt_tokens + int(rng.below(uint64_t(r->output_tokens - 1)));
      std::span<const uint64_t> m = source.token_experts(*r, t);
      accumulate(u, m);
      for (int l = 0; l < shape.layers; ++l)
        for (int w = 0; w < shape.words_per_layer; ++w)
          for (uint64_t bits = m[size_t(l * shape.words_per_layer + w)]; bits; bits &= bits - 1)
            ++tokens[size_t(l) * size_t(shape.experts) + size_t(w * 64 + std::countr_zero(bits))];
    }
    std::vector<uint16_t> d(size_t(shape.layers));
    long tiles = 0;
    for (uint16_t n : tokens)
      tiles += (n + tile - 1) / tile;
    return std::pair{double(count_distinct(u, shape, d)) / shape.layers, double(tiles) / shape.layers};
  };
  // Sub-topic batches draw from a stream of their own: the label statistics do not move with them.
  Rng sub_rng(opt.seed, "stats.routing.subtopic");
  ExpectedUnion expected(shape.layers, shape.experts);
  std::vector<double> per_layer(size_t(shape.layers));
  auto expected_distinct = [&](const std::vector<const Request*>& group, int size) {
    expected.clear();
    for (int k = 0; k < size; ++k)
      expected.join(source.token_law(*group[sub_rng.below(group.size())], 1));
    return expected.distinct(per_layer) / shape.layers;
  };
  for (int size : opt.batch_sizes) {
    BatchLocality b;
    b.batch = size;
    for (int k = 0; k < opt.batches; ++k) {
      // The label of a same-label batch follows the traffic mix (a random request's label).
      const auto& members             = by_label[pool[rng.below(pool.size())].label];
      const auto [same, same_tiles]   = batch_counts([&] { return members[rng.below(members.size())]; }, size);
      const auto [mixed, mixed_tiles] = batch_counts([&] { return &pool[rng.below(pool.size())]; }, size);
      b.distinct_same += same;
      b.distinct_mixed += mixed;
      b.tiles_same += same_tiles;
      b.tiles_mixed += mixed_tiles;
      if (laws) {
        // The group, label or (label, sub-topic), of a request drawn from the traffic mix.
        const Request& r = pool[sub_rng.below(pool.size())];
        b.expected_same += expected_distinct(by_label[r.label], size);
        b.expected_subtopic += expected_distinct(by_subtopic[{int(r.label), opt.subtopic(r)}], size);
      }
    }
    b.distinct_same /= opt.batches;
    b.distinct_mixed /= opt.batches;
    b.tiles_same /= opt.batches;
    b.tiles_mixed /= opt.batches;
    b.expected_same /= opt.batches;
    b.expected_subtopic /= opt.batches;
    st.locality.push_back(b);
  }
  return st;
}

}  // namespace eldr
