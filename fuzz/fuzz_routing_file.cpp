// A binary routing file (routing.bin): header, index and every record's ids and gates.
#include "fuzz_common.hpp"
#include "sim/trace/gating_file.hpp"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  const std::string path = eldr::fuzz::write_input("routing.bin", data, size);
  return eldr::fuzz::expect_clean([&] {
    const eldr::GatingFile f = eldr::GatingFile::load(path);
    // Read back what the index promises (bounded: a valid header may describe a large file).
    const auto& h = f.header();
    std::vector<uint16_t> ids(size_t(h.top_k));
    std::vector<float> gates(size_t(h.top_k));
    for (size_t r = 0; r < f.records() && r < 64; ++r)
      for (uint64_t t = 0; t < f.record(r).tokens() && t < 64; ++t)
        for (int l = 0; l < h.layers; ++l) {
          f.ids(r, t, l, ids);
          if (h.gates)
            f.gates(r, t, l, gates);
        }
  });
}
