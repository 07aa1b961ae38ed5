#!/usr/bin/env bash
# Runs the libFuzzer harnesses, each seeded from the project's own files (fuzz/README.md).
#   fuzz/run.sh BUILD_DIR [LIBFUZZER_LIMIT] [HARNESS...]
# LIBFUZZER_LIMIT is a libFuzzer option such as -max_total_time=60 (the default) or -runs=10000000.
# Corpora grow in BUILD_DIR/fuzz-corpus/<harness>; a finding leaves BUILD_DIR/fuzz-findings/<harness>/
# crash-* (add it to fuzz/regressions/<harness>/ once fixed) and makes this script exit 1.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD_DIR [LIBFUZZER_LIMIT] [HARNESS...]}
limit=${2:--max_total_time=60}
shift $(( $# >= 2 ? 2 : 1 ))
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(config model hardware cluster trace_manifest trace_requests routing_file azure mooncake vllm scheduler json strings)

seeds() {  # the project's own inputs of each kind
  case $1 in
    config)         ls configs/*.json ;;
    model)          ls models/*.json ;;
    hardware)       ls models/hardware/*.json ;;
    cluster)        ls configs/cluster/*.json ;;
    trace_manifest) ls fuzz/seeds/trace.json ;;
    trace_requests) ls fuzz/seeds/requests.jsonl ;;
    routing_file)   ls fuzz/seeds/routing*.bin ;;
    azure)          ls fuzz/seeds/azure.csv ;;
    mooncake)       ls fuzz/seeds/mooncake.jsonl ;;
    vllm)           ls fuzz/seeds/vllm*.jsonl ;;
    scheduler)      ls configs/scheduler/*.yaml ;;
    json)           ls fuzz/seeds/json-* ;;
    strings)        ls fuzz/seeds/strings-* ;;
  esac
}

failed=0
for h in "${harnesses[@]}"; do
  exe="$build/fuzz/fuzz_$h"
  [ -x "$exe" ] || { echo "fuzz: no harness $exe (build with -DELDR_FUZZ=ON --target fuzzers)"; failed=1; continue; }
  corpus="$build/fuzz-corpus/$h" findings="$build/fuzz-findings/$h"
  mkdir -p "$corpus" "$findings"
  for f in $(seeds "$h") fuzz/regressions/"$h"/* fuzz/corpus/"$h"/*; do [ -f "$f" ] && cp "$f" "$corpus/"; done
  max_len=8192
  [ "$h" = routing_file ] && max_len=65536
  log="$build/fuzz-$h.log"
  if "$exe" "$corpus" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$findings/" \
       -print_final_stats=1 "$limit" >"$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    echo "fuzz: $h ok, ${runs:-?} executions, corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "fuzz: $h FOUND A PROBLEM: see $log and $findings"
    grep -m3 -E 'ERROR|not an InputError|not one line|SUMMARY' "$log"
    failed=1
  fi
done
exit $failed
