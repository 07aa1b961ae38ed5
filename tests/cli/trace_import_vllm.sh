#!/usr/bin/env bash
# `eldrsim trace import vllm` end to end on the hand-made fixtures of tests/data/vllm/ (the same six
# responses as nested lists and as base64 .npy; make_fixtures.py): both import to the same trace,
# which runs with its routing replayed; and bad responses (exit 2, one stderr line naming the line and
# the field): a wrong shape, an id out of range, a truncated base64 string, a missing array.
# Usage: trace_import_vllm.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=${1:?usage: trace_import_vllm.sh PATH/TO/eldrsim}
[ -f configs/esft.json ] || { echo "run from the project root (no configs/esft.json here)"; exit 1; }
FIX=tests/data/vllm
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-vllm.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

imp() { "$ELDRSIM" trace import vllm "$@" >"$TMP/stdout" 2>"$TMP/stderr"; }

if imp "$FIX/responses_lists.jsonl" --model deepseek-v2-lite --out "$TMP/lists" &&
  grep -qF "wrote 6 requests (0 calibration)" "$TMP/stdout"; then
  ok "import the nested-lists fixture: $(head -1 "$TMP/stdout")"
else
  bad "import the nested-lists fixture: $(cat "$TMP/stdout" "$TMP/stderr" | head -c 400)"
fi
check "the import says whose ids they are" \
  "grep -qF \"model: expert ids of 'deepseek-ai/DeepSeek-V2-Lite' (the responses' model field), checked against\" '$TMP/stdout'"
if imp "$FIX/responses_npy.jsonl" --model models/deepseek-v2-lite.json --arrivals "$FIX/arrivals.csv" \
  --out "$TMP/npy"; then
  ok "import the base64 .npy fixture (int16, int32, format 2.0) with arrivals joined from a CSV"
else
  bad "import the base64 .npy fixture: $(cat "$TMP/stderr")"
fi
check "both encodings give the same requests" "cmp -s '$TMP/lists/requests.jsonl' '$TMP/npy/requests.jsonl'"
check "both encodings give the same routing" "cmp -s '$TMP/lists/routing.bin' '$TMP/npy/routing.bin'"

# The imported trace runs with its routing replayed; every request finishes.
if "$ELDRSIM" run configs/esft.json --set workload.trace="$TMP/npy" --set workload.arrivals=trace \
  --set workload.warmup_requests=0 --set workload.calibration_requests=0 -q --out "$TMP/run" &&
  $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(not (s["unfinished"] == 0 and s["requests"] == 6))' \
    "$TMP/run/summary.json"; then
  ok "configs/esft.json replays the imported vLLM trace, all 6 requests finish"
else
  bad "run of the imported vLLM trace: $(head -c 300 "$TMP/run/summary.json" 2>/dev/null)"
fi

# --- Bad responses, made from the fixtures: line N of FILE with one change (a Python expression on r).
mutate() {  # mutate SRC LINE OUT CODE
  $PY - "$1" "$2" "$3" "$4" <<'PYEOF'
import json, sys
src, n, out, code = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = open(src).read().splitlines()
r = json.loads(lines[n - 1])
exec(code)
lines[n - 1] = json.dumps(r, separators=(",", ":"))
open(out, "w").write("\n".join(lines) + "\n")
PYEOF
}
# Line 2 of the lists fixture has its arrays at top level; line 1 of the .npy fixture too.
mutate $FIX/responses_lists.jsonl 2 "$TMP/shape.jsonl" 'r["routed_experts"] = [t[:25] for t in r["routed_experts"]]'
expect_error "wrong shape" "shape.jsonl: line 2: routed_experts: shape (5, 25, 6) (tokens, layers, top_k) does not fit" \
  "26 MoE layers, top-6" -- trace import vllm "$TMP/shape.jsonl" --model deepseek-v2-lite --out "$TMP/x"
mutate $FIX/responses_lists.jsonl 3 "$TMP/ragged.jsonl" 'r["choices"][0]["routed_experts"][2][7] = [1, 2]'
expect_error "ragged lists" "ragged.jsonl: line 3: choices[0].routed_experts[2][7]: expected a list of 6 expert ids" -- \
  trace import vllm "$TMP/ragged.jsonl" --model deepseek-v2-lite --out "$TMP/x"
mutate $FIX/responses_lists.jsonl 4 "$TMP/range.jsonl" 'r["prompt_routed_experts"][3][10][2] = 64'
expect_error "id out of range" "range.jsonl: line 4: prompt_routed_experts[3][10]: expert id 64 out of range" \
  "has 64 experts (0..63)" -- trace import vllm "$TMP/range.jsonl" --model deepseek-v2-lite --out "$TMP/x"
mutate $FIX/responses_npy.jsonl 1 "$TMP/trunc.jsonl" 'r["prompt_routed_experts"] = r["prompt_routed_experts"][:-6]'
expect_error "truncated base64" "trunc.jsonl: line 1: prompt_routed_experts: base64:" "(truncated?)" -- \
  trace import vllm "$TMP/trunc.jsonl" --model deepseek-v2-lite --arrivals $FIX/arrivals.csv --out "$TMP/x"
mutate $FIX/responses_npy.jsonl 1 "$TMP/trunc4.jsonl" 'r["routed_experts"] = r["routed_experts"][:-8]'
expect_error "base64 cut at a group boundary: short npy data" "trunc4.jsonl: line 1: routed_experts: npy data of" \
  "(truncated?)" -- trace import vllm "$TMP/trunc4.jsonl" --model deepseek-v2-lite --arrivals $FIX/arrivals.csv --out "$TMP/x"
mutate $FIX/responses_npy.jsonl 2 "$TMP/missing.jsonl" 'del r["choices"][0]["routed_experts"]'
expect_error "missing array" "missing.jsonl: line 2: routed_experts: missing" "--enable-return-routed-experts" -- \
  trace import vllm "$TMP/missing.jsonl" --model deepseek-v2-lite --arrivals $FIX/arrivals.csv --out "$TMP/x"
mutate $FIX/responses_lists.jsonl 2 "$TMP/usage.jsonl" 'r["usage"]["prompt_tokens"] += 1'
expect_error "prompt length against usage" "usage.jsonl: line 2: prompt_routed_experts: 30 tokens, but usage.prompt_tokens is 31" -- \
  trace import vllm "$TMP/usage.jsonl" --model deepseek-v2-lite --out "$TMP/x"
expect_error "no arrival time" "responses_npy.jsonl: line 1: arrival_s: missing" -- \
  trace import vllm $FIX/responses_npy.jsonl --model deepseek-v2-lite --out "$TMP/x"
expect_error "unknown model" "models/no-such-model.json" -- \
  trace import vllm $FIX/responses_npy.jsonl --model no-such-model --out "$TMP/x"

# --- vLLM's own layout (responses_chat.jsonl; docs/trace-format.md cites the server code): chat
# completions whose choices[0].routed_experts is one base64 .npy (uint8) over the prompt and every
# generated token but the last, a row per decoder layer (DeepSeek's dense first layer all zeros).
if imp "$FIX/responses_chat.jsonl" --model deepseek-v2-lite --out "$TMP/chat" &&
  grep -qF "wrote 6 requests (0 calibration)" "$TMP/stdout"; then
  ok "import vLLM's chat completions (one whole-sequence array a choice, dense layer rows)"
else
  bad "import vLLM's chat completions: $(cat "$TMP/stdout" "$TMP/stderr" | head -c 400)"
fi
check "vLLM's layout gives the same routing as the split arrays" "cmp -s '$TMP/lists/routing.bin' '$TMP/chat/routing.bin'"
check "and the requests' lengths from usage" \
  "[ \"\$(sed -n 4p '$TMP/chat/requests.jsonl')\" = '{\"id\":3,\"arrival_s\":1.25,\"prompt_tokens\":9,\"output_tokens\":5,\"label\":\"legal\",\"routing_record\":3}' ]"
if "$ELDRSIM" run configs/esft.json --set workload.trace="$TMP/chat" --set workload.arrivals=trace \
  --set workload.warmup_requests=0 --set workload.calibration_requests=0 -q --out "$TMP/run-chat"; then
  ok "configs/esft.json replays the trace imported from vLLM's layout"
else
  bad "run of the trace imported from vLLM's layout"
fi
mutate $FIX/responses_chat.jsonl 2 "$TMP/nousage.jsonl" 'del r["usage"]'
expect_error "whole-sequence array without usage" "nousage.jsonl: line 2: choices[0].routed_experts" \
  "no usage.prompt_tokens to split it by" -- trace import vllm "$TMP/nousage.jsonl" --model deepseek-v2-lite --out "$TMP/x"
mutate $FIX/responses_chat.jsonl 3 "$TMP/dense.jsonl" '
import base64, io, numpy as np
a = np.load(io.BytesIO(base64.b64decode(r["choices"][0]["routed_experts"])))
a[:, 0, :] = np.arange(6)  # the dense row is not zeros: 27 layers cannot be told apart
f = io.BytesIO(); np.save(f, a); r["choices"][0]["routed_experts"] = base64.b64encode(f.getvalue()).decode()'
expect_error "27 decoder layers, none of them all zeros" "dense.jsonl: line 3: choices[0].routed_experts" \
  "has 27 layers" "26 MoE layers, and 0 layers hold only zeros" -- \
  trace import vllm "$TMP/dense.jsonl" --model deepseek-v2-lite --out "$TMP/x"

# --- A response twice, or its arrays twice with different content.
$PY - $FIX/responses_npy.jsonl "$TMP/dup.jsonl" <<'PYEOF'
import sys
lines = open(sys.argv[1]).read().splitlines()
open(sys.argv[2], "w").write("\n".join(lines + [lines[1]]) + "\n")  # line 7 repeats line 2
PYEOF
expect_error "a response id on two lines (--arrivals)" "dup.jsonl: line 7: id: 'cmpl-a0' is also the id of line 2" -- \
  trace import vllm "$TMP/dup.jsonl" --model deepseek-v2-lite --arrivals $FIX/arrivals.csv --out "$TMP/x"
mutate $FIX/responses_lists.jsonl 4 "$TMP/dup2.jsonl" 'r["id"] = "cmpl-a1"'
expect_error "a response id on two lines (arrival fields)" "dup2.jsonl: line 4: id: 'cmpl-a1' is also the id of line 1" -- \
  trace import vllm "$TMP/dup2.jsonl" --model deepseek-v2-lite --out "$TMP/x"
mutate $FIX/responses_lists.jsonl 2 "$TMP/both.jsonl" '
r["choices"][0]["routed_experts"] = [t[:] for t in r["routed_experts"]]
r["choices"][0]["routed_experts"][0][0] = list(reversed(r["routed_experts"][0][0]))'
expect_error "arrays at the top level and in choices[0], different" \
  "both.jsonl: line 2: routed_experts: given both at the top level and in choices[0], with different content" -- \
  trace import vllm "$TMP/both.jsonl" --model deepseek-v2-lite --out "$TMP/x"
mutate $FIX/responses_lists.jsonl 2 "$TMP/both-same.jsonl" '
r["choices"][0]["routed_experts"] = r["routed_experts"]
r["choices"][0]["prompt_routed_experts"] = r["prompt_routed_experts"]'
if imp "$TMP/both-same.jsonl" --model deepseek-v2-lite --out "$TMP/both-same" &&
  cmp -s "$TMP/lists/routing.bin" "$TMP/both-same/routing.bin"; then
  ok "arrays given twice with the same content are accepted"
else
  bad "arrays given twice with the same content: $(cat "$TMP/stderr")"
fi
[ -e "$TMP/x" ] && bad "a failing import wrote $TMP/x" || ok "no failing import wrote an output"

finish
