#!/usr/bin/env bash
# The repository is self-contained: no tracked file except documentation (*.md) refers to the team's
# shared data beside the clone (a user's clone has none), and the data the importers read by default
# ships in traces/. .ci/run runs the whole suite with that folder hidden.
# Usage: self_contained.sh PATH/TO/eldrsim   (run from the project root; the binary is not used)
set -u
[ -f configs/default.json ] || { echo "run from the project root (no configs/default.json here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-self.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"

# The files of the project: git's list in a clone, else every file under the root but build and
# result directories (an unpacked archive).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z >"$TMP/files"
else
  find . \( -path ./build -o -path './build-*' -o -path ./results -o -path ./.git \) -prune -o -type f -print0 |
    sed -z 's#^\./##' >"$TMP/files"
fi
check "the file list is not empty" '[ -s "$TMP/files" ]'

# The pattern is spelt in two parts so that this script does not match itself.
dotdot='\.\.'
pattern="$dotdot/shared([/\"' ]|\$)"
grep -z -v '\.md$' "$TMP/files" | xargs -0 -r grep -n -I -E -- "$pattern" >"$TMP/hits" 2>/dev/null
if [ -s "$TMP/hits" ]; then
  bad "tracked files other than docs refer to the shared data beside the clone:"
  sed 's/^/     /' "$TMP/hits" | cut -c1-200
else
  ok "no tracked file other than docs refers to the shared data beside the clone"
fi

# The design the code and docs cite is the repository's own page (docs/design.md), not the team's
# brief beside the clone. (Spelt in two parts so that this script does not match itself; the fuzz
# corpus keeps the configs it was seeded with.)
brief='DESIGN''\.md'
grep -z -v '^fuzz/corpus/' "$TMP/files" | xargs -0 -r grep -n -I -E -- "$brief" >"$TMP/brief" 2>/dev/null
check "no tracked file cites the design brief the repository does not have" "[ ! -s '$TMP/brief' ]"
check "the design page it cites instead is tracked" "grep -qzxF 'docs/design.md' '$TMP/files'"

# What the importers and the routing profiles read by default is in the repository.
for f in traces/routing/esft_deepseek_v2_lite/esft_{law,intent,summary,translation}_{top6_u8.bin,seqlens.csv} \
  traces/routing/qwen3_30b_a3b_mgsm_expert_token_counts.csv traces/azure2023_conv.csv \
  traces/mooncake_conversation.jsonl traces/calibration/rr_task_tpot.csv \
  traces/calibration/rr_language_tpot.csv traces/calibration/rr_replicates_60rps.csv traces/calibration/ablations_task.csv \
  traces/wildchat_first_turn_cl100k.csv; do
  check "ships $f" "grep -qzxF '$f' '$TMP/files'"
done
check "traces/routing/esft_deepseek_v2_lite has its source and licence" \
  "grep -q 'Licence' traces/routing/esft_deepseek_v2_lite/README.md"
finish
