"""Shared helpers of the calibration scripts (fit_cost.py, validate.py).

Runs `eldrsim run` as separate processes (one SimGrid engine per process), a few in parallel, and
reads the measured round-robin calibration curve. Standard library + numpy/pandas only.
"""
import argparse
import atexit
import csv
import errno
import hashlib
import io
import json
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ELDRSIM = os.path.join(REPO, "build", "eldrsim")
DEFAULT_CONFIG = os.path.join(REPO, "configs", "default.json")
# The measured curves ship in traces/calibration/ (provenance in traces/README.md): one file per
# workload, given as KIND=PATH (a plain PATH runs the config's own workload kind).
DEFAULT_DATA = [f"{kind}={os.path.join(REPO, 'traces', 'calibration', f'rr_{kind}_tpot.csv')}"
                for kind in ("task", "language")]
# The task workload's main study, every decode router: the training split of the router fit.
DEFAULT_ROUTER_DATA = f"task={os.path.join(REPO, 'traces', 'calibration', 'main_task_all_routers.csv')}"
# The task workload's three ELDR ablations at 60 req/s: training data of the routing inputs.
DEFAULT_ABLATION_DATA = f"task={os.path.join(REPO, 'traces', 'calibration', 'ablations_task.csv')}"
LOAD_BALANCERS = ["random", "round_robin", "jsq", "p2c"]
ROUTERS = LOAD_BALANCERS + ["domain", "eldr"]
CALIBRATED_MODELS = ["qwen3-30b-a3b", "gpt-oss-120b", "gemma-4-26b-a4b"]
# Measured setup of rr_task_tpot.csv (traces/README.md, docs/design.md section 2).
MEASURED_DURATION_S = 120
MEASURED_WARMUP_REQUESTS = 3840


class Fatal(Exception):
    """An error to report as one line: exit 2 for bad input (the default), 1 for a failed simulation."""

    def __init__(self, msg, code=2):
        super().__init__(msg)
        self.code = code


def parse_models(values):
    """--models accepts 'a,b' and/or 'a b'."""
    out = []
    for v in values:
        out += [m for m in v.split(",") if m]
    return out


def split_data_spec(spec):
    """'KIND=PATH' -> (KIND, PATH); a plain 'PATH' -> (None, PATH): the config's own workload."""
    kind, sep, path = spec.partition("=")
    if sep and kind in ("task", "language"):
        return kind, os.path.abspath(path)
    return None, os.path.abspath(spec)


# workload.rate_rps's range in the simulator's config reader (sim/config/experiment.cpp), both ends allowed.
RATE_MIN, RATE_MAX = 1e-6, 1e7
MAX_RUN_REQUESTS = 10_000_000  # requests one run may hold (kMaxRunRequests, sim/config/experiment.cpp)
MEASURED_FORMAT = "the format of traces/calibration/rr_task_tpot.csv"
MEASURED_COLUMNS = ["model", "policy", "rate_rps", "tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "ttft_p50_ms"]


def load_measured(specs, routers=False):
    """Measured curves -> {model: [row dict sorted by (kind, rate, policy)]}, numeric fields as floats
    and "kind" the workload the file was measured on (None: the config's own). `specs`: a 'KIND=PATH'
    or 'PATH' string, or a list of them (one file per workload kind). Round-robin rows only, unless
    `routers`: then every decode router's rows (the main study of traces/calibration/). Every row used
    is checked: a rate the simulator accepts, positive finite latencies, one row per rate and router."""
    if isinstance(specs, str):
        specs = [specs]
    by_model, kinds = {}, set()
    for spec in specs:
        kind, path = split_data_spec(spec)
        if kind in kinds:
            raise Fatal(f"{path}: a second file for workload '{kind or 'of the config'}' (one file per kind)")
        kinds.add(kind)
        header, rows = read_csv_rows(path, "measured data")
        need_columns(path, header, MEASURED_COLUMNS, MEASURED_FORMAT)
        seen = {}
        for line, r in rows:
            if r["policy"] != "round_robin" and not routers:
                continue
            d = measured_row(path, line, r, kind)
            once(seen, (r["model"], r["policy"], d["rate_rps"]), path, line,
                 f"rate_rps: {r['rate_rps']} req/s appears twice for {r['model']} {r['policy']}")
            by_model.setdefault(r["model"], []).append(d)
    for v in by_model.values():
        v.sort(key=lambda d: (d["kind"] or "", d["rate_rps"], d["policy"] != "round_robin", d["policy"]))
    return by_model


def once(seen, key, path, line, problem):
    """Records `key` at `line`; a key seen before is an error naming both lines."""
    if key in seen:
        raise Fatal(f"{path}: line {line}: {problem} (also line {seen[key]}; keep one)")
    seen[key] = line


def need_columns(path, header, columns, fmt):
    for c in columns:
        if c not in header:
            raise Fatal(f"{path}: header: no column '{c}' ({fmt})")


def measured_row(path, line, r, kind):
    """One measured CSV row as a dict, its numbers checked and as floats: a rate the simulator accepts,
    positive finite latencies."""
    d = dict(r, kind=kind, file=path, line=line)
    d["rate_rps"] = number_cell(path, line, "rate_rps", r["rate_rps"], RATE_MIN, RATE_MAX,
                                range_name=" req/s (the simulator's range of workload.rate_rps)")
    for k in ("tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "ttft_p50_ms"):
        d[k] = number_cell(path, line, k, r[k], 0.0, lo_open=True)
    for lo, hi in (("tpot_p50_ms", "tpot_p95_ms"), ("tpot_p95_ms", "tpot_p99_ms")):
        if d[hi] < d[lo]:
            raise Fatal(f"{path}: line {line}: {hi}: {r[hi]} is below {lo} {r[lo]} (a higher percentile is never "
                        f"lower; are the columns swapped?)")
    if r.get("requests", "") != "":
        d["requests"] = number_cell(path, line, "requests", r["requests"], 0.0)
    return d


# How the testbed ran each ablation, as config overrides of its ELDR cells (everything else as the main
# study): ablation -> (the setting's name, its --set lines for a value). The K-means ablation froze both
# variants at the offline fit, so that the balancing alone differs.
ABLATIONS = {
    "locality_band": ("tau", lambda v: [f"eldr.tau={v}"]),
    "kmeans_balance": ("kmeans", lambda v: [f"eldr.kmeans={v}", "eldr.refit=static"]),
    "signature_variant": ("signature", lambda v: [f"eldr.variant={v}"]),
}
ABLATION_FORMAT = "the format of traces/calibration/ablations_task.csv"


def load_ablations(spec):
    """The ablation cells of a 'KIND=PATH' (or 'PATH') -> {model: [ELDR row dict]}, in file order. Each ELDR
    row is a measured row (load_measured's fields) with its "ablation", "setting", the --set lines that
    run it ("overrides") and "baseline": the round-robin row of its worker group, the last one of the
    same model and ablation above it."""
    kind, path = split_data_spec(spec)
    header, rows = read_csv_rows(path, "ablation data")
    need_columns(path, header, MEASURED_COLUMNS + ["ablation", "setting"], ABLATION_FORMAT)
    by_model, baseline, seen = {}, {}, {}
    for line, r in rows:
        d = measured_row(path, line, r, kind)
        group = (r["model"], r["ablation"])
        if r["ablation"] not in ABLATIONS:
            raise Fatal(f"{path}: line {line}: ablation: unknown '{r['ablation']}' (one of {', '.join(ABLATIONS)})")
        if r["policy"] == "round_robin":
            baseline[group] = d
            continue
        if r["policy"] != "eldr":
            raise Fatal(f"{path}: line {line}: policy: '{r['policy']}' (an ablation's cells are round_robin or eldr)")
        d["overrides"] = ablation_overrides(path, line, r["ablation"], r["setting"])
        base = baseline.get(group)
        if base is None or base["rate_rps"] != d["rate_rps"]:
            raise Fatal(f"{path}: line {line}: no round_robin row of {r['model']} {r['ablation']} at "
                        f"{r['rate_rps']} req/s above it (each ELDR cell is compared with its worker group's)")
        d["baseline"] = base
        once(seen, (r["model"], r["setting"], d["rate_rps"]), path, line,
             f"setting: {r['setting']} appears twice for {r['model']} at {r['rate_rps']} req/s")
        by_model.setdefault(r["model"], []).append(d)
    return by_model


def ablation_overrides(path, line, ablation, setting):
    """'tau=0.2' of locality_band -> its --set lines; the value checked enough to be a config value and
    a directory name (the simulator checks the rest)."""
    name, value = ABLATIONS[ablation]
    key, eq, v = setting.partition("=")
    if key != name or not eq or not v.replace(".", "").replace("_", "").isalnum():
        raise Fatal(f"{path}: line {line}: setting: {ablation} wants '{name}=VALUE' (letters, digits, '.', '_'), "
                    f"got {setting!r}")
    if name == "tau":
        number_cell(path, line, "setting", v, 0.0, 2.0, range_name=" (eldr.tau's range)")
    return value(v)


def change_pct(value, base):
    """Percent change of `value` from `base` (negative: lower)."""
    return 100.0 * (value - base) / base


def warn_single_rate(model, rows):
    """One rate cannot tell the cost model's coefficients apart: a warning, the fit still runs."""
    for kind in dict.fromkeys(r["kind"] for r in rows):
        rates = {r["rate_rps"] for r in rows if r["kind"] == kind}
        if len(rates) == 1:
            r = next(r for r in rows if r["kind"] == kind)
            warn(f"{r['file']}: rate_rps: only {r['rate_rps']!r} req/s for {model}: one rate cannot separate "
                 f"decode_bw_efficiency from step_overhead_ms (both move TPOT at one load alike), so the fitted "
                 f"pair is unidentifiable; measure at two rates or more")


def cell_label(row):
    """'task 60' / '60' (a file without a workload kind); 'task 60 eldr' for a router other than round robin."""
    label = f"{row['kind']} {row['rate_rps']:g}" if row.get("kind") else f"{row['rate_rps']:g}"
    policy = row.get("policy", "round_robin")
    label = label if policy == "round_robin" else f"{label} {policy}"
    # A row run with overrides (an ablation's cell) is told apart by its setting: 'task 60 eldr tau=0'.
    return f"{label} {row['setting']}" if row.get("overrides") else label


def kind_sets(row):
    """The --set that runs a measured row's workload kind (none for the config's own)."""
    return [f"workload.kind={row['kind']}"] if row.get("kind") else []


def routing_profile_file(name):
    return os.path.join(REPO, "models", "routing", f"{name}.json")


def gain_pct(cells, router, metric="tpot_sim"):
    """Percent by which `router`'s value is below the best load balancer's among `cells` (dicts with
    "router" and `metric`, one kind and rate); None when a router is missing."""
    by = {c["router"]: c[metric] for c in cells}
    if router not in by or any(b not in by for b in LOAD_BALANCERS):
        return None
    best = min(by[b] for b in LOAD_BALANCERS)
    return (best - by[router]) / best * 100


def fastest(cells, metric="tpot_sim"):
    """The router with the lowest `metric` among `cells` (ties: the first in ROUTERS order)."""
    by = {c["router"]: c[metric] for c in cells}
    return min((r for r in ROUTERS if r in by), key=lambda r: by[r])


def model_file(name):
    return os.path.join(REPO, "models", f"{name}.json")


def load_model(name):
    p = model_file(name)
    if not os.path.isfile(p):
        raise Fatal(f"model file not found: {p}")
    with open(p) as f:
        return json.load(f)


def wait_for_binary(path, timeout_s=300, prog="eldrsim"):
    """The binary is rebuilt concurrently by other work; if it is momentarily missing from a build
    directory, wait for it (up to timeout_s). A path outside any build directory fails at once."""
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return
    build_dir = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        raise Fatal(f"eldrsim binary not found or not executable: {path} (build it with make, or use --eldrsim)")
    print(f"{prog}: waiting up to {timeout_s} s for {path} (rebuild in progress?)", file=sys.stderr, flush=True)
    t0 = time.time()
    while not (os.path.isfile(path) and os.access(path, os.X_OK)):
        if time.time() - t0 > timeout_s:
            raise Fatal(f"eldrsim binary did not reappear within {timeout_s} s: {path}")
        time.sleep(2)


def binary_fingerprint(path):
    """Short sha256 of the eldrsim binary, to record which build produced a table."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:12]


def run_eldrsim(eldrsim, config, out_dir, rate, model, duration_s, warmup, seed,
                router="round_robin", extra_sets=(), retries=5):
    """One `eldrsim run`; returns the parsed summary.json. Exit code 3 (unfinished requests) still
    yields a summary: the caller decides what to do with `unfinished`."""
    cmd = [eldrsim, "run", config, "--router", router, "--rate", repr(float(rate)), "--seed", str(seed),
           "--out", out_dir, "-q",
           "--set", f"model={model}",
           "--set", f"workload.duration_s={float(duration_s)!r}",
           "--set", f"workload.warmup_requests={int(warmup)}"]
    for s in extra_sets:
        cmd += ["--set", s]
    last = None
    for attempt in range(retries):
        wait_for_binary(eldrsim)
        try:
            p = run_child(cmd, cwd=REPO)
        except OSError as e:  # binary replaced between the check and exec ("text file busy", ENOENT)
            last = str(e)
            time.sleep(2)
            continue
        summary_path = os.path.join(out_dir, "summary.json")
        if p.returncode in (0, 3) and os.path.isfile(summary_path):
            with open(summary_path) as f:
                return json.load(f)
        if p.returncode in (126, 127, -9, -11) and attempt + 1 < retries:  # exec trouble or a crash mid-rebuild
            last = (p.stderr or "").strip().splitlines()[-1:] or [f"exit {p.returncode}"]
            last = last[0]
            time.sleep(2)
            continue
        msg = (p.stderr or "").strip().splitlines()
        raise Fatal(f"eldrsim failed (exit {p.returncode}) at {rate!r} req/s: "
                    f"{msg[-1] if msg else 'no message'} [command: {' '.join(cmd)}]", 1)
    raise Fatal(f"eldrsim could not be run: {last} [command: {' '.join(cmd)}]", 1)


def run_many(tasks, jobs):
    """tasks: list of zero-argument callables; runs them `jobs` at a time, returns results in order."""
    if jobs <= 1 or len(tasks) <= 1:
        return [t() for t in tasks]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        futures = [ex.submit(t) for t in tasks]
        return [f.result() for f in futures]


def default_jobs():
    return max(1, min(2, os.cpu_count() or 1))


class ScratchDir:
    """A temporary directory, or a kept one when `keep` names a directory."""

    def __init__(self, keep=None, prefix="eldr-"):
        self.keep = keep
        self.prefix = prefix

    def __enter__(self):
        if self.keep:
            os.makedirs(self.keep, exist_ok=True)
            self.path = self.keep
        else:
            self.path = register_temp(tempfile.mkdtemp(prefix=self.prefix))
        return self.path

    def __exit__(self, *exc):
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
            release_temp(self.path)
        return False


def rel_err_pct(sim, meas):
    return 100.0 * (sim - meas) / meas


def md_table(header, rows, align=None):
    """Markdown table; numbers are pre-formatted strings."""
    align = align or ["---:"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    return "\n".join(lines)


def text_table(header, rows):
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def repo_path(p):
    """Resolve a user path: absolute as is, relative to the current directory."""
    return os.path.abspath(p)


def display_path(p):
    """Path relative to the repository when inside it (for reports and 'source' strings)."""
    a = os.path.abspath(p)
    r = os.path.relpath(a, REPO)
    return a if r.startswith("..") and not a.startswith(os.path.dirname(REPO)) else r


# ---- errors, signals and outputs shared by every script's main ------------------------------------------
# Convention (docs/running.md, exit codes): bad input is one stderr line `eldrsim: error: FILE: FIELD: problem`, exit
# 2; a signal is one line `eldrsim: error: interrupted by SIGNAME: what was kept`, exit 128 + its number;
# neither leaves a temporary file or a half-written set of outputs.
InputError = Fatal

_TEMPS = []          # temporary files and directories to remove on an error or a signal
_CHILDREN = set()    # simulator processes running, ended on a signal
_CHILDREN_LOCK = threading.RLock()  # no child starts between a signal's check and its termination
_STATE = {"kept": "no files written, earlier ones intact", "stopping": False}
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def set_kept(text):
    """What an interruption leaves, for its message ("no files written, earlier ones intact")."""
    _STATE["kept"] = text


def register_temp(path):
    _TEMPS.append(path)
    return path


def release_temp(path):
    if path in _TEMPS:
        _TEMPS.remove(path)


def remove_temps():
    for p in reversed(list(_TEMPS)):
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                os.remove(p)
        except OSError:
            pass
        release_temp(p)


def error_line(msg):
    """One line: newlines in a message (a path, a CSV cell) would split it."""
    return "eldrsim: error: " + " ".join(str(msg).split())


def warn(msg):
    print("eldrsim: warning: " + " ".join(str(msg).split()), file=sys.stderr, flush=True)


def _stop_children():
    with _CHILDREN_LOCK:
        _STATE["stopping"] = True
    for p in list(_CHILDREN):
        try:
            p.terminate()
        except OSError:
            pass
    for p in list(_CHILDREN):
        try:
            p.wait(timeout=5)
        except (subprocess.TimeoutExpired, OSError):
            p.kill()


def _on_signal(signum, frame):
    # Everything is done here and the process ends at once: unwinding would wait for the worker threads,
    # which wait for their simulator runs.
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    _stop_children()
    remove_temps()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os.write(2, (error_line(f"interrupted by {signal.Signals(signum).name}: {_STATE['kept']}") + "\n").encode())
    os._exit(128 + signum)


def count(n, noun, plural=None):
    """'1 run', '2 runs': a count with its noun agreeing."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def ignore_signals():
    """For the last lines of a command whose work is done and whose outputs are in place: a signal then would
    only turn a success into a failure (or, during the interpreter's exit, end it with no line)."""
    if threading.current_thread() is threading.main_thread():
        for s in _SIGNALS:
            signal.signal(s, signal.SIG_IGN)


def current_umask():
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def quiet_matplotlib_cache():
    """Before matplotlib is imported: where its config directory is not writable (HOME read-only, say), a
    temporary one removed at exit, as matplotlib would make, but without its multi-line warning."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    wanted = os.path.join(config, "matplotlib")
    try:
        os.makedirs(wanted, exist_ok=True)
        if os.access(wanted, os.W_OK | os.X_OK):
            return
    except OSError:
        pass
    tmp = tempfile.mkdtemp(prefix="eldr-matplotlib-")
    atexit.register(shutil.rmtree, tmp, True)
    os.environ["MPLCONFIGDIR"] = tmp


def install_signal_handlers():
    if threading.current_thread() is threading.main_thread():
        for s in _SIGNALS:
            signal.signal(s, _on_signal)


def run_main(main, argv=None):
    """Runs a script's main(argv) under the convention above; returns its exit status."""
    install_signal_handlers()
    try:
        return main(argv)
    except Fatal as e:
        remove_temps()
        print(error_line(e), file=sys.stderr)
        return e.code
    except OSError as e:  # a user path the script could not read or write
        remove_temps()
        print(error_line(describe_os_error(e)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # SIGINT arriving before the handler was installed
        _on_signal(signal.SIGINT, None)
    except Exception as e:  # noqa: BLE001 (a bug, not the user's input: still one line, and no temporaries)
        remove_temps()
        where = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "analysis script"
        print(error_line(f"{where}: internal error: {type(e).__name__}: {e} (please report it with the command "
                         f"line)"), file=sys.stderr)
        return 1


def describe_os_error(e, what=None):
    """'FILE: problem' in the OS's words (not "[Errno 28] ..."), with the fix where there is an obvious one."""
    why = e.strerror or str(e)
    if e.errno == errno.ENOSPC:
        why += " (free some space or write elsewhere)"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why += " (write elsewhere, or fix the permissions)"
    parts = [p for p in (e.filename, what, why) if p]
    return ": ".join(str(p) for p in parts)


def run_child(cmd, **kw):
    """subprocess.run(cmd, capture_output=True, text=True) that a signal ends with this script."""
    with _CHILDREN_LOCK:
        if _STATE["stopping"]:
            raise Fatal("interrupted", 1)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        _CHILDREN.add(p)
    try:
        out, err = p.communicate()
    finally:
        _CHILDREN.discard(p)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


# ---- user files -------------------------------------------------------------------------------------------
def check_input_file(path, what="", hint=""):
    """A user's input: a regular file that can be read. Not found, a directory and a special file (which
    could block or never end: /dev/zero, a FIFO) are told apart."""
    where = f"{path}: {what}" if what else path
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Fatal(f"{where}: not found" + (f" ({hint})" if hint else "")) from None
    except OSError as e:
        raise Fatal(f"{where}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise Fatal(f"{where}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise Fatal(f"{where}: is not a regular file (a device, FIFO or socket): give a file")
    if not os.access(path, os.R_OK):
        raise Fatal(f"{where}: not readable (fix its permissions)")
    return path


def read_csv_rows(path, what="", hint=""):
    """A CSV as (header, [(line number, row dict)]) by the csv module (quoted fields work). Errors: a
    special file, not UTF-8, no header, a duplicated column, a row with another number of cells than the
    header (a file cut mid-row) and a last line without its newline (cut)."""
    check_input_file(path, what, hint)
    try:
        # utf-8-sig: a spreadsheet's byte-order mark is not part of the first column's name.
        with open(path, newline="", encoding="utf-8-sig") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise Fatal(f"{path}: not a readable CSV (not UTF-8 text)") from None
    if not text.strip():
        raise Fatal(f"{path}: header: empty file")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)  # strict: an unclosed quote is an error
    try:
        header = next(reader)
        rows = []
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise Fatal(f"{path}: line {line}: {len(cells)} cells, the header has {len(header)} (a row cut or "
                            f"an unquoted comma)")
            rows.append((line, dict(zip(header, cells))))
    except csv.Error as e:
        why = "EOF inside string: a quoted field never closed, the file was cut" if "end of data" in str(e) else str(e)
        raise Fatal(f"{path}: not a readable CSV ({why}; line {reader.line_num})") from None
    seen = set()
    for h in header:
        if h in seen:
            raise Fatal(f"{path}: header: column '{h}' appears twice (keep one)")
        seen.add(h)
    if not text.endswith(("\n", "\r")):
        raise Fatal(f"{path}: line {reader.line_num}: the last line has no end of line (the file was cut; "
                    f"write it again)")
    return header, rows


def number_cell(path, line, column, text, lo=None, hi=None, lo_open=False, range_name=""):
    """A CSV cell as a finite float within [lo, hi] (lo excluded with lo_open); one-line errors that give
    the bound and the value in full (repr: never two roundings that print alike)."""
    where = f"{path}: line {line}: {column}"
    try:
        v = float(text)
    except ValueError:
        raise Fatal(f"{where}: not a number: {text!r}") from None
    if not math.isfinite(v):
        raise Fatal(f"{where}: must be a finite number, got {text!r}")
    below = lo is not None and (v < lo or (lo_open and v == lo))
    if below or (hi is not None and v > hi):
        if lo is not None and hi is not None:
            want = f"between {lo!r} and {hi!r}"
        elif lo is not None:
            want = f"{'above' if lo_open else 'at least'} {lo!r}"
        else:
            want = f"at most {hi!r}"
        got = text if text.strip() == repr(v) else f"{text.strip()} (= {v!r})"
        raise Fatal(f"{where}: must be {want}{range_name}, got {got}")
    return v


def check_output_path(path, what="output"):
    """Before a long computation: `path` can be written (its directory exists or can be created and is
    writable, it is not a directory or a special file), so a fit is not lost at its end."""
    if os.path.isdir(path):
        raise Fatal(f"{path}: {what}: is a directory, not a file")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise Fatal(f"{path}: {what}: is not a regular file (a device, FIFO or socket): give a file")
    check_dir_writable(os.path.dirname(os.path.abspath(path)), path, what)
    return path


def check_dir_writable(d, path, what):
    """Directory `d` (of output `path`) exists and can be written, or can be created."""
    probe = d
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise Fatal(f"{path}: {what}: cannot create its directory: {probe} is not a directory")
    try:  # a real file, not os.access: root passes every access check, a read-only mount does not
        fd, tmp = tempfile.mkstemp(dir=probe, prefix=".eldr-probe-")
        os.close(fd)
        os.remove(tmp)
    except OSError as e:
        raise Fatal(f"{path}: {what}: cannot write in {probe}: {e.strerror} (write elsewhere, or fix the "
                    f"permissions)") from None


# The marker files of directories an output replaces whole (sim/common/output_place.hpp names the same): such
# a directory is replaced only when absent, empty or holding its marker, never a user's own directory.
REPORT_MARKER = ".eldrsim-report"
VALIDATE_MARKER = ".eldrsim-validate"


def check_replaceable_dir(path, marker, noun, what="--out"):
    """Before any work: `path` is absent, an empty directory or `noun` eldr-sim wrote (it holds `marker`)."""
    if os.path.islink(path):
        raise Fatal(f"{path}: {what}: is a symbolic link; eldr-sim replaces a directory whole and does not follow "
                    f"it: give the directory itself or a new path")
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise Fatal(f"{path}: {what}: exists and is not a directory: give a directory to write {noun} in")
    if os.path.isfile(os.path.join(path, marker)) or not os.listdir(path):
        return
    raise Fatal(f"{path}: {what}: exists and is not {noun} eldr-sim wrote (no {marker} in it) and would be "
                f"replaced whole: move it away, or give another path")


def publish_dir(stage, final, marker, noun):
    """Marks `stage` as eldr-sim's and moves it into place as `final` with the signals held off: `final` is the
    old directory or the new one, never none. `final` is checked again (check_replaceable_dir) just before."""
    with open(os.path.join(stage, marker), "w") as f:
        f.write("This directory was written by eldr-sim; the next run of the same command replaces it whole.\n")
    old = None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, list(_SIGNALS))
    try:
        check_replaceable_dir(final, marker, noun)
        if os.path.lexists(final):
            old = register_temp(f"{stage}.old")
            os.rename(final, old)
        os.rename(stage, final)
        release_temp(stage)
        set_kept(f"{display_path(final)} written")
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if old:
        shutil.rmtree(old, ignore_errors=True)
        release_temp(old)


class OutputSet:
    """Files written as a set: each into a temporary file beside it, all renamed at commit(). On an error or
    a signal before commit() the temporaries go and the old files stay; commit() holds signals off so that
    the set is either the old one or the new one."""

    def __init__(self):
        self.staged = []  # (final path, temporary path)
        self.made = []  # directories made for it

    def add(self, path, text=None, write=None):
        """Stage `text`, or what write(temporary_path) writes."""
        d = os.path.dirname(os.path.abspath(path))
        top = d
        while not os.path.exists(os.path.dirname(top)) and os.path.dirname(top) != top:
            top = os.path.dirname(top)
        tmp = None
        try:
            if not os.path.exists(d):  # made for this set: removed again if the set is not written
                self.made.append(register_temp(top))
                os.makedirs(d)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(path)}.tmp-")
            register_temp(tmp)
            with os.fdopen(fd, "w", newline="") as f:
                if text is not None:
                    f.write(text)
            if write is not None:
                write(tmp)
            mode = os.stat(path).st_mode & 0o777 if os.path.isfile(path) else 0o644
            os.chmod(tmp, mode)
        except OSError as e:
            if tmp:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
                release_temp(tmp)
            raise Fatal(describe_os_error(OSError(e.errno, e.strerror, path))) from None
        self.staged.append((path, tmp))
        return path

    def add_csv(self, path, header, rows):
        buf = io.StringIO()
        w = csv.writer(buf)  # RFC 4180 line ends: with "\n" alone a CR inside a label would go unquoted
        w.writerow(header)
        w.writerows(rows)
        return self.add(path, buf.getvalue())

    def commit(self):
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            for path, tmp in self.staged:
                os.replace(tmp, path)
                release_temp(tmp)
            for d in self.made:
                release_temp(d)
            set_kept("outputs written")
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        self.staged = []

    def discard(self):
        for _, tmp in self.staged:
            try:
                os.remove(tmp)
            except OSError:
                pass
            release_temp(tmp)
        for d in self.made:
            shutil.rmtree(d, ignore_errors=True)
            release_temp(d)
        self.staged = []


class ArgumentParser(argparse.ArgumentParser):
    """argparse with its errors as one line (not usage plus a message), exit 2."""

    def error(self, message):
        remove_temps()
        print(error_line(f"{self.prog}: {message} (see --help)"), file=sys.stderr)
        sys.exit(2)


# At import, before a script's heavy imports: a signal during them is reported as any other.
install_signal_handlers()
