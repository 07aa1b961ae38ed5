#!/usr/bin/env bash
# eldrsim on bad input: each case must exit 2 and print exactly one line on stderr,
#   eldrsim: error: FILE: KEY: problem
# naming the file and the key at fault (or the file alone when it cannot be read or parsed).
# Usage: bad_input.sh PATH/TO/eldrsim   (run from the project root: configs resolve against it)
set -u
ELDRSIM=${1:?usage: bad_input.sh PATH/TO/eldrsim}
DEFAULT=configs/default.json
[ -f "$DEFAULT" ] || { echo "run from the project root (no $DEFAULT here)"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
OUT="$TMP/out"   # never write into results/

# Small runs, so a case that wrongly succeeds finishes fast.
SMALL=(--requests 20 --set workload.warmup_requests=0 -q --out "$OUT")

failures=0
pass=0

# expect_error NAME PATTERN... -- ARGS...: run eldrsim ARGS, require exit 2, one stderr line starting
# with "eldrsim: error: " and containing every PATTERN (fixed strings), and nothing on stdout.
expect_error() {
  local name=$1
  shift
  local patterns=()
  while [ "$1" != "--" ]; do
    patterns+=("$1")
    shift
  done
  shift
  local rc
  "$ELDRSIM" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
  rc=$?
  local err
  err=$(cat "$TMP/stderr")
  local lines
  lines=$(wc -l <"$TMP/stderr")
  local problems=()
  [ "$rc" -eq 2 ] || problems+=("exit code $rc, want 2")
  [ "$lines" -eq 1 ] || problems+=("$lines lines on stderr, want 1")
  [ -s "$TMP/stdout" ] && problems+=("unexpected stdout: $(head -c 200 "$TMP/stdout")")
  case "$err" in
    "eldrsim: error: "*) ;;
    *) problems+=("stderr does not start with 'eldrsim: error: '") ;;
  esac
  for p in "${patterns[@]}"; do
    grep -qF -- "$p" "$TMP/stderr" || problems+=("stderr lacks '$p'")
  done
  if [ ${#problems[@]} -eq 0 ]; then
    pass=$((pass + 1))
    echo "ok   $name: $err"
  else
    failures=$((failures + 1))
    echo "FAIL $name: $(printf '%s; ' "${problems[@]}")"
    echo "     command: $ELDRSIM $*"
    echo "     stderr:  $err"
  fi
}

# Bad configs, written from the default one.
/usr/bin/python3 - "$DEFAULT" "$TMP" <<'EOF'
import json, sys
src, tmp = sys.argv[1], sys.argv[2]
base = json.load(open(src))
def write(name, mutate):
    doc = json.loads(json.dumps(base))
    mutate(doc)
    json.dump(doc, open(f"{tmp}/{name}", "w"), indent=2)
write("unknown_key.json", lambda d: d["workload"].__setitem__("rate_rsp", 5))
write("rate_string.json", lambda d: d["workload"].__setitem__("rate_rps", "fast"))
write("zero_decode.json", lambda d: d["topology"]["decode"].__setitem__("instances", 0))
write("too_many.json", lambda d: d["topology"]["decode"].__setitem__("instances", 40))
write("top_level_typo.json", lambda d: d.__setitem__("routr", "jsq"))
EOF
printf '{\n  "model": "qwen3-30b-a3b",\n  "workload": { "rate_rps": 60, }\n}\n' >"$TMP/malformed.json"

expect_error "unknown key in config" "$TMP/unknown_key.json" "workload.rate_rsp" "unknown key" -- \
  run "$TMP/unknown_key.json" "${SMALL[@]}"
expect_error "unknown top-level key" "$TMP/top_level_typo.json" ": routr: unknown key" -- \
  run "$TMP/top_level_typo.json" "${SMALL[@]}"
expect_error "rate as a string" "$TMP/rate_string.json" "workload.rate_rps" "must be a number" -- \
  run "$TMP/rate_string.json" "${SMALL[@]}"
expect_error "negative rate via --set" "$DEFAULT" "workload.rate_rps" "got -5" -- \
  run "$DEFAULT" --set workload.rate_rps=-5 "${SMALL[@]}"
expect_error "zero decode instances" "$TMP/zero_decode.json" "topology.decode.instances" -- \
  run "$TMP/zero_decode.json" "${SMALL[@]}"
expect_error "zero decode instances via --set" "$DEFAULT" "topology.decode.instances" -- \
  run "$DEFAULT" --set topology.decode.instances=0 "${SMALL[@]}"
expect_error "more instances than GPUs" "$TMP/too_many.json" "topology.decode.instances" "do not fit" -- \
  run "$TMP/too_many.json" "${SMALL[@]}"
expect_error "unknown router" "$DEFAULT" "router" "unknown value 'foo'" -- \
  run "$DEFAULT" --router foo "${SMALL[@]}"
expect_error "missing config file" "$TMP/nowhere.json" "cannot open" -- \
  run "$TMP/nowhere.json" "${SMALL[@]}"
expect_error "model that does not exist" "$DEFAULT" ": model: " "nope.json" -- \
  run "$DEFAULT" --set model=nope "${SMALL[@]}"
expect_error "malformed JSON" "$TMP/malformed.json" "invalid JSON" -- \
  run "$TMP/malformed.json" "${SMALL[@]}"
expect_error "--set without =" "--set" "workload.rate_rps" "KEY=VALUE" -- \
  run "$DEFAULT" --set workload.rate_rps "${SMALL[@]}"
expect_error "--set into a non-object" "$DEFAULT" "model.name" -- \
  run "$DEFAULT" --set model.name=x "${SMALL[@]}"
expect_error "kv memory too small for the weights" "qwen3-30b-a3b.json" "(weights)" -- \
  run "$DEFAULT" --set serving.kv_memory_fraction=0.2 "${SMALL[@]}"

# Command-line errors CLI11 reports also exit 2.
"$ELDRSIM" run "$DEFAULT" --rate -5 "${SMALL[@]}" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then pass=$((pass + 1)); echo "ok   --rate -5 exits 2"; else
  failures=$((failures + 1)); echo "FAIL --rate -5 exited $rc, want 2"; fi
"$ELDRSIM" frobnicate >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then pass=$((pass + 1)); echo "ok   unknown subcommand exits 2"; else
  failures=$((failures + 1)); echo "FAIL unknown subcommand exited $rc, want 2"; fi

# Nothing was written for any failed run.
if [ -e "$OUT" ]; then
  failures=$((failures + 1))
  echo "FAIL an output directory was created by a failing run"
fi

# And a good small run succeeds, so the cases above fail for their own reason.
if "$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" && [ -f "$OUT/summary.json" ]; then
  pass=$((pass + 1))
  echo "ok   a valid small run exits 0 and writes summary.json"
else
  failures=$((failures + 1))
  echo "FAIL the valid control run failed"
fi

echo "$pass passed, $failures failed"
[ "$failures" -eq 0 ]
