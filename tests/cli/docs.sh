#!/usr/bin/env bash
# The documentation holds together: every relative Markdown link in the front pages and docs/ resolves
# to a file of the project (anchors ignored), the front page and the calibration reference stay short,
# and the index (docs/README.md) links every page under docs/ (docs/img holds figures, not pages).
# Usage: docs.sh PATH/TO/eldrsim   (run from the project root; the binary is not used)
set -u
[ -f configs/default.json ] || { echo "run from the project root (no configs/default.json here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-docs.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

# The files of the project: git's list in a clone, else every file under the root but build and
# result directories (an unpacked archive), as self_contained.sh takes them.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files >"$TMP/files"
else
  find . \( -path ./build -o -path './build-*' -o -path ./results -o -path ./.git \) -prune -o -type f -print |
    sed 's#^\./##' >"$TMP/files"
fi
check "the file list is not empty" '[ -s "$TMP/files" ]'

# A path is in the project if it is a listed file or a folder holding one.
known() { awk -v p="$1" '$0 == p || index($0, p "/") == 1 { found = 1; exit } END { exit !found }' "$TMP/files"; }

# links FILE: the relative targets of FILE's Markdown links and images, one a line, anchors and titles
# cut, fenced code blocks and inline code skipped (a command there is not a link).
links() {
  awk '/^[[:space:]]*```/ { fence = !fence; next } !fence' "$1" | sed 's/`[^`]*`//g' |
    grep -oE '\]\([^) ]+' | sed 's/^](//; s/#.*//; s/^<//; s/>$//' |
    grep -vE '^$|^[a-z]+:' || true
}

# normalize PATH: a relative path with . and .. folded away (PATH is under the root).
normalize() {
  local out=() part
  local IFS=/
  for part in $1; do
    case "$part" in
      "" | .) ;;
      ..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  echo "${out[*]}"
}

pages=()
for f in README.md bench/README.md fuzz/README.md traces/README.md models/README.md; do
  [ -f "$f" ] && pages+=("$f")
done
while IFS= read -r f; do pages+=("$f"); done < <(grep -E '^docs/.*\.md$' "$TMP/files")

: >"$TMP/broken"
count=0
for page in "${pages[@]}"; do
  dir=$(dirname "$page")
  while IFS= read -r target; do
    [ -n "$target" ] || continue
    count=$((count + 1))
    path=$(normalize "$dir/$target")
    known "$path" || echo "$page: ($target) -> $path: no such file in the project" >>"$TMP/broken"
  done < <(links "$page")
done
if [ -s "$TMP/broken" ]; then
  bad "relative links that resolve to no file of the project:"
  sed 's/^/     /' "$TMP/broken"
else
  ok "all $count relative links of ${#pages[@]} pages resolve"
fi

lines=$(wc -l <README.md)
check "README.md is a front page: $lines lines, at most 160" "[ $lines -le 160 ]"
lines=$(wc -l <docs/calibration.md)
check "docs/calibration.md is a reference: $lines lines, at most 420" "[ $lines -le 420 ]"

# The index links every page under docs/.
links docs/README.md | while IFS= read -r t; do normalize "docs/$t"; done >"$TMP/indexed"
: >"$TMP/orphans"
while IFS= read -r f; do
  [ "$f" = docs/README.md ] && continue
  grep -qxF -- "$f" "$TMP/indexed" || echo "$f" >>"$TMP/orphans"
done < <(grep -E '^docs/' "$TMP/files" | grep -v '^docs/img/')
if [ -s "$TMP/orphans" ]; then
  bad "pages under docs/ that the index (docs/README.md) does not link: $(tr '\n' ' ' <"$TMP/orphans")"
else
  ok "the index links every page under docs/"
fi
finish
