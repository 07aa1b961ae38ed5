#!/usr/bin/env bash
# Times the default scenario at 1x, 4x and 16x its size: wall clock and peak RSS of whole eldrsim
# runs under round robin (RR) and ELDR, pinned to one core, median of REPS runs, with the CPU time.
#
#   bench/scale_runs.sh ELDRSIM [OUT]     (OUT defaults to results/bench/scale.md)
#
# Runs, each with --router round_robin and --router eldr, 120 s of measured traffic after a warm-up
# of 480 requests per prefill worker:
#   1x    configs/default.json --rate 100: 8P16D on 5 nodes, 12,000 + 3,840 requests
#   4x    configs/scale/4x.json: 32P64D on 20 nodes, 400 req/s, 48,000 + 15,360 requests
#   16x   configs/scale/16x.json: 128P256D on 80 nodes, 1600 req/s, 192,000 + 61,440 requests;
#         only with SCALE16=1 (minutes per run)
# Environment: REPS (default 3) runs per row; the table reports the median wall time and the
# largest peak RSS of the repetitions.
set -euo pipefail

usage() { echo "usage: $0 ELDRSIM [OUT]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ELDRSIM=$(realpath "$1")
OUT=$(realpath -m "${2:-$ROOT/results/bench/scale.md}")
REPS=${REPS:-3}
[[ -x $ELDRSIM ]] || { echo "$0: not an executable: $1" >&2; exit 2; }
. "$ROOT/bench/run_timer.sh"
cd "$ROOT"  # the configs and the files they name resolve from the project root

SCALES=(1x 4x)
[[ ${SCALE16:-0} == 1 ]] && SCALES+=(16x)
echo "timing $ELDRSIM, ${PIN[*]:-unpinned}, $REPS runs each, scales ${SCALES[*]}" >&2
for s in "${SCALES[@]}"; do
  config=(configs/scale/$s.json)
  [[ $s == 1x ]] && config=(configs/default.json --rate 100)
  for r in round_robin eldr; do
    time_run "$s $r" run "${config[@]}" --router "$r" -q
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
TABLE=$(
  echo "| scale | simulated requests | RR wall s | ELDR wall s | ELDR / RR wall | RR CPU s | ELDR CPU s | ELDR / RR CPU | RR peak RSS MB | ELDR peak RSS MB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for i in "${!SCALES[@]}"; do
    rr=$((2 * i)) el=$((2 * i + 1))
    printf '| %s | %d | %.3f | %.3f | %s | %.2f | %.2f | %s | %.1f | %.1f |\n' "${SCALES[i]}" "${REQS[rr]}" \
      "${WALL[rr]}" "${WALL[el]}" "$(ratio "${WALL[el]}" "${WALL[rr]}")" \
      "${CPU[rr]}" "${CPU[el]}" "$(ratio "${CPU[el]}" "${CPU[rr]}")" "${RSS[rr]}" "${RSS[el]}"
  done
)

mkdir -p "$(dirname "$OUT")"
{
  echo "# eldrsim at scale"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), eldrsim at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- sim 2>/dev/null || echo ' (+ uncommitted sim/ changes)'),"
  echo "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), ${PIN[*]:-not pinned}."
  echo "Wall clock: median of $REPS runs (bash \$EPOCHREALTIME around \`/usr/bin/time -v\`); CPU: its user + system"
  echo "time, median; peak RSS: its Maximum resident set size, largest of the $REPS runs; simulated requests"
  echo "include the warm-up. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "$TABLE"
} >"$OUT"

echo
echo "$TABLE"
echo "-> $OUT"
