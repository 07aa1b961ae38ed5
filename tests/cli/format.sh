#!/usr/bin/env bash
# Formatting as a fact: every tracked C++ file is as clang-format (.clang-format) writes it, and no test
# case's name holds a ';'.
# Fix with: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i
# Skips (77) where clang-format is missing (the Makefile's deps install it).
set -u
cd "$(dirname "$0")/../.."
# A doctest case whose name holds ';' never runs under ctest: CMake splits the discovered name there, and
# the truncated --test-case filter matches nothing, which doctest reports as success.
semi=$(git ls-files 'tests/*.cpp' 2>/dev/null | xargs -r grep -n 'TEST_CASE("[^"]*;' 2>/dev/null)
if [ -n "$semi" ]; then
  echo "test case names holding ';' (ctest would skip them silently; use ','):"
  echo "$semi" | sed 's/^/  /'
  exit 1
fi
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
files=$(git ls-files '*.cpp' '*.hpp' 2>/dev/null)
[ -n "$files" ] || { echo "no tracked C++ files (not a git checkout?): skipped"; exit 77; }
bad=$(for f in $files; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
if [ -n "$bad" ]; then
  echo "not formatted (run clang-format -i on them):"
  echo "$bad" | sed 's/^/  /'
  exit 1
fi
echo "$(echo "$files" | wc -w) files formatted"
