# Shared by the tests/cli scripts, which source it: the pass and failure counts and the checks that
# add to them. The scripts set ELDRSIM (the binary) and TMP (a scratch directory) first.
failures=0
pass=0
skipped=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failures=$((failures + 1)); echo "FAIL $1"; }
# A check this machine cannot run: said, counted apart, never a pass.
skip() { skipped=$((skipped + 1)); echo "SKIP $1"; }
# check NAME TEST: ok when the shell code TEST succeeds.
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

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
  drop_sanitizer_noise "$TMP/stderr"
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
    ok "$name: $err"
  else
    bad "$name: $(printf '%s; ' "${problems[@]}")"
    echo "     command: $ELDRSIM $*"
    echo "     stderr:  $err"
  fi
}

# drop_sanitizer_noise FILE...: removes, in place, what an ASan build (make sanitize) prints on every
# simulation about SimGrid's context switches, so checks that count or compare stderr lines hold there.
drop_sanitizer_noise() {
  sed -i -e '/^==[0-9]*==WARNING: ASan /d' -e '/^False positive error reports may follow$/d' \
    -e '/^For details see https:\/\/github.com\/google\/sanitizers\/issues\/189$/d' "$@"
}

# interrupt_mid_way PID: SIGTERM to a background job at the point where it is now, however fast the
# machine: stopped first, so it cannot finish between the caller's check and the signal; then
# continued to handle it. Returns the job's exit status.
interrupt_mid_way() {
  kill -STOP "$1" 2>/dev/null
  kill -TERM "$1" 2>/dev/null
  kill -CONT "$1" 2>/dev/null
  wait "$1"
}

# served_from_trace RUN_DIR TRACE_DIR [N]: the run served the trace's requests: every request of
# RUN_DIR/requests.csv finished, each (prompt, output) length pair one of the trace's (as a multiset),
# and N measured requests when N is given (at least one otherwise). Silent; the exit status says.
served_from_trace() {
  /usr/bin/python3 - "$@" <<'PYEOF'
import collections, csv, json, sys
run, trace = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(f"{run}/requests.csv")))
have = collections.Counter((j["prompt_tokens"], j["output_tokens"]) for j in map(json.loads, open(f"{trace}/requests.jsonl")))
used = collections.Counter((int(r["prompt_tokens"]), int(r["output_tokens"])) for r in rows)
measured = sum(r["measured"] == "1" for r in rows)
assert measured == int(sys.argv[3]) if len(sys.argv) > 3 else measured > 0, f"{measured} measured requests"
assert all(r["finish_s"] != "" for r in rows), "unfinished requests"
assert not used - have, f"lengths not in the trace: {list((used - have).items())[:3]}"
PYEOF
}

# The counts; succeeds when nothing failed (the script's last command, so its exit status).
finish() {
  echo "$pass passed, $failures failed$([ "$skipped" -gt 0 ] && echo ", $skipped skipped (not checked here)")"
  [ "$failures" -eq 0 ]
}

# same_results A B KEY...: every result file of directory A as B's; summary.json compared without its
# build_id and without each dotted KEY given (a section only one of the runs has, e.g. config.eplb).
same_results() {
  local a=$1 b=$2 f
  shift 2
  for f in "$a"/*; do
    [ "$(basename "$f")" = summary.json ] && continue
    cmp -s "$f" "$b/$(basename "$f")" || return 1
  done
  /usr/bin/python3 - "$a/summary.json" "$b/summary.json" "$@" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for x in (a, b):
    x.pop("build_id", None)
    for key in sys.argv[3:]:
        *path, last = key.split(".")
        y = x
        for p in path:
            y = y.get(p, {})
        y.pop(last, None)
sys.exit(0 if a == b else 1)
PYEOF
}
