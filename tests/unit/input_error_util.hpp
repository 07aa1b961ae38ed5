#pragma once
// Shared by the what-if test files: run something that must throw an InputError and get its message.
#include "sim/common/input_error.hpp"

#include <doctest/doctest.h>

#include <string>

namespace eldr::test {

template <class F> std::string input_error_of(F&& f)
{
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected InputError");
  return "";
}

inline bool contains(const std::string& s, const std::string& part)
{
  return s.find(part) != std::string::npos;
}

}  // namespace eldr::test
