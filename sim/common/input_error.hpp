#pragma once
// One-line user-facing error about an input: which file, which field, what is wrong.
#include <stdexcept>
#include <string>

namespace eldr {

class InputError : public std::runtime_error {
public:
  InputError(const std::string& file, const std::string& field, const std::string& problem);
  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }

private:
  std::string file_;
  std::string field_;
};

}  // namespace eldr
