#include "sim/gating/replay_gating.hpp"
#include "sim/common/input_error.hpp"
#include "sim/config/experiment.hpp"
#include "sim/trace/trace_format.hpp"
#include "sim/workload/trace_workload.hpp"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <stdexcept>

namespace eldr {

ReplayGating::ReplayGating(const std::string& routing_file) : ReplayGating(GatingFile::load(routing_file)) {}

ReplayGating::ReplayGating(const GatingFile& file)
{
  const GatingHeader& h = file.header();
  if (!file.has_data())
    throw std::logic_error("ReplayGating needs a GatingFile read with load(), not load_index()");
  shape_.layers          = h.layers;
  shape_.experts         = h.experts;
  shape_.top_k           = h.top_k;
  shape_.words_per_layer = (h.experts + 63) / 64;
  const size_t words     = size_t(shape_.words());
  const size_t group     = size_t(h.layers) * size_t(h.top_k);

  uint64_t tokens = 0;
  record_start_.reserve(file.records());
  for (size_t r = 0; r < file.records(); ++r) {
    record_start_.push_back(tokens);
    record_prompt_.push_back(file.record(r).prompt_tokens);
    record_output_.push_back(file.record(r).output_tokens);
    tokens += file.record(r).tokens();
  }
  masks_.assign(size_t(tokens) * words, 0);
  if (h.gates)
    gates_.assign(size_t(tokens) * group, 0.0f);

  std::vector<uint16_t> ids(size_t(h.top_k));
  std::vector<float> g(size_t(h.top_k));
  std::vector<int> order(size_t(h.top_k));
  for (size_t r = 0; r < file.records(); ++r)
    for (uint64_t t = 0; t < file.record(r).tokens(); ++t) {
      const size_t token = size_t(record_start_[r] + t);
      uint64_t* mask     = &masks_[token * words];
      for (int l = 0; l < h.layers; ++l) {
        file.ids(r, t, l, ids);
        for (uint16_t e : ids)
          mask[size_t(l) * size_t(shape_.words_per_layer) + e / 64] |= uint64_t(1) << (e % 64);
        if (h.gates) {
          file.gates(r, t, l, g);
          for (int j = 0; j < h.top_k; ++j)
            order[size_t(j)] = j;
          std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[size_t(a)] < ids[size_t(b)]; });
          float* dst = &gates_[token * group + size_t(l) * size_t(h.top_k)];
          for (int j = 0; j < h.top_k; ++j)
            dst[j] = g[size_t(order[size_t(j)])];
        }
      }
    }
}

size_t ReplayGating::token_index(const Request& r, int token) const
{
  const uint32_t rec = uint32_t(r.routing_record);
  const bool prompt  = token < r.prompt_tokens;
  if (r.routing_record < 0 || rec >= record_start_.size() || token < 0 ||
      (prompt ? uint32_t(token) >= record_prompt_[rec]
              : token >= r.prompt_tokens + r.output_tokens || uint32_t(token - r.prompt_tokens) >= record_output_[rec]))
    throw std::out_of_range("replayed routing: request " + std::to_string(r.id) + " (record " +
                            std::to_string(r.routing_record) + ") has no token " + std::to_string(token));
  const uint64_t t = prompt ? uint64_t(token) : record_prompt_[rec] + uint64_t(token - r.prompt_tokens);
  return size_t(record_start_[rec] + t);
}

std::span<const uint64_t> ReplayGating::token_experts(const Request& r, int token) const
{
  const size_t words = size_t(shape_.words());
  return {&masks_[token_index(r, token) * words], words};
}

void ReplayGating::accumulate_tokens(std::span<const TokenRef> tokens, std::span<uint64_t> union_masks) const
{
  // Tokens of different requests lie far apart: prefetch a few ahead so the ORs do not wait on memory.
  constexpr size_t kAhead = 4;
  const size_t words      = size_t(shape_.words());
  const size_t n          = tokens.size();
  for (size_t i = 0; i < std::min(n, kAhead); ++i)
    __builtin_prefetch(&masks_[token_index(*tokens[i].request, tokens[i].position) * words]);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const uint64_t* next = &masks_[token_index(*tokens[i + kAhead].request, tokens[i + kAhead].position) * words];
      for (size_t line = 0; line < words; line += 8)
        __builtin_prefetch(next + line);
    }
    accumulate(union_masks, {&masks_[token_index(*tokens[i].request, tokens[i].position) * words], words});
  }
}

void ReplayGating::token_ids(const Request& r, int token, int layer, std::span<uint16_t> out) const
{
  const uint64_t* mask =
      &masks_[token_index(r, token) * size_t(shape_.words()) + size_t(layer) * size_t(shape_.words_per_layer)];
  size_t j = 0;
  for (int w = 0; w < shape_.words_per_layer; ++w)
    for (uint64_t bits = mask[w]; bits && j < out.size(); bits &= bits - 1)
      out[j++] = uint16_t(w * 64 + std::countr_zero(bits));
}

std::span<const float> ReplayGating::token_gates(const Request& r, int token) const
{
  if (gates_.empty())
    return {};
  const size_t group = size_t(shape_.layers) * size_t(shape_.top_k);
  return {&gates_[token_index(r, token) * group], group};
}

void ReplayGating::check_request(const Request& r, const std::string& file, const std::string& field) const
{
  if (r.routing_record < 0)
    throw InputError(file, field, "the request has no routing record");
  const size_t rec = size_t(r.routing_record);
  if (rec >= record_start_.size())
    throw InputError(file, field,
                     "routing record " + std::to_string(rec) + " does not exist (" +
                         std::to_string(record_start_.size()) + " records)");
  // The simulator feeds prompt tokens and every output token but the last (which is only sampled).
  if (uint32_t(r.prompt_tokens) > record_prompt_[rec] || uint32_t(r.output_tokens - 1) > record_output_[rec])
    throw InputError(file, field,
                     "the request's " + std::to_string(r.prompt_tokens) + " prompt + " +
                         std::to_string(r.output_tokens) + " output tokens exceed routing record " +
                         std::to_string(rec) + "'s " + std::to_string(record_prompt_[rec]) + " + " +
                         std::to_string(record_output_[rec]) + " (+ 1: the last output token needs no routing)");
}

ReplayGating load_replay_gating(const Experiment& x, const Workload& w)
{
  Trace t;
  t.dir      = x.workload.trace_dir;
  t.manifest = read_trace_manifest(t.manifest_path());
  if (t.manifest.routing_file.empty())
    throw InputError(x.config_file, "workload.routing",
                     "'trace' replays the trace's routing file, but " + t.manifest_path() +
                         " has none (routing_file is null): use \"uniform\" or \"generated\"");
  check_trace_model(t.manifest, t.manifest_path(), x);
  ReplayGating routing = [&] {  // the file's buffer goes once the masks are built
    const GatingFile file = GatingFile::load(t.routing_path());
    check_routing_checksum(t.manifest, t.routing_path(), file.checksum());
    return ReplayGating(file);
  }();
  const GatingShape& s = routing.shape();
  if (s.layers != t.manifest.model->layers || s.experts != t.manifest.model->experts ||
      s.top_k != t.manifest.model->top_k)
    throw InputError(t.routing_path(), "header",
                     "layers " + std::to_string(s.layers) + ", experts " + std::to_string(s.experts) + ", top_k " +
                         std::to_string(s.top_k) + " differ from the model in " + t.manifest_path());
  for (const Request& r : w.requests)
    routing.check_request(r, t.requests_path(), "request " + std::to_string(r.id) + " (served)");
  for (const Request& r : w.calibration)
    routing.check_request(r, t.requests_path(), "request " + std::to_string(r.id) + " (calibration)");
  return routing;
}

}  // namespace eldr
