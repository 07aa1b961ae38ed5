#include "sim/common/input_error.hpp"
#include "sim/common/utf8.hpp"

namespace eldr {

// The message is one line whatever the input holds: a control character quoted from a file (a
// newline inside a JSON string, say) or a byte that is not UTF-8 (from a command-line argument).
std::string printable_line(const std::string& text)
{
  static const char* hex = "0123456789abcdef";
  const auto escape      = [](unsigned char c) { return std::string("\\x") + hex[c >> 4] + hex[c & 15]; };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(text, i);
      out += n ? text.substr(i, n) : escape(c);
      i += n ? n : 1;
      continue;
    }
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if ((c < 0x20 && c != '\t') || c == 0x7f)
      out += escape(c);
    else
      out += char(c);
    ++i;
  }
  return out;
}

// A cut of `text` at byte `at` or before, not inside a UTF-8 sequence.
static size_t char_boundary(const std::string& text, size_t at)
{
  while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80)
    --at;
  return at;
}

// `text` (a path, a key) kept to about `max` bytes by dropping its middle: both ends say which it is.
static std::string shorten_middle(const std::string& text, size_t max)
{
  if (text.size() <= max)
    return text;
  const size_t head = char_boundary(text, max / 2 - 2);
  const size_t tail = char_boundary(text, text.size() - (max - max / 2 - 1));
  return text.substr(0, head) + "..." + text.substr(tail);
}

static std::string compose(const std::string& file, const std::string& field, const std::string& problem)
{
  // The line stays readable whatever the input: a long path or key is shortened in its middle, so the
  // problem after it still shows; a problem quoting a hostile value (a 1 MB string) is cut at its end.
  constexpr size_t kMaxName = 240, kMax = 1000;
  std::string msg = file.empty() ? std::string("<input>") : shorten_middle(printable_line(file), kMaxName);
  if (!field.empty())
    msg += ": " + shorten_middle(printable_line(field), kMaxName);
  msg += ": " + printable_line(problem);
  if (msg.size() > kMax) {
    const size_t cut = char_boundary(msg, kMax);
    msg              = msg.substr(0, cut) + "... (" + std::to_string(msg.size() - cut) + " more characters)";
  }
  return msg;
}

InputError::InputError(const std::string& file, const std::string& field, const std::string& problem)
    : std::runtime_error(compose(file, field, problem)), file_(file), field_(field), problem_(problem)
{
}

}  // namespace eldr
