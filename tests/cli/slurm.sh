#!/usr/bin/env bash
# `eldrsim sweep --emit-slurm` on a real Slurm: starts a private single-node cluster on localhost
# (munged, slurmctld, slurmd from Debian's munge and slurm-wlm, each in the foreground with its own key,
# socket, ports, state and logs under a temporary directory: nothing in /etc or /run is touched),
# submits a small sweep's job array and merge step, waits for them, and checks the merged
# combined.csv equals a local run's byte for byte. Every wait is bounded; the daemons are stopped
# (by their PIDs) and the directory removed on any exit.
# Skips (exit 77, ctest SKIP_RETURN_CODE) when not root or when the packages are missing
# (`make deps` installs them).
# Usage: slurm.sh PATH/TO/eldrsim   (run from the project root)
set -u
ELDRSIM=$(realpath "${1:?usage: slurm.sh PATH/TO/eldrsim}")
[ -f configs/default.json ] || { echo "run from the project root"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (munged and slurmd run as root here)"
for b in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd sbatch squeue sinfo munge; do
  command -v "$b" >/dev/null || skip "$b not found: install Debian's slurm-wlm and munge (make deps)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eldr-slurm.XXXXXX")
chmod 755 "$TMP"
PIDS=()
WATCHDOG=
# Processes of this cluster only: the daemons started here, and whatever carries this cluster's
# SLURM_CONF in its environment (slurmstepd, the jobs).
own_pids() {
  local e
  for e in /proc/[0-9]*/environ; do
    grep -qzx "SLURM_CONF=$TMP/slurm.conf" "$e" 2>/dev/null && basename "$(dirname "$e")"
  done
}
stop_all() {
  local p
  for p in "$@"; do kill "$p" 2>/dev/null; done
  for p in "$@"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
  done
}
cleanup() {
  [ -n "$WATCHDOG" ] && kill "$WATCHDOG" 2>/dev/null
  stop_all "${PIDS[@]}"
  stop_all $(own_pids | grep -vx "$$")
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "FAIL: stopped (signal or the 280 s watchdog)"; exit 1' INT TERM
# Whatever happens, end well before ctest's timeout, so that the trap stops the daemons.
(sleep 280 && kill -TERM $$) >/dev/null 2>&1 &
WATCHDOG=$!
. "$(dirname "$0")/lib.sh"
logs() {  # the daemons' last words, on failure
  local f
  for f in "$TMP"/munge/munged.log "$TMP"/slurmctld.log "$TMP"/slurmd.log "$TMP"/*.out "$TMP"/job/logs/*; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }
  done
}
fail_now() { echo "FAIL $*"; logs; echo "$pass passed, $((failures + 1)) failed"; exit 1; }
# wait_for SECONDS COMMAND...: polls COMMAND every 0.5 s until it succeeds; false if it never does.
wait_for() {
  local n=$(($1 * 2))
  shift
  for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}

# munge: its own key and socket.
mkdir -p "$TMP/munge" "$TMP/state" "$TMP/spool"
chmod 711 "$TMP/munge"
head -c 1024 /dev/urandom >"$TMP/munge/munge.key"
chmod 600 "$TMP/munge/munge.key"
SOCK="$TMP/munge/munge.sock"
/usr/sbin/munged -F -f --socket="$SOCK" --key-file="$TMP/munge/munge.key" --log-file="$TMP/munge/munged.log" \
  --pid-file="$TMP/munge/munged.pid" --seed-file="$TMP/munge/munged.seed" >"$TMP/munged.out" 2>&1 &
PIDS+=($!)
wait_for 20 bash -c "munge -S '$SOCK' -n | unmunge -S '$SOCK'" || fail_now "munged did not come up"
echo "ok   munged up"

# Two free ports on the loopback for slurmctld and slurmd.
read -r CTLD_PORT SLURMD_PORT < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
HOST=$(uname -n)
HOST=${HOST%%.*}  # slurmd takes the short host name as its node name
cat >"$TMP/slurm.conf" <<CONF
ClusterName=eldrtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=eldr Nodes=ALL Default=YES MaxTime=30 State=UP
CONF
export SLURM_CONF="$TMP/slurm.conf"
/usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$TMP/slurmctld.out" 2>&1 &
PIDS+=($!)
/usr/sbin/slurmd -D -f "$SLURM_CONF" >"$TMP/slurmd.out" 2>&1 &
PIDS+=($!)
node_idle() { [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; }
wait_for 60 node_idle || fail_now "the Slurm node did not become idle within 60 s"
echo "ok   slurmctld and slurmd up, node idle"

# The sweep: 4 small points (two of them ELDR).
cat >"$TMP/small.json" <<'JSON'
{ "name": "small", "base": "configs/default.json",
  "set": { "workload.measured_requests": 150, "workload.warmup_requests": 0, "workload.calibration_requests": 300,
           "eldr.mask_pairs": 3000 },
  "grid": { "router": ["round_robin", "eldr"], "workload.rate_rps": [20, 40] } }
JSON
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/local" -j 2 -q
"$ELDRSIM" sweep "$TMP/small.json" --out "$TMP/cluster" --emit-slurm "$TMP/job" --slurm-options "--time=00:10:00" >/dev/null ||
  fail_now "--emit-slurm failed"
bash "$TMP/job/submit.sh" >"$TMP/submit.out" 2>&1 || fail_now "submit.sh failed: $(cat "$TMP/submit.out")"
read -r ARRAY MERGE < <(sed -n 's/^array job \([0-9]*\), merge job \([0-9]*\)$/\1 \2/p' "$TMP/submit.out")
check "submitted a job array and a merge job" '[ -n "${ARRAY:-}" ] && [ -n "${MERGE:-}" ]'
jobs_gone() { [ -z "$(squeue -h -j "$ARRAY,$MERGE" 2>/dev/null)" ] && squeue -h >/dev/null 2>&1; }
wait_for 150 jobs_gone || fail_now "the jobs did not finish within 150 s: $(squeue 2>&1)"
check "every array task ran (4 logs)" '[ $(ls "$TMP"/job/logs/point-*.out 2>/dev/null | wc -l) = 4 ]'
check "the merge step wrote combined.csv" '[ -f "$TMP/cluster/combined.csv" ] && grep -q "4 points ->" "$TMP/job/logs/merge.out"'
check "the merged results equal a local run's" 'cmp -s "$TMP/cluster/combined.csv" "$TMP/local/combined.csv"'
check "and so does every point's requests.csv" 'for d in "$TMP"/local/small/*/; do cmp -s "$d/requests.csv" "$TMP/cluster/small/$(basename "$d")/requests.csv" || exit 1; done'
[ "$failures" = 0 ] || logs
finish
