#pragma once
// Helpers of the trace tests: scratch directories (tests/support/scratch_dir.hpp) and hand-written trace files.
#include "sim/trace/gating_file.hpp"
#include "tests/support/scratch_dir.hpp"

#include <fstream>
#include <string>
#include <vector>

namespace eldr::test {

inline void write_text(const std::string& path, const std::string& text)
{
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// A manifest with the given model ("null" or a JSON object) and routing file ("null" or a quoted name).
inline std::string manifest_json(const std::string& model = "null", const std::string& routing = "null",
                                 const std::string& labels = R"(["code", "math"])", const std::string& extra = "")
{
  return R"({"format": "eldr-trace", "version": 1, "model": )" + model + R"(, "labels": )" + labels +
         R"(, "routing_file": )" + routing + extra + R"(, "source": "unit test"})";
}

// Deterministic ids for (record, token, layer): every other expert from a rotating start (distinct
// while 2 top_k <= experts).
inline void synthetic_ids(int record, int token, int layer, int experts, int top_k, uint16_t* out)
{
  const int start = (record * 7 + token * 3 + layer * 5) % experts;
  for (int j = 0; j < top_k; ++j)
    out[j] = uint16_t((start + j * 2) % experts);
}

// A routing file of `lengths` = (prompt, output) per record, ids from synthetic_ids.
inline void write_synthetic_routing(const std::string& path, int layers, int experts, int top_k,
                                    const std::vector<std::pair<int, int>>& lengths)
{
  GatingWriter w(path, layers, experts, top_k, false);
  std::vector<uint16_t> ids(size_t(layers) * size_t(top_k));
  for (size_t r = 0; r < lengths.size(); ++r) {
    w.begin_record(uint32_t(lengths[r].first), uint32_t(lengths[r].second));
    for (int t = 0; t < lengths[r].first + lengths[r].second; ++t) {
      for (int l = 0; l < layers; ++l)
        synthetic_ids(int(r), t, l, experts, top_k, &ids[size_t(l) * size_t(top_k)]);
      w.add_token(ids);
    }
    w.end_record();
  }
  w.close();
}

}  // namespace eldr::test
