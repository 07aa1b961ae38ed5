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

. "$(dirname "$0")/lib.sh"

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
printf '{ "model": "qwen3-30b-a3b", "workload": { "rate_rps": 1e500 } }\n' >"$TMP/overflow.json"

expect_error "unknown key in config" "$TMP/unknown_key.json" "workload.rate_rsp" "unknown key" -- \
  run "$TMP/unknown_key.json" "${SMALL[@]}"
expect_error "unknown top-level key" "$TMP/top_level_typo.json" ": routr: unknown key" -- \
  run "$TMP/top_level_typo.json" "${SMALL[@]}"
expect_error "rate as a string" "$TMP/rate_string.json" "workload.rate_rps" "must be a number" -- \
  run "$TMP/rate_string.json" "${SMALL[@]}"
expect_error "negative rate via --set: blames --set" "--set: workload.rate_rps" "got -5" -- \
  run "$DEFAULT" --set workload.rate_rps=-5 "${SMALL[@]}"
expect_error "zero decode instances" "$TMP/zero_decode.json" "topology.decode.instances" -- \
  run "$TMP/zero_decode.json" "${SMALL[@]}"
expect_error "zero decode instances via --set" "--set: topology.decode.instances" -- \
  run "$DEFAULT" --set topology.decode.instances=0 "${SMALL[@]}"
expect_error "more instances than GPUs" "$TMP/too_many.json" "topology.decode.instances" "do not fit" -- \
  run "$TMP/too_many.json" "${SMALL[@]}"
expect_error "unknown router: blames --router" "--router: unknown value 'foo'" -- \
  run "$DEFAULT" --router foo "${SMALL[@]}"
expect_error "missing config file" "$TMP/nowhere.json" "file not found" -- \
  run "$TMP/nowhere.json" "${SMALL[@]}"
expect_error "model that does not exist" "--set: model: " "nope.json" -- \
  run "$DEFAULT" --set model=nope "${SMALL[@]}"
expect_error "malformed JSON" "$TMP/malformed.json" "invalid JSON" -- \
  run "$TMP/malformed.json" "${SMALL[@]}"
expect_error "number beyond a double" "$TMP/overflow.json" "invalid JSON: number overflow parsing '1e500'" -- \
  run "$TMP/overflow.json" "${SMALL[@]}"
expect_error "number beyond a double via --set" "--set: workload.rate_rps" "not a usable JSON value" -- \
  run "$DEFAULT" --set workload.rate_rps=1e500 "${SMALL[@]}"
expect_error "--set without =" "--set" "workload.rate_rps" "KEY=VALUE" -- \
  run "$DEFAULT" --set workload.rate_rps "${SMALL[@]}"
expect_error "--set into a non-object" "--set: model.name" -- \
  run "$DEFAULT" --set model.name=x "${SMALL[@]}"
expect_error "kv memory too small for the weights" "qwen3-30b-a3b.json" "(weights)" -- \
  run "$DEFAULT" --set serving.kv_memory_fraction=0.2 "${SMALL[@]}"

# Bad model, hardware and cluster files (copies of the real ones with one field broken).
/usr/bin/python3 - "$TMP" <<'EOF2'
import json, sys
tmp = sys.argv[1]
def broken(src, name, mutate):
    doc = json.load(open(src))
    mutate(doc)
    json.dump(doc, open(f"{tmp}/{name}", "w"), indent=2)
broken("models/qwen3-30b-a3b.json", "model_type.json", lambda d: d.__setitem__("layers", "many"))
broken("models/qwen3-30b-a3b.json", "model_topk.json", lambda d: d.__setitem__("top_k", 0))
broken("models/hardware/mi300x.json", "hw_range.json", lambda d: d.__setitem__("hbm_bandwidth_TBps", -1))
broken("configs/cluster/mi300x-5node.json", "cluster_key.json", lambda d: d.__setitem__("nics_per_gpu", 2))
EOF2
expect_error "model file: wrong type" "model_type.json" ": layers: " "must be an integer" -- \
  run "$DEFAULT" --set model="$TMP/model_type.json" "${SMALL[@]}"
expect_error "model file: out-of-range value" "model_topk.json" ": top_k: " "must be between" -- \
  run "$DEFAULT" --set model="$TMP/model_topk.json" "${SMALL[@]}"
cp configs/cluster/mi300x-5node.json "$TMP/cluster_hw.json"
sed -i "s|\"hardware\": \"mi300x\"|\"hardware\": \"$TMP/hw_range.json\"|" "$TMP/cluster_hw.json"
expect_error "hardware file: out-of-range value" "hw_range.json" ": hbm_bandwidth_TBps: " "must be between" -- \
  run "$DEFAULT" --set cluster="$TMP/cluster_hw.json" "${SMALL[@]}"
expect_error "cluster file: unknown key" "cluster_key.json" ": nics_per_gpu: unknown key" -- \
  run "$DEFAULT" --set cluster="$TMP/cluster_key.json" "${SMALL[@]}"
# Unreadable: a directory where a file should be (root reads any file, so permissions cannot show it).
mkdir -p "$TMP/a_directory.json"
expect_error "config that is a directory" "a_directory.json" "is a directory" -- run "$TMP/a_directory.json" "${SMALL[@]}"
expect_error "model that is a directory" ": model: " "a_directory.json is a directory, not a file" -- \
  run "$DEFAULT" --set model="$TMP/a_directory.json" "${SMALL[@]}"
# Binary garbage where JSON is expected.
head -c 300 /dev/urandom >"$TMP/garbage.json"
expect_error "config that is binary garbage" "garbage.json" -- run "$TMP/garbage.json" "${SMALL[@]}"
# Traces: a wrong format version, and a routing file of another version.
"$ELDRSIM" trace gen "$DEFAULT" --set workload.measured_requests=3 --set workload.warmup_requests=0 \
  --set workload.calibration_requests=0 --set workload.prompt_max_tokens=64 --set workload.output_tokens=2 \
  --routing --out "$TMP/tr" >/dev/null
cp -r "$TMP/tr" "$TMP/tr-v9"
sed -i 's/"version": 1/"version": 9/' "$TMP/tr-v9/trace.json"
expect_error "trace of another format version" "tr-v9/trace.json: version: " -- \
  run "$DEFAULT" --set workload.kind=trace --set workload.trace="$TMP/tr-v9" "${SMALL[@]}"
cp -r "$TMP/tr" "$TMP/tr-rv"
/usr/bin/python3 - "$TMP/tr-rv/routing.bin" <<'EOF2'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[8] = 99  # the version field follows the 8-byte magic
open(p, "wb").write(bytes(b))
EOF2
expect_error "routing file of another version" "tr-rv/routing.bin: " "version" -- \
  run "$DEFAULT" --set workload.kind=trace --set workload.trace="$TMP/tr-rv" --set workload.routing=trace \
  --set workload.calibration_requests=0 "${SMALL[@]}"
# Prompt sharing keys: inconsistent pairs.
expect_error "system prompts without a length" "$DEFAULT" "workload.system_prompt_tokens" "need both" -- \
  run "$DEFAULT" --set workload.system_prompts=4 "${SMALL[@]}"

# Command-line errors CLI11 reports also exit 2.
"$ELDRSIM" run "$DEFAULT" --rate -5 "${SMALL[@]}" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then ok "--rate -5 exits 2"; else bad "--rate -5 exited $rc, want 2"; fi
"$ELDRSIM" frobnicate >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then ok "unknown subcommand exits 2"; else bad "unknown subcommand exited $rc, want 2"; fi

# Nothing was written for any failed run.
[ -e "$OUT" ] && bad "an output directory was created by a failing run"

# And a good small run succeeds, so the cases above fail for their own reason.
if "$ELDRSIM" run "$DEFAULT" "${SMALL[@]}" && [ -f "$OUT/summary.json" ]; then
  ok "a valid small run exits 0 and writes summary.json"
else
  bad "the valid control run failed"
fi

finish
