#include "sim/common/utf8.hpp"
#include "sim/common/input_error.hpp"

namespace eldr {

size_t utf8_sequence_length(std::string_view text, size_t i)
{
  const auto byte       = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80)
    return 1;
  // The second byte's range is narrower after E0, ED, F0 and F4 (overlongs, surrogates, > U+10FFFF).
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0)
      lo = 0xA0;
    if (c == 0xED)
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0)
      lo = 0x90;
    if (c == 0xF4)
      hi = 0x8F;
  } else
    return 0;
  if (i + n > text.size())
    return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi)
    return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF)
      return 0;
  return n;
}

size_t invalid_utf8_offset(std::string_view text)
{
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0)
      return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string describe_invalid_utf8(std::string_view text)
{
  static const char* hex = "0123456789ABCDEF";
  const size_t at        = invalid_utf8_offset(text);
  if (at == std::string_view::npos)
    return "valid UTF-8";
  const auto c = static_cast<unsigned char>(text[at]);
  return std::string("byte 0x") + hex[c >> 4] + hex[c & 15] + " at offset " + std::to_string(at);
}

void require_utf8(std::string_view text, const std::string& file, const std::string& field)
{
  if (invalid_utf8_offset(text) != std::string_view::npos)
    throw InputError(file, field,
                     "is not valid UTF-8 (" + describe_invalid_utf8(text) + "); results are JSON, give UTF-8 text");
}

}  // namespace eldr
