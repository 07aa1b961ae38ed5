# Sourced by bench/time_runs.sh and bench/scale_runs.sh, which set ELDRSIM, REPS and ROOT first:
# time_run NAME ARGS... times REPS runs of `eldrsim ARGS --out SCRATCH` under /usr/bin/time -v, pinned
# to core 0 where taskset works, and appends the median wall time, the largest peak RSS and the number
# of simulated requests to the arrays NAMES, WALL, RSS and REQS, and the median CPU time (user + system)
# to CPU: on a shared machine the CPU time moves less than the wall time.
[[ -x /usr/bin/time ]] || { echo "$0: needs /usr/bin/time (Debian package 'time')" >&2; exit 2; }

PIN=()
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
  PIN=(taskset -c 0)
fi

SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
NAMES=() ; WALL=() ; RSS=() ; REQS=() ; CPU=()

# median of the arguments (numbers)
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
maximum() { printf '%s\n' "$@" | sort -g | tail -1; }

# time_run NAME ARGS...: REPS runs of eldrsim ARGS; appends one table row.
time_run() {
  local name=$1; shift
  local walls=() rsss=() cpus=() i out log t0 t1 wall rss rc
  for ((i = 1; i <= REPS; i++)); do
    out="$SCRATCH/run"
    rm -rf "$out"
    log="$SCRATCH/time.log"
    rc=0
    t0=${EPOCHREALTIME:-}
    "${PIN[@]}" /usr/bin/time -v -o "$log" "$ELDRSIM" "$@" --out "$out" >"$SCRATCH/stdout" 2>"$SCRATCH/stderr" || rc=$?
    t1=${EPOCHREALTIME:-}
    if [[ $rc -ne 0 ]]; then
      echo "$0: '$name' failed (exit $rc): eldrsim $*" >&2
      cat "$SCRATCH/stderr" >&2
      exit 1
    fi
    if [[ -n $t0 && -n $t1 ]]; then  # bash >= 5: microsecond wall clock
      wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", b - a}')
    else  # /usr/bin/time's h:mm:ss.ss / m:ss.ss
      wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (j = 1; j <= n; j++) s = s * 60 + p[j]; printf "%.4f", s}' "$log")
    fi
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2 / 1024}' "$log")
    cpus+=("$(awk -F': ' '/(User|System) time \(seconds\)/ {s += $2} END {printf "%.2f", s}' "$log")")
    walls+=("$wall"); rsss+=("$rss")
  done
  NAMES+=("$name")
  WALL+=("$(median "${walls[@]}")")
  RSS+=("$(maximum "${rsss[@]}")")
  CPU+=("$(median "${cpus[@]}")")
  REQS+=("$(($(wc -l <"$out/requests.csv") - 1))")  # every simulated request, warm-up included
  printf '%-16s %8s s  %7s MB  %7s requests  (walls: %s)\n' "$name" "${WALL[-1]}" "${RSS[-1]}" "${REQS[-1]}" "${walls[*]}" >&2
}

