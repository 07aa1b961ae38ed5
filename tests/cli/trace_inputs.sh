#!/usr/bin/env bash
# The readers of traces, their inputs and caches against files that are not what they seem:
#  - special files (/dev/zero, a FIFO, /dev/null) where a file is expected: one error line, no hang;
#  - a trace whose requests.jsonl or routing.bin was cut or edited after it was written;
#  - trace import and trace gen replace a trace whole: old or new, never mixed, no temporaries left
#    (a failed import, a trace without routing over one with it, SIGTERM during an import);
#  - a damaged routing cache is rebuilt (with a note), and the results match an uncached run.
# Every eldrsim call runs under `timeout`, so a reader that hangs fails the test instead of blocking it.
# Usage: trace_inputs.sh PATH/TO/eldrsim   (run from the project root)
set -u
REAL=${1:?usage: trace_inputs.sh PATH/TO/eldrsim}
[ -f configs/esft.json ] || { echo "run from the project root (no configs/esft.json here)"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-inputs.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
FIX=tests/data/vllm
# A hang shows as exit 124, which expect_error reports as a failure. The special-file cases get 5 s
# (they fail at once; a reader that slurps /dev/zero grows by gigabytes in a minute), the rest 60 s.
for limit in 5 60; do
  printf '#!/bin/sh\nexec timeout %s %q "$@"\n' $limit "$(realpath "$REAL")" >"$TMP/eldrsim-$limit"
  chmod +x "$TMP/eldrsim-$limit"
done
ELDRSIM="$TMP/eldrsim-5"
RUN_TRACE=(--set workload.kind=trace --set workload.arrivals=trace --set workload.warmup_requests=0
           --set workload.calibration_requests=0 -q)
SPECIAL="is not a regular file (a device, FIFO or socket): give a file"
mkfifo "$TMP/fifo"

# --- Special files where a file is expected.
expect_error "run /dev/zero" "/dev/zero: $SPECIAL" -- run /dev/zero --out "$TMP/x"
expect_error "run a FIFO" "fifo: $SPECIAL" -- run "$TMP/fifo" --out "$TMP/x"
expect_error "run /dev/null" "/dev/null: $SPECIAL" -- run /dev/null --out "$TMP/x"
expect_error "run a directory" "configs: is a directory" -- run configs --out "$TMP/x"
expect_error "run a missing config" "nowhere.json: file not found" -- run "$TMP/nowhere.json" --out "$TMP/x"
expect_error "a model file that is a FIFO" "fifo: $SPECIAL" -- run configs/default.json --set model="$TMP/fifo" --out "$TMP/x"
expect_error "a lengths file that is /dev/zero" "/dev/zero: $SPECIAL" -- \
  run configs/default.json --set workload.lengths_file=/dev/zero --out "$TMP/x"

expect_error "import vllm /dev/zero" "/dev/zero: $SPECIAL" -- \
  trace import vllm /dev/zero --model deepseek-v2-lite --out "$TMP/x"
expect_error "import vllm from a FIFO" "fifo: $SPECIAL" -- \
  trace import vllm "$TMP/fifo" --model deepseek-v2-lite --out "$TMP/x"
expect_error "import vllm with --arrivals /dev/zero" "/dev/zero: $SPECIAL" -- \
  trace import vllm $FIX/responses_npy.jsonl --arrivals /dev/zero --model deepseek-v2-lite --out "$TMP/x"
expect_error "import vllm with a model file that is /dev/zero" "/dev/zero: $SPECIAL" -- \
  trace import vllm $FIX/responses_lists.jsonl --model /dev/zero --out "$TMP/x"
expect_error "import azure /dev/zero" "/dev/zero: $SPECIAL" -- trace import azure /dev/zero --out "$TMP/x"
expect_error "import azure from a FIFO" "fifo: $SPECIAL" -- trace import azure "$TMP/fifo" --out "$TMP/x"
expect_error "import mooncake /dev/null" "/dev/null: $SPECIAL" -- trace import mooncake /dev/null --out "$TMP/x"
expect_error "import mooncake from a FIFO" "fifo: $SPECIAL" -- trace import mooncake "$TMP/fifo" --out "$TMP/x"
mkdir "$TMP/esft-data"
cp traces/routing/esft_deepseek_v2_lite/* "$TMP/esft-data/"
ln -sf /dev/zero "$TMP/esft-data/esft_law_top6_u8.bin"
expect_error "import esft with a routing file linked to /dev/zero" "esft_law_top6_u8.bin: $SPECIAL" -- \
  trace import esft --data "$TMP/esft-data" --out "$TMP/x"
check "no output of the failed imports" '[ ! -e "$TMP/x" ]'

# A trace directory whose files are special.
"$REAL" trace import vllm $FIX/responses_lists.jsonl --model deepseek-v2-lite --out "$TMP/good" -q
for kind in zero fifo; do
  cp -r "$TMP/good" "$TMP/tr-$kind"
  rm "$TMP/tr-$kind/requests.jsonl"
  if [ $kind = zero ]; then ln -s /dev/zero "$TMP/tr-$kind/requests.jsonl"; else mkfifo "$TMP/tr-$kind/requests.jsonl"; fi
  expect_error "a trace whose requests.jsonl is $kind" "tr-$kind/requests.jsonl: $SPECIAL" -- \
    run configs/esft.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/tr-$kind" --out "$TMP/x"
done
cp -r "$TMP/good" "$TMP/tr-rfifo"
rm "$TMP/tr-rfifo/routing.bin"
mkfifo "$TMP/tr-rfifo/routing.bin"
expect_error "a trace whose routing.bin is a FIFO" "tr-rfifo/routing.bin: $SPECIAL" -- \
  run configs/esft.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/tr-rfifo" --out "$TMP/x"
cp -r "$TMP/good" "$TMP/tr-mnull"
ln -sf /dev/null "$TMP/tr-mnull/trace.json"
expect_error "a trace whose trace.json is /dev/null" "tr-mnull/trace.json: $SPECIAL" -- \
  run configs/esft.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/tr-mnull" --out "$TMP/x"

ELDRSIM="$TMP/eldrsim-60"

# --- A trace cut or edited after it was written: the manifest's count and checksums catch it.
"$ELDRSIM" trace gen configs/default.json --out "$TMP/gen" --set workload.measured_requests=580 \
  --set workload.warmup_requests=10 --set workload.calibration_requests=10 >/dev/null
"$ELDRSIM" trace gen configs/default.json --out "$TMP/gen-r" --routing --set workload.measured_requests=20 \
  --set workload.warmup_requests=10 --set workload.calibration_requests=10 --set workload.output_tokens=4 \
  --set workload.prompt_max_tokens=64 >/dev/null
check "trace gen records the count and checksums" \
  "grep -q '\"request_count\": 600' '$TMP/gen/trace.json' && grep -q '\"requests_fnv1a64\": \"' '$TMP/gen/trace.json' && grep -q '\"routing_fnv1a64\": \"' '$TMP/gen-r/trace.json'"
GEN_RUN=(--set workload.kind=trace --set workload.arrivals=trace --set workload.warmup_requests=10
         --set workload.calibration_requests=10 -q)
cp -r "$TMP/gen" "$TMP/cut"
head -n 500 "$TMP/gen/requests.jsonl" >"$TMP/cut/requests.jsonl"
expect_error "requests.jsonl cut at a line boundary" "cut/requests.jsonl: 500 requests, not the 600 recorded in trace.json" \
  "cut or edited" "regenerate or re-import" -- run configs/default.json "${GEN_RUN[@]}" --set workload.trace="$TMP/cut" --out "$TMP/x"
cp -r "$TMP/gen" "$TMP/longer"
tail -n 1 "$TMP/gen/requests.jsonl" | sed 's/"id":599/"id":600/' >>"$TMP/longer/requests.jsonl"
expect_error "a request appended to requests.jsonl" "longer/requests.jsonl: 601 requests, not the 600" -- \
  run configs/default.json "${GEN_RUN[@]}" --set workload.trace="$TMP/longer" --out "$TMP/x"
cp -r "$TMP/gen" "$TMP/edited"
sed -i '7s/"output_tokens":\([0-9]*\)/"output_tokens":1\1/' "$TMP/edited/requests.jsonl"
expect_error "one length edited in requests.jsonl" "edited/requests.jsonl: contents differ from the checksum" -- \
  run configs/default.json "${GEN_RUN[@]}" --set workload.trace="$TMP/edited" --out "$TMP/x"
cp -r "$TMP/gen-r" "$TMP/rflip"
size=$(stat -c %s "$TMP/rflip/routing.bin")
# Two expert ids of one token and layer swapped in a record in the middle of the file (distinct,
# so the bytes change): still valid ids, the same size, another pairing of ids and gate values.
$PY - "$TMP/rflip/routing.bin" <<'PYEOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
records, index = struct.unpack_from("<QQ", b, 20)
m = struct.unpack_from("<Q", b, index + 16 * (records // 2))[0]  # the middle record's first id
b[m], b[m + 1] = b[m + 1], b[m]
open(p, "wb").write(b)
PYEOF
check "the damaged routing file keeps its size" '[ "$(stat -c %s "$TMP/rflip/routing.bin")" = "$size" ]'
expect_error "routing.bin edited in place" "rflip/routing.bin: contents differ from the checksum" "cut or edited" -- \
  run configs/default.json "${GEN_RUN[@]}" --set workload.routing=trace --set workload.trace="$TMP/rflip" --out "$TMP/x"
if "$ELDRSIM" run configs/default.json "${GEN_RUN[@]}" --set workload.routing=trace --set workload.trace="$TMP/gen-r" \
  --out "$TMP/run-gen" 2>"$TMP/stderr" && served_from_trace "$TMP/run-gen" "$TMP/gen-r"; then
  ok "the intact trace runs: its requests, all finished"
else
  bad "the intact trace runs: $(cat "$TMP/stderr")"
fi

# --- Whole traces: old or new, never mixed.
cp -r "$TMP/good" "$TMP/keep"
cp -r "$TMP/good" "$TMP/before"
$PY - $FIX/responses_lists.jsonl "$TMP/bad.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
r = json.loads(lines[4])
r["arrival_s"] = "soon"  # line 5 fails, after four good responses
lines[4] = json.dumps(r)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
PYEOF
expect_error "a failing import over an existing trace" "bad.jsonl: line 5: arrival_s" -- \
  trace import vllm "$TMP/bad.jsonl" --model deepseek-v2-lite --out "$TMP/keep"
check "the failed import left the old trace as it was" 'diff -r "$TMP/before" "$TMP/keep" >/dev/null'
check "and no staging directory" '[ -z "$(ls -A "$TMP" | grep -F .eldr-trace-tmp)" ]'
# A failure while routing.bin is being written (arrival times whose difference overflows to infinity,
# blamed on the input line): the new routing.bin must not land beside the old requests.jsonl.
$PY - $FIX/responses_lists.jsonl "$TMP/late.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rs = [json.loads(l) for l in lines]
rs[0]["arrival_s"], rs[1]["arrival_s"] = -1.7e308, 1.7e308
open(sys.argv[2], "w").write("\n".join(json.dumps(r) for r in rs) + "\n")
PYEOF
expect_error "an import failing while its routing file is written" "late.jsonl: line 2: arrival_s" "too far" -- \
  trace import vllm "$TMP/late.jsonl" --model deepseek-v2-lite --out "$TMP/keep"
check "the old trace is still whole (its own routing.bin)" 'diff -r "$TMP/before" "$TMP/keep" >/dev/null'
if "$ELDRSIM" run configs/esft.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/keep" --out "$TMP/run-keep" &&
  served_from_trace "$TMP/run-keep" "$TMP/before"; then
  ok "the old trace still runs: its requests, all finished"
else
  bad "the old trace still runs"
fi
cp -r "$TMP/good" "$TMP/replaced"
if "$ELDRSIM" trace import azure traces/azure2023_code.csv --limit 50 --out "$TMP/replaced" -q; then
  ok "a trace without routing imported over one with routing.bin"
else
  bad "a trace without routing imported over one with routing.bin"
fi
check "no routing.bin remains" '[ ! -e "$TMP/replaced/routing.bin" ] && grep -q "\"routing_file\": null" "$TMP/replaced/trace.json"'
if "$ELDRSIM" run configs/default.json "${RUN_TRACE[@]}" --set workload.trace="$TMP/replaced" --out "$TMP/run-replaced" &&
  served_from_trace "$TMP/run-replaced" "$TMP/replaced"; then
  ok "the replacing trace runs: the Azure requests, all finished"
else
  bad "the replacing trace runs"
fi
cp -r "$TMP/gen-r" "$TMP/regen"
"$ELDRSIM" trace gen configs/default.json --out "$TMP/regen" --set workload.measured_requests=20 \
  --set workload.warmup_requests=0 --set workload.calibration_requests=0 >/dev/null
check "trace gen without --routing over a trace with routing: no routing.bin remains" \
  '[ ! -e "$TMP/regen/routing.bin" ] && grep -q "\"request_count\": 20" "$TMP/regen/trace.json"'
# A directory that holds other files too is written in place: those files stay.
mkdir "$TMP/shared"
echo notes >"$TMP/shared/notes.txt"
cp "$TMP/good/routing.bin" "$TMP/shared/"
"$ELDRSIM" trace import mooncake --limit 30 --out "$TMP/shared" -q
check "import into a directory with other files keeps them, drops the stale routing.bin" \
  '[ -f "$TMP/shared/notes.txt" ] && [ ! -e "$TMP/shared/routing.bin" ] && [ -f "$TMP/shared/trace.json" ]'
expect_error "trace import --out ''" "--out" "must not be empty" -- trace import mooncake --limit 5 --out ''
expect_error "trace gen --out ''" "--out" "must not be empty" -- trace gen configs/default.json --out ''
expect_error "trace import into a file" "exists and is not a directory" -- \
  trace import mooncake --limit 5 --out "$TMP/shared/notes.txt"

# SIGTERM while an import reads a large input: no staging directory, no trace, the old one intact.
$PY - "$TMP/big.csv" <<'PYEOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for i in range(3_000_000):
        f.write(f"2023-11-16 18:{i // 60_000_000 % 60:02d}:{i // 1_000_000 % 60:02d}.{i % 1_000_000:06d}0,{100 + i % 900},{2 + i % 300}\n")
PYEOF
for target in "$TMP/killed-new" "$TMP/killed-old"; do
  [ "$target" = "$TMP/killed-old" ] && cp -r "$TMP/good" "$target" && cp -r "$TMP/good" "$TMP/killed-before"
  "$REAL" trace import azure "$TMP/big.csv" --out "$target" -q 2>"$TMP/kill.err" &
  pid=$!
  # Wait for the staging directory (the import reads for seconds after that), then stop the process
  # there, so the signal lands mid-import however fast the machine: SIGSTOP, SIGTERM, SIGCONT.
  seen=0
  for _ in $(seq 1 400); do
    ls -A "$TMP" | grep -qF .eldr-trace-tmp && seen=1 && break
    [ -d "$target" ] && ls -A "$target" | grep -qF .eldr-trace-tmp && seen=1 && break
    sleep 0.02
  done
  interrupt_mid_way $pid
  rc=$?
  name=$(basename "$target")
  if [ $seen -eq 0 ] || [ $rc -eq 0 ]; then
    bad "$name: the import was not interrupted mid-way (staging seen: $seen, exit $rc)"
    continue
  fi
  check "$name: SIGTERM stops the import: exit 143, one line saying what was kept" \
    '[ $rc -eq 143 ] && [ "$(wc -l <"$TMP/kill.err")" -eq 1 ] && grep -q "^eldrsim: error: interrupted by SIGTERM: .*: no trace written" "$TMP/kill.err"'
  check "$name: no staging directory left" \
    '[ -z "$(ls -A "$TMP" | grep -F .eldr-trace-tmp)" ] && { [ ! -d "$target" ] || [ -z "$(ls -A "$target" | grep -F .eldr-trace-tmp)" ]; }'
  if [ "$target" = "$TMP/killed-new" ]; then
    check "$name: no trace appeared" '[ ! -e "$target" ]'
  else
    check "$name: the old trace is intact" 'diff -r "$TMP/killed-before" "$target" >/dev/null'
  fi
done
rm -f "$TMP/big.csv"
# SIGTERM while trace gen writes its routing: no temporary file or staging directory anywhere.
cp -r "$TMP/good" "$TMP/gen-killed"
"$REAL" trace gen configs/default.json --out "$TMP/gen-killed" --routing --set workload.routing=uniform \
  --set workload.measured_requests=1500 --set workload.warmup_requests=0 --set workload.calibration_requests=0 \
  --set workload.output_tokens=64 --set workload.prompt_max_tokens=256 >/dev/null 2>"$TMP/kill.err" &
pid=$!
seen=0
for _ in $(seq 1 400); do
  ls -A "$TMP" "$TMP/gen-killed" | grep -qE '\.eldr-trace-tmp|\.tmp\.' && seen=1 && break
  sleep 0.02
done
interrupt_mid_way $pid
rc=$?
if [ $seen -eq 0 ] || [ $rc -eq 0 ]; then
  bad "trace gen was not interrupted mid-way (staging seen: $seen, exit $rc)"
else
  check "trace gen: no temporary file or staging directory left" \
    '[ -z "$(ls -A "$TMP" "$TMP/gen-killed" | grep -E "\.eldr-trace-tmp|\.tmp\.")" ]'
  check "trace gen: the old trace is intact" 'diff -r "$TMP/good" "$TMP/gen-killed" >/dev/null'
  check "trace gen: exit 143 and the line says so" \
    '[ $rc -eq 143 ] && grep -q "interrupted by SIGTERM: .*gen-killed: no trace written, the earlier one is intact" "$TMP/kill.err"'
fi
rm -rf "$TMP/gen-killed"

# --- A routing cache damaged in place is rebuilt, with a note; results match an uncached run.
SMALL=(--requests 60 --set workload.warmup_requests=10 --set workload.calibration_requests=10 -q)
"$ELDRSIM" run configs/default.json "${SMALL[@]}" --out "$TMP/uncached" 2>/dev/null
"$ELDRSIM" run configs/default.json "${SMALL[@]}" --routing-cache "$TMP/cache" --out "$TMP/cached" 2>/dev/null
cache=$(ls "$TMP"/cache/generated-*.bin 2>/dev/null | head -1)
check "the run wrote a routing cache file" '[ -n "$cache" ]'
if [ -n "$cache" ]; then
  $PY - "$cache" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
for i in range(len(b) // 2, len(b) // 2 + 64):
    b[i] ^= 0x5A
open(p, "wb").write(b)
PYEOF
  "$ELDRSIM" run configs/default.json "${SMALL[@]}" --routing-cache "$TMP/cache" --out "$TMP/damaged" 2>"$TMP/cache.err"
  drop_sanitizer_noise "$TMP/cache.err"
  check "the damaged cache is noted on stderr, in one line" \
    '[ "$(wc -l <"$TMP/cache.err")" = 1 ] && grep -q "eldrsim: note: .*generated-.*checksum.*rebuilding" "$TMP/cache.err"'
  check "results with the damaged cache equal the uncached run's" 'diff -r "$TMP/uncached" "$TMP/damaged" >/dev/null'
  "$ELDRSIM" run configs/default.json "${SMALL[@]}" --routing-cache "$TMP/cache" --out "$TMP/rebuilt" 2>"$TMP/cache2.err"
  drop_sanitizer_noise "$TMP/cache2.err"
  check "the rebuilt cache is used quietly, same results" '[ ! -s "$TMP/cache2.err" ] && diff -r "$TMP/uncached" "$TMP/rebuilt" >/dev/null'
fi

finish
