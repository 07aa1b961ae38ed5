#pragma once
// The routed-expert arrays a vLLM server started with --enable-return-routed-experts returns with a
// completion (`prompt_routed_experts`, `routed_experts`): [tokens, moe_layers, top_k] expert ids,
// int16 on the server. Depending on the version and the client an array arrives either as nested
// JSON lists or as a base64 string holding a NumPy .npy file (format 1.0, 2.0 or 3.0: magic
// "\x93NUMPY", version, header length, a Python-dict header with 'descr', 'fortran_order' and
// 'shape', then the raw data). Both decode to the same ExpertArray here.
//
// Errors are InputError(file, field, problem), `field` being the caller's name of the value (for
// example "line 3: routed_experts"), extended with the index of the offending element.
#include "sim/common/json_reader.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eldr {

struct ExpertArray {
  std::array<size_t, 3> shape{};  // tokens, layers, top_k
  std::vector<int64_t> values;    // C order: (token, layer, k) at (token * layers + layer) * top_k + k
  std::string encoding;           // "JSON lists" or "base64 .npy <descr>", for reports
  int64_t at(size_t token, size_t layer, size_t k) const { return values[(token * shape[1] + layer) * shape[2] + k]; }
};

// Standard (or URL-safe) base64 with '=' padding; whitespace is skipped. A length that is not a
// multiple of 4 (a truncated string), a stray character or padding before the end is an error.
std::vector<uint8_t> decode_base64(std::string_view text, const std::string& file, const std::string& field);

// A .npy file of a 3-D integer array (int8..int64, uint8..uint32; little-endian; C order).
ExpertArray parse_npy(std::span<const uint8_t> bytes, const std::string& file, const std::string& field);

// Nested lists [[[id, ...], ...], ...] or a base64 .npy string. An empty list is 0 tokens (shape 0 x 0 x 0).
ExpertArray parse_expert_array(const Json& value, const std::string& file, const std::string& field);

}  // namespace eldr
