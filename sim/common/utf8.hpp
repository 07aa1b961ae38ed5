#pragma once
// Every string eldr-sim stores in a JSON result (config values, --set values, paths, labels) must be
// UTF-8: JSON text is UTF-8, and a byte outside it would only surface when the result is written,
// after the simulation. Inputs are checked where they enter instead.
#include <cstddef>
#include <string>
#include <string_view>

namespace eldr {

// The offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or std::string_view::npos when all is UTF-8.
size_t invalid_utf8_offset(std::string_view text);

// Length of the well-formed UTF-8 sequence starting at text[i], or 0 when none starts there.
size_t utf8_sequence_length(std::string_view text, size_t i);

// "byte 0xFF at offset 3": where `text` stops being UTF-8 (call only when it does).
std::string describe_invalid_utf8(std::string_view text);

// Throws InputError(file, field, "is not valid UTF-8 (...)") unless `text` is UTF-8.
void require_utf8(std::string_view text, const std::string& file, const std::string& field);

}  // namespace eldr
