// UTF-8 validation (RFC 3629, table 3-7 of the Unicode standard) and the one-line error messages
// built on it, on byte strings written out by hand.
#include "sim/common/input_error.hpp"
#include "sim/common/utf8.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace eldr;
constexpr size_t npos = std::string_view::npos;

TEST_CASE("utf8: well-formed sequences of every length, at the edges of each range")
{
  CHECK(invalid_utf8_offset("") == npos);
  CHECK(invalid_utf8_offset("plain ASCII\t~") == npos);
  CHECK(invalid_utf8_offset("\xc2\x80") == npos);          // U+0080, the first two-byte code point
  CHECK(invalid_utf8_offset("\xdf\xbf") == npos);          // U+07FF
  CHECK(invalid_utf8_offset("\xe0\xa0\x80") == npos);      // U+0800
  CHECK(invalid_utf8_offset("\xed\x9f\xbf") == npos);      // U+D7FF, just below the surrogates
  CHECK(invalid_utf8_offset("\xee\x80\x80") == npos);      // U+E000, just above them
  CHECK(invalid_utf8_offset("\xef\xbf\xbf") == npos);      // U+FFFF
  CHECK(invalid_utf8_offset("\xf0\x90\x80\x80") == npos);  // U+10000
  CHECK(invalid_utf8_offset("\xf4\x8f\xbf\xbf") == npos);  // U+10FFFF, the last code point
  CHECK(invalid_utf8_offset("Gr\xc3\xbc\xc3\x9f"
                            "e \xe6\x9d\xb1") == npos);  // "Grüße 東"
}

TEST_CASE("utf8: the offset of the first byte that does not start a well-formed sequence")
{
  CHECK(invalid_utf8_offset("\xff") == 0);
  CHECK(invalid_utf8_offset("ab\x80") == 2);            // a lone continuation byte
  CHECK(invalid_utf8_offset("\xc0\xaf") == 0);          // overlong '/'
  CHECK(invalid_utf8_offset("\xc1\xbf") == 0);          // overlong, two bytes
  CHECK(invalid_utf8_offset("\xe0\x9f\xbf") == 0);      // overlong, three bytes
  CHECK(invalid_utf8_offset("\xf0\x8f\xbf\xbf") == 0);  // overlong, four bytes
  CHECK(invalid_utf8_offset("\xed\xa0\x80") == 0);      // U+D800, a surrogate
  CHECK(invalid_utf8_offset("\xf4\x90\x80\x80") == 0);  // U+110000, past the last code point
  CHECK(invalid_utf8_offset("\xf5\x80\x80\x80") == 0);
  CHECK(invalid_utf8_offset("caf\xc3") == 3);      // cut before its continuation
  CHECK(invalid_utf8_offset("caf\xc3\x28") == 3);  // a continuation that is not one
  CHECK(invalid_utf8_offset("\xe6\x9d") == 0);     // three-byte lead, two bytes
  CHECK(describe_invalid_utf8("ab\xfe") == "byte 0xFE at offset 2");
  CHECK_THROWS_AS(require_utf8("\xff", "f", "k"), InputError);
  CHECK_NOTHROW(require_utf8("\xc3\xa9", "f", "k"));
}

TEST_CASE("utf8: error messages are one line of UTF-8 whatever they quote")
{
  CHECK(printable_line("a\nb\rc\x1b"
                       "d\x7f") == "a\\nb\\rc\\x1bd\\x7f");
  CHECK(printable_line("x\xff\xfey") == "x\\xff\\xfey");
  CHECK(printable_line("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate: each byte escaped
  CHECK(printable_line("\xc3\xa9\tok") == "\xc3\xa9\tok");     // UTF-8 and tabs stay
  const InputError e("conf\xff.json", "--set", "bad");
  CHECK(std::string(e.what()) == "conf\\xff.json: --set: bad");
  // A long message is cut at 1000 bytes, here inside "é" (byte 1000 continues it): before it instead.
  const InputError long_one("f", "k", std::string(993, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9");
  CHECK(invalid_utf8_offset(long_one.what()) == npos);
}
