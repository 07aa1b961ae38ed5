#!/usr/bin/env bash
# Layers as a fact: no file under sim/ or examples/ includes a header of a layer above its own
# (sim/layers.txt, lowest first, which CMakeLists.txt builds the libraries from), and every folder
# with C++ files there belongs to a layer. Reads the sources only: the
# argument (the eldrsim binary, as for the other tests) is ignored.
# Prints FILE:LINE: layer A includes layer B (above it) per backward include.
set -u
cd "$(dirname "$0")/../.."
[ -f sim/layers.txt ] || { echo "sim/layers.txt is missing"; exit 1; }
files=$(find sim examples -name '*.cpp' -o -name '*.hpp' | LC_ALL=C sort)
[ -n "$files" ] || { echo "no C++ files under sim/ or examples/"; exit 1; }
# awk reads the layer file first (rank by folder), then every source file.
# shellcheck disable=SC2086
awk '
  FNR == NR {
    sub(/#.*/, "")
    if (NF == 0) next
    ++rank
    for (i = 2; i <= NF; ++i) { layer_of[$i] = $1; rank_of[$i] = rank }
    next
  }
  FNR == 1 {
    dir = FILENAME
    sub(/\/[^\/]*$/, "", dir)
    if (!(dir in rank_of)) {
      print FILENAME ": its folder " dir " is in no layer of sim/layers.txt: add it to one"
      ++bad
    }
  }
  /^[ \t]*#[ \t]*include[ \t]*"(sim|examples)\// {
    if (!(dir in rank_of)) next
    inc = $0
    sub(/^[^"]*"/, "", inc)
    sub(/".*$/, "", inc)
    idir = inc
    sub(/\/[^\/]*$/, "", idir)
    if (!(idir in rank_of)) {
      print FILENAME ":" FNR ": includes " inc ", whose folder is in no layer of sim/layers.txt"
      ++bad
    } else if (rank_of[idir] > rank_of[dir]) {
      print FILENAME ":" FNR ": layer " layer_of[dir] " includes layer " layer_of[idir] " (above it)"
      ++bad
    } else
      ++ok
  }
  END {
    if (bad) {
      print bad " include(s) against the layer order (sim/layers.txt, lowest first): move the code a lower layer needs down to it"
      exit 1
    }
    print ok " project includes, each within its layer or to one below"
  }
' sim/layers.txt $files
