#include "sim/gating/shared_prefix_gating.hpp"

#include <algorithm>
#include <unordered_map>

namespace eldr {

SharedPrefixGating::SharedPrefixGating(std::unique_ptr<GatingSource> inner, const Workload& w)
    : inner_(std::move(inner)), w_(w), served_(w.requests.size()), calibration_(w.calibration.size())
{
  const int block     = w.prefix_block_tokens;
  const Request* tmpl = w.template_owner();
  std::unordered_map<uint64_t, const Request*> first_holder;
  auto scan = [&](const Request& r, Span& span) {
    const auto hashes = w.hashes(r);
    span.begin        = uint32_t(segments_.size());
    // The chat template's tokens first: the template's own (every prompt holds them all).
    const int head = tmpl ? std::min(w.template_tokens, r.prompt_tokens) : 0;
    if (head > 0) {
      segments_.push_back({head, tmpl});
      shared_tokens_ += head;
    }
    for (size_t j = 0; j < hashes.size(); ++j) {
      const Request* owner = first_holder.try_emplace(hashes[j], &r).first->second;
      const int begin      = std::max(int(j) * block, head);
      const int end        = std::min(int(j + 1) * block, r.prompt_tokens);
      if (end <= begin)
        continue;  // among the template's tokens
      // The owner's own tokens at these positions must be prompt tokens too (equal hashes promise it;
      // a trace that breaks the promise keeps its own routing there).
      if (owner->prompt_tokens < end)
        owner = &r;
      if (owner != &r)
        shared_tokens_ += end - begin;
      if (segments_.size() > span.begin && segments_.back().owner == owner)
        segments_.back().end = end;
      else
        segments_.push_back({end, owner});
    }
    const bool own_all =
        std::all_of(segments_.begin() + span.begin, segments_.end(), [&](const Segment& s) { return s.owner == &r; });
    if (own_all)
      segments_.resize(span.begin);
    span.count = uint32_t(segments_.size()) - span.begin;
  };
  for (size_t i = 0; i < w.calibration.size(); ++i)
    scan(w.calibration[i], calibration_[i]);
  for (size_t i = 0; i < w.requests.size(); ++i)
    scan(w.requests[i], served_[i]);
}

const SharedPrefixGating::Span& SharedPrefixGating::span_of(const Request& r) const
{
  static const Span own_all;
  auto in = [&r](const std::vector<Request>& v) { return !v.empty() && &r >= v.data() && &r < v.data() + v.size(); };
  if (in(w_.requests))
    return served_[size_t(&r - w_.requests.data())];
  if (in(w_.calibration))
    return calibration_[size_t(&r - w_.calibration.data())];
  return own_all;  // a request of no workload (a copy): nothing of it is shared
}

const Request& SharedPrefixGating::owner(const Request& r, int token) const
{
  if (token >= r.prompt_tokens)
    return r;
  const Span& s = span_of(r);
  for (uint32_t i = s.begin; i < s.begin + s.count; ++i)
    if (token < segments_[i].end)
      return *segments_[i].owner;
  return r;
}

void SharedPrefixGating::prompt_runs(const Request& r, int from, int to, std::vector<PromptRun>& out) const
{
  const Span& s = span_of(r);
  for (uint32_t i = s.begin; i < s.begin + s.count && from < to; ++i) {
    const Segment& seg = segments_[i];
    const int end      = std::min(seg.end, to);
    if (end > from)
      out.push_back({inner_->token_law(*seg.owner, 0), seg.owner, from, end});
    from = std::max(from, end);
  }
  if (from < to)
    out.push_back({inner_->token_law(r, 0), &r, from, to});
}

template <class Inner> bool SharedPrefixGating::distinct_by_segment(const Request& r, int begin, int end,
                                                                    std::vector<MaskCount>& out, Inner inner) const
{
  const size_t before = out.size();
  const Span& s       = span_of(r);
  for (uint32_t i = s.begin; i < s.begin + s.count && begin < end; ++i) {
    const Segment& seg = segments_[i];
    const int stop     = std::min(seg.end, end);
    if (stop > begin && !inner(*seg.owner, begin, stop)) {
      out.resize(before);
      return false;
    }
    begin = std::max(begin, stop);
  }
  if (begin < end && !inner(r, begin, end)) {
    out.resize(before);
    return false;
  }
  return true;
}

bool SharedPrefixGating::distinct_masks(const Request& r, int begin, int end, std::vector<MaskCount>& out) const
{
  return distinct_by_segment(r, begin, end, out,
                             [&](const Request& o, int b, int e) { return inner_->distinct_masks(o, b, e, out); });
}

bool SharedPrefixGating::distinct_layer_masks(const Request& r, int begin, int end, std::span<const int> layers,
                                              std::vector<MaskCount>& out) const
{
  return distinct_by_segment(r, begin, end, out, [&](const Request& o, int b, int e) {
    return inner_->distinct_layer_masks(o, b, e, layers, out);
  });
}

std::span<const uint64_t> SharedPrefixGating::token_experts(const Request& r, int token) const
{
  return inner_->token_experts(owner(r, token), token);
}

void SharedPrefixGating::accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const
{
  // Decode steps run output tokens only: hand them over as they are.
  const bool any_prompt = std::any_of(tokens.begin(), tokens.end(),
                                      [](const TokenRef& t) { return t.position < t.request->prompt_tokens; });
  if (!any_prompt)
    return inner_->accumulate_tokens(tokens, union_masks);
  thread_local std::vector<TokenRef> mapped;
  mapped.clear();
  for (const TokenRef& t : tokens)
    mapped.push_back({&owner(*t.request, t.position), t.position});
  inner_->accumulate_tokens(mapped, union_masks);
}

}  // namespace eldr
