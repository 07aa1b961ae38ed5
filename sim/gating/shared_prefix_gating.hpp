#pragma once
// Shared prompt prefixes route alike. A routing source draws a token's experts from its request's
// own state (its seed, its sub-topics), so two requests that share a system prompt, or the first
// turns of a conversation, would route their common tokens differently. This source wraps another
// and routes a prompt token that lies in a block shared with an earlier request (equal prefix hash:
// request.hpp) as that earlier request's token at the same position: the block's first holder owns
// its routing. Then identical prefixes activate identical experts wherever they are computed, which
// is what makes a cached block's expert counts (ELDR's signature cache) equal to recomputing them.
// The chat template's tokens (Workload::template_tokens) route as the template's own request
// (Workload::template_request), whose experts are no label's.
// Output tokens and unshared prompt tokens pass through unchanged.
#include "sim/gating/gating_source.hpp"

#include <memory>
#include <vector>

namespace eldr {

class SharedPrefixGating : public GatingSource {
 public:
  // `w` (its requests and hashes) must outlive this source; calibration requests count as earlier
  // than served ones.
  SharedPrefixGating(std::unique_ptr<GatingSource> inner, const Workload& w);

  const GatingShape& shape() const override { return inner_->shape(); }
  std::span<const uint64_t> token_experts(const Request& r, int token) const override;
  void accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const override;
  // Segment by segment, each as its owner's tokens (a record two segments share is listed twice).
  bool distinct_masks(const Request& r, int begin, int end, std::vector<MaskCount>& out) const override;
  bool distinct_layer_masks(const Request& r, int begin, int end, std::span<const int> layers,
                            std::vector<MaskCount>& out) const override;
  bool has_token_laws() const override { return inner_->has_token_laws(); }
  TokenLaw token_law(const Request& r, int phase) const override { return inner_->token_law(r, phase); }
  bool has_subtopics() const override { return inner_->has_subtopics(); }
  int primary_subtopic(const Request& r) const override { return inner_->primary_subtopic(r); }
  // A shared segment's tokens follow its owner's prompt law.
  void prompt_runs(const Request& r, int from, int to, std::vector<PromptRun>& out) const override;

  const GatingSource& inner() const { return *inner_; }
  // The request whose routing token `token` of `r` takes (r itself unless it is a shared prompt token).
  const Request& owner(const Request& r, int token) const;
  // Prompt tokens of served and calibration requests routed as another request's.
  long shared_tokens() const { return shared_tokens_; }

 private:
  struct Segment {
    int end;               // tokens [previous end, end) of the prompt
    const Request* owner;  // route as this request's
  };
  struct Span {
    uint32_t begin = 0, count = 0;  // into segments_; count 0: the request owns all its tokens
  };
  // distinct_masks' walk over the segments, `inner(owner, begin, end)` asking the inner source.
  template <class Inner>
  bool distinct_by_segment(const Request& r, int begin, int end, std::vector<MaskCount>& out, Inner inner) const;
  const Span& span_of(const Request& r) const;

  std::unique_ptr<GatingSource> inner_;
  const Workload& w_;
  std::vector<Segment> segments_;
  std::vector<Span> served_, calibration_;
  long shared_tokens_ = 0;
};

}  // namespace eldr
