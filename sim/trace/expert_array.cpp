#include "sim/trace/expert_array.hpp"
#include "sim/common/input_error.hpp"

#include <cctype>
#include <cstring>
#include <limits>

namespace eldr {

namespace {

int base64_value(char c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+' || c == '-')
    return 62;
  if (c == '/' || c == '_')
    return 63;
  return -1;
}

std::string shape_text(const std::vector<size_t>& s)
{
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

// The .npy header: a Python dict literal with 'descr', 'fortran_order' and 'shape'.
class NpyHeader {
 public:
  NpyHeader(std::string_view text, const std::string& file, std::string field)
      : text_(text), file_(file), field_(std::move(field))
  {
  }

  void parse()
  {
    expect('{');
    bool have_descr = false, have_order = false, have_shape = false;
    while (skip_space(), peek() != '}') {
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        descr      = quoted();
        have_descr = true;
      } else if (key == "fortran_order") {
        skip_space();
        if (text_.substr(pos_, 4) == "True")
          fortran_order = true, pos_ += 4;
        else if (text_.substr(pos_, 5) == "False")
          fortran_order = false, pos_ += 5;
        else
          fail("fortran_order is neither True nor False");
        have_order = true;
      } else if (key == "shape") {
        expect('(');
        while (skip_space(), peek() != ')') {
          size_t v = 0, digits = 0;
          for (; pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])); ++pos_, ++digits) {
            if (v > (size_t(1) << 40))
              fail("shape entry too large");
            v = v * 10 + size_t(text_[pos_] - '0');
          }
          if (digits == 0)
            fail("shape is not a tuple of integers");
          shape.push_back(v);
          skip_space();
          if (peek() == ',')
            ++pos_;
        }
        ++pos_;
        have_shape = true;
      } else {
        fail("unknown key '" + key + "'");
      }
      skip_space();
      if (peek() == ',')
        ++pos_;
    }
    if (!have_descr || !have_order || !have_shape)
      fail("needs 'descr', 'fortran_order' and 'shape'");
  }

  std::string descr;
  bool fortran_order = false;
  std::vector<size_t> shape;

 private:
  [[noreturn]] void fail(const std::string& problem) const
  {
    throw InputError(file_, field_, "npy header: " + problem);
  }
  char peek() const
  {
    if (pos_ >= text_.size())
      fail("ends early");
    return text_[pos_];
  }
  void skip_space()
  {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  void expect(char c)
  {
    skip_space();
    if (peek() != c)
      fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted()
  {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"')
      fail("expected a quoted key or value");
    const size_t end = text_.find(q, pos_ + 1);
    if (end == std::string_view::npos)
      fail("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }

  std::string_view text_;
  const std::string& file_;
  std::string field_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> decode_base64(std::string_view text, const std::string& file, const std::string& field)
{
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  size_t n = 0, pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c)))
      continue;
    if (c == '=') {
      ++pad;
      ++n;
      continue;
    }
    const int v = base64_value(c);
    if (v < 0)
      throw InputError(file, field,
                       "base64: invalid character '" + std::string(1, c) + "' at offset " + std::to_string(i));
    if (pad)
      throw InputError(file, field, "base64: data after '=' padding at offset " + std::to_string(i));
    acc = acc << 6 | uint32_t(v);
    if (++n % 4 == 0) {
      out.push_back(uint8_t(acc >> 16));
      out.push_back(uint8_t(acc >> 8));
      out.push_back(uint8_t(acc));
      acc = 0;
    }
  }
  if (n % 4 != 0 || pad > 2)
    throw InputError(file, field,
                     "base64: " + std::to_string(n) +
                         " characters, not a whole number of 4-character groups (truncated?)");
  if (pad) {  // the last group held 4 - pad characters of data: 3 - pad bytes
    const uint32_t last = acc << (6 * pad);
    out.push_back(uint8_t(last >> 16));
    if (pad == 1)
      out.push_back(uint8_t(last >> 8));
  }
  return out;
}

ExpertArray parse_npy(std::span<const uint8_t> b, const std::string& file, const std::string& field)
{
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (b.size() < 10 || std::memcmp(b.data(), magic, 6) != 0)
    throw InputError(file, field, "not a NumPy .npy array (no \\x93NUMPY magic)");
  const int major = b[6];
  if (major < 1 || major > 3)
    throw InputError(file, field,
                     "npy format version " + std::to_string(major) + "." + std::to_string(b[7]) +
                         " (1.0, 2.0 and 3.0 are read)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes)
    throw InputError(file, field, "npy: truncated before the header length");
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i)
    header_len |= size_t(b[8 + i]) << (8 * i);
  const size_t data_at = 8 + len_bytes + header_len;
  if (data_at > b.size())
    throw InputError(file, field,
                     "npy: header of " + std::to_string(header_len) + " bytes, but only " +
                         std::to_string(b.size() - 8 - len_bytes) + " follow (truncated?)");
  const std::string_view text(reinterpret_cast<const char*>(b.data()) + 8 + len_bytes, header_len);
  NpyHeader h(text, file, field);
  h.parse();

  // dtype: byte order ('<', or '|' / '=' for one byte) + kind (i, u) + size.
  const std::string& d = h.descr;
  const bool ok_kind =
      d.size() == 3 && (d[1] == 'i' || d[1] == 'u') && (d[2] == '1' || d[2] == '2' || d[2] == '4' || d[2] == '8');
  const size_t item = ok_kind ? size_t(d[2] - '0') : 0;
  if (!ok_kind || (d[1] == 'u' && item == 8))
    throw InputError(file, field, "npy dtype '" + d + "': expert ids must be int8..int64 or uint8..uint32");
  if (!(d[0] == '<' || ((d[0] == '|' || d[0] == '=') && item == 1)))
    throw InputError(file, field, "npy dtype '" + d + "': only little-endian data is read");
  if (h.fortran_order)
    throw InputError(file, field, "npy: fortran_order True; save the array in C order");
  if (h.shape.size() != 3)
    throw InputError(file, field,
                     "npy shape " + shape_text(h.shape) + ": expected 3 dimensions (tokens, layers, top_k)");

  ExpertArray a;
  a.shape      = {h.shape[0], h.shape[1], h.shape[2]};
  a.encoding   = "base64 .npy " + d;
  size_t count = 1;
  for (size_t s : h.shape) {
    if (s != 0 && count > (size_t(1) << 40) / s)
      throw InputError(file, field, "npy shape " + shape_text(h.shape) + " is too large");
    count *= s;
  }
  const size_t need = count * item, have = b.size() - data_at;
  if (have != need)
    throw InputError(file, field,
                     "npy data of " + std::to_string(have) + " bytes; shape " + shape_text(h.shape) + " of " + d +
                         " needs " + std::to_string(need) + (have < need ? " (truncated?)" : ""));
  a.values.resize(count);
  const uint8_t* p = b.data() + data_at;
  for (size_t i = 0; i < count; ++i, p += item) {
    uint64_t u = 0;
    for (size_t j = 0; j < item; ++j)
      u |= uint64_t(p[j]) << (8 * j);
    if (d[1] == 'i' && item < 8 && (u >> (8 * item - 1) & 1))
      u |= ~uint64_t(0) << (8 * item);  // sign-extend
    a.values[i] = int64_t(u);
  }
  return a;
}

ExpertArray parse_expert_array(const Json& value, const std::string& file, const std::string& field)
{
  if (value.is_string()) {
    const std::vector<uint8_t> bytes = decode_base64(value.get_ref<const std::string&>(), file, field);
    return parse_npy(bytes, file, field);
  }
  if (!value.is_array())
    throw InputError(file, field,
                     "expected nested lists [tokens][layers][top_k] or a base64 .npy string, got " +
                         std::string(value.type_name()));
  ExpertArray a;
  a.encoding = "JSON lists";
  if (value.empty())
    return a;
  auto index = [&](size_t t, size_t l = SIZE_MAX, size_t k = SIZE_MAX) {
    std::string s = field + "[" + std::to_string(t) + "]";
    if (l != SIZE_MAX)
      s += "[" + std::to_string(l) + "]";
    if (k != SIZE_MAX)
      s += "[" + std::to_string(k) + "]";
    return s;
  };
  const Json& first = value[0];
  if (!first.is_array() || first.empty() || !first[0].is_array() || first[0].empty())
    throw InputError(file, index(0), "expected a non-empty list of layers, each a non-empty list of expert ids");
  a.shape = {value.size(), first.size(), first[0].size()};
  a.values.reserve(a.shape[0] * a.shape[1] * a.shape[2]);
  for (size_t t = 0; t < a.shape[0]; ++t) {
    const Json& tok = value[t];
    if (!tok.is_array() || tok.size() != a.shape[1])
      throw InputError(file, index(t),
                       "expected a list of " + std::to_string(a.shape[1]) + " layers (as token 0 has), got " +
                           (tok.is_array() ? std::to_string(tok.size()) : std::string(tok.type_name())));
    for (size_t l = 0; l < a.shape[1]; ++l) {
      const Json& lay = tok[l];
      if (!lay.is_array() || lay.size() != a.shape[2])
        throw InputError(file, index(t, l),
                         "expected a list of " + std::to_string(a.shape[2]) +
                             " expert ids (as token 0, layer 0 has), got " +
                             (lay.is_array() ? std::to_string(lay.size()) : std::string(lay.type_name())));
      for (size_t k = 0; k < a.shape[2]; ++k) {
        const Json& e = lay[k];
        if (!e.is_number_integer())
          throw InputError(file, index(t, l, k), "expert id is not an integer: " + e.dump());
        a.values.push_back(e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                               ? std::numeric_limits<int64_t>::max()
                               : e.get<int64_t>());
      }
    }
  }
  return a;
}

}  // namespace eldr
