#pragma once
// One-line user-facing error about an input: which file, which field, what is wrong.
#include <stdexcept>
#include <string>

namespace eldr {

// `text` as one printable line of UTF-8: newlines, control characters and bytes that are not UTF-8
// written as escapes (\n, \x1b, \xff).
std::string printable_line(const std::string& text);

class InputError : public std::runtime_error {
 public:
  InputError(const std::string& file, const std::string& field, const std::string& problem);
  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_;
  std::string field_;
  std::string problem_;
};

}  // namespace eldr
