#!/usr/bin/env bash
# Times whole eldrsim runs: wall clock and peak RSS, pinned to one core, median of REPS runs.
#
#   bench/time_runs.sh ELDRSIM [OUT]     (OUT defaults to results/bench/runs.md)
#
# Runs (all: configs/default.json, 100 req/s, results written to a scratch directory):
#   S1             round robin, 120 s of measured traffic (12,000 requests) after the default
#                  3840-request warm-up; expected unions (the default, workload.union=expected)
#   S1 sampled     the same with per-token sampled unions (workload.union=sampled): the yardstick
#                  that the expected rows are divided by, measured in the same call
#   S1 ELDR, S1 ELDR sampled   the same two with router eldr (its fit, signatures and refits)
#   S1 no warm-up  round robin without warm-up
#   scale 30/120/480 s   no warm-up, 3,000 / 12,000 / 48,000 requests: cost should grow linearly
# Environment: REPS (default 3) runs per row; the table reports the median wall time and the
# largest peak RSS of the repetitions.
set -euo pipefail

usage() { echo "usage: $0 ELDRSIM [OUT]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ELDRSIM=$(realpath "$1")
OUT=$(realpath -m "${2:-$ROOT/results/bench/runs.md}")
REPS=${REPS:-3}
[[ -x $ELDRSIM ]] || { echo "$0: not an executable: $1" >&2; exit 2; }

. "$ROOT/bench/run_timer.sh"
cd "$ROOT"  # configs/default.json and the files it names resolve from the project root

BASE=(run configs/default.json --rate 100 --router round_robin -q)
ELDR=(run configs/default.json --rate 100 --router eldr -q)
echo "timing $ELDRSIM, ${PIN[*]:-unpinned}, $REPS runs each" >&2
time_run "S1" "${BASE[@]}"
time_run "S1 sampled" "${BASE[@]}" --set workload.union=sampled
time_run "S1 ELDR" "${ELDR[@]}"
time_run "S1 ELDR sampled" "${ELDR[@]}" --set workload.union=sampled
time_run "S1 no warm-up" "${BASE[@]}" --set workload.warmup_requests=0
for d in 30 120 480; do
  time_run "scale ${d} s" "${BASE[@]}" --set workload.warmup_requests=0 --set workload.duration_s=$d
done

# Linear fit of the scale runs: wall = a + b * requests; a one-hour trace (360,000 requests at
# 100 req/s) extrapolated from it, against docs/design.md section 8's "within 40x of S1".
read -r FIT_A FIT_B < <(for i in 5 6 7; do echo "${REQS[i]} ${WALL[i]}"; done |
  awk '{n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2}
       END {b = (n * sxy - sx * sy) / (n * sxx - sx * sx); printf "%.6g %.6g\n", (sy - b * sx) / n, b}')
HOUR=$(awk -v a="$FIT_A" -v b="$FIT_B" 'BEGIN {printf "%.2f", a + b * 360000}')
HOUR_RATIO=$(awk -v h="$HOUR" -v s="${WALL[0]}" 'BEGIN {printf "%.1f", h / s}')

verdict() { awk -v v="$1" -v lim="$2" 'BEGIN {print (v <= lim) ? "ok" : "OVER"}'; }

TABLE=$(
  echo "| run | wall s (median of $REPS) | peak RSS MB | simulated requests | us / request |"
  echo "|---|---:|---:|---:|---:|"
  for i in "${!NAMES[@]}"; do
    printf '| %s | %.3f | %.1f | %d | %.1f |\n' "${NAMES[i]}" "${WALL[i]}" "${RSS[i]}" "${REQS[i]}" \
      "$(awk -v w="${WALL[i]}" -v n="${REQS[i]}" 'BEGIN {print 1e6 * w / n}')"
  done
)

mkdir -p "$(dirname "$OUT")"
{
  echo "# eldrsim whole-run timings"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), eldrsim at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD -- sim 2>/dev/null || echo ' (+ uncommitted sim/ changes)'),"
  echo "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), ${PIN[*]:-not pinned}."
  echo "Command: \`eldrsim ${BASE[*]} [--set ...]\`; wall clock from bash \$EPOCHREALTIME around \`/usr/bin/time -v\`,"
  echo "peak RSS = its Maximum resident set size (largest of the $REPS runs)."
  echo
  echo "$TABLE"
  echo
  echo "Budgets (docs/design.md section 8 / foundation issue):"
  echo
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
  echo "- S1 (round robin) wall $(printf %.3f "${WALL[0]}") s <= 0.4 s: $(verdict "${WALL[0]}" 0.4); $(ratio "${WALL[0]}" "${WALL[1]}") x the sampled mode"
  echo "- S1 peak RSS ${RSS[0]} MB <= 80 MB: $(verdict "${RSS[0]}" 80)"
  echo "- S1 ELDR wall $(printf %.3f "${WALL[2]}") s <= 0.6 s: $(verdict "${WALL[2]}" 0.6); $(ratio "${WALL[2]}" "${WALL[3]}") x the sampled mode"
  echo "- Linear fit of the scale runs: wall = $(printf %.3f "$FIT_A") s + $(awk -v b="$FIT_B" 'BEGIN {printf "%.1f", 1e6 * b}') us x requests; a one-hour trace (360,000 requests)"
  echo "  extrapolates to ${HOUR} s = ${HOUR_RATIO}x S1 <= 30x: $(verdict "$HOUR_RATIO" 30)"
} >"$OUT"

echo
echo "$TABLE"
echo
sed -n '/^Budgets/,$p' "$OUT" | tail -n +3
echo "-> $OUT"
