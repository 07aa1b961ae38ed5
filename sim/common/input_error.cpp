#include "sim/common/input_error.hpp"

namespace eldr {

// The message is one line whatever the input holds: a control character quoted from a file (a
// newline inside a JSON string, say) is written as an escape.
static std::string one_line(const std::string& text)
{
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if ((c < 0x20 && c != '\t') || c == 0x7f)
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else
      out += char(c);
  }
  return out;
}

static std::string compose(const std::string& file, const std::string& field, const std::string& problem)
{
  std::string msg = file.empty() ? std::string("<input>") : file;
  if (!field.empty())
    msg += ": " + field;
  msg = one_line(msg + ": " + problem);
  // A value quoted from a hostile input (a 1 MB string, say) is cut, so the line stays readable.
  constexpr size_t kMax = 1000;
  if (msg.size() > kMax)
    msg = msg.substr(0, kMax) + "... (" + std::to_string(msg.size() - kMax) + " more characters)";
  return msg;
}

InputError::InputError(const std::string& file, const std::string& field, const std::string& problem)
    : std::runtime_error(compose(file, field, problem)), file_(file), field_(field)
{
}

}  // namespace eldr
