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

static std::string compose(const std::string& file, const std::string& field, const std::string& problem)
{
  std::string msg = file.empty() ? std::string("<input>") : file;
  if (!field.empty())
    msg += ": " + field;
  msg = printable_line(msg + ": " + problem);
  // A value quoted from a hostile input (a 1 MB string, say) is cut, so the line stays readable.
  constexpr size_t kMax = 1000;
  if (msg.size() > kMax) {
    size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(msg[cut]) & 0xC0) == 0x80)  // not inside a UTF-8 sequence
      --cut;
    msg = msg.substr(0, cut) + "... (" + std::to_string(msg.size() - cut) + " more characters)";
  }
  return msg;
}

InputError::InputError(const std::string& file, const std::string& field, const std::string& problem)
    : std::runtime_error(compose(file, field, problem)), file_(file), field_(field), problem_(problem)
{
}

}  // namespace eldr
