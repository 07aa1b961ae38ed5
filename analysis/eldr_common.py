"""Shared helpers of the calibration scripts (fit_cost.py, validate.py).

Runs `eldrsim run` as separate processes (one SimGrid engine per process), a few in parallel, and
reads the measured round-robin calibration curve. Standard library + numpy/pandas only.
"""
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
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
LOAD_BALANCERS = ["random", "round_robin", "jsq", "p2c"]
ROUTERS = LOAD_BALANCERS + ["domain", "eldr"]
CALIBRATED_MODELS = ["qwen3-30b-a3b", "gpt-oss-120b", "gemma-4-26b-a4b"]
# Measured setup of rr_task_tpot.csv (data/README.md, docs/design.md section 2).
MEASURED_DURATION_S = 120
MEASURED_WARMUP_REQUESTS = 3840


class Fatal(Exception):
    """An error to report as one line: exit 2 for bad input (the default), 1 for a failed simulation."""

    def __init__(self, msg, code=2):
        super().__init__(msg)
        self.code = code


def die(prog, msg, code=2):
    print(f"{prog}: error: {msg}", file=sys.stderr)
    sys.exit(code)


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


def load_measured(specs, routers=False):
    """Measured curves -> {model: [row dict sorted by (kind, rate, policy)]}, numeric fields as floats
    and "kind" the workload the file was measured on (None: the config's own). `specs`: a 'KIND=PATH'
    or 'PATH' string, or a list of them (one file per workload kind). Round-robin rows only, unless
    `routers`: then every decode router's rows (the main study of traces/calibration/)."""
    if isinstance(specs, str):
        specs = [specs]
    need = ["model", "policy", "rate_rps", "tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "ttft_p50_ms"]
    by_model, kinds = {}, set()
    for spec in specs:
        kind, path = split_data_spec(spec)
        if kind in kinds:
            raise Fatal(f"{path}: a second file for workload '{kind or 'of the config'}' (one file per kind)")
        kinds.add(kind)
        if not os.path.isfile(path):
            raise Fatal(f"calibration data not found: {path} (use --data)")
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or any(c not in rows[0] for c in need):
            raise Fatal(f"{path}: expected columns {', '.join(need)}")
        for r in rows:
            if r["policy"] != "round_robin" and not routers:
                continue
            d = dict(r, kind=kind, file=path)
            for k in ("rate_rps", "requests", "tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "ttft_p50_ms"):
                if k in d and d[k] != "":
                    try:
                        d[k] = float(d[k])
                    except ValueError:
                        raise Fatal(f"{path}: {k}: not a number: '{d[k]}'")
            by_model.setdefault(r["model"], []).append(d)
    for v in by_model.values():
        v.sort(key=lambda d: (d["kind"] or "", d["rate_rps"], d["policy"] != "round_robin", d["policy"]))
    return by_model


def cell_label(row):
    """'task 60' / '60' (a file without a workload kind); 'task 60 eldr' for a router other than round robin."""
    label = f"{row['kind']} {row['rate_rps']:g}" if row.get("kind") else f"{row['rate_rps']:g}"
    policy = row.get("policy", "round_robin")
    return label if policy == "round_robin" else f"{label} {policy}"


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
    cmd = [eldrsim, "run", config, "--router", router, "--rate", f"{rate:g}", "--seed", str(seed),
           "--out", out_dir, "-q",
           "--set", f"model={model}",
           "--set", f"workload.duration_s={duration_s:g}",
           "--set", f"workload.warmup_requests={int(warmup)}"]
    for s in extra_sets:
        cmd += ["--set", s]
    last = None
    for attempt in range(retries):
        wait_for_binary(eldrsim)
        try:
            p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
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
        raise Fatal(f"eldrsim failed (exit {p.returncode}) at {rate:g} req/s: "
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
            self.path = tempfile.mkdtemp(prefix=self.prefix)
        return self.path

    def __exit__(self, *exc):
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
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


def write_atomic(path, text):
    """Write via a temporary file in the same directory; keeps an existing file's mode (else 0644)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def repo_path(p):
    """Resolve a user path: absolute as is, relative to the current directory."""
    return os.path.abspath(p)


def display_path(p):
    """Path relative to the repository when inside it (for reports and 'source' strings)."""
    a = os.path.abspath(p)
    r = os.path.relpath(a, REPO)
    return a if r.startswith("..") and not a.startswith(os.path.dirname(REPO)) else r
