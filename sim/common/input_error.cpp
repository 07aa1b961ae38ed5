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
  return one_line(msg + ": " + problem);
}

InputError::InputError(const std::string& file, const std::string& field, const std::string& problem)
    : std::runtime_error(compose(file, field, problem)), file_(file), field_(field)
{
}

}  // namespace eldr
