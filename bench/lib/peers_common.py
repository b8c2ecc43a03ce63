# SPDX-License-Identifier: Apache-2.0
"""The parts of the peers benchmark that need no PyTorch and no GPU (bench/lib/peers.py uses
them on the H200; bench/lib/peers_selftest.py and `peers.py --dry-run` test them anywhere):
spec loading and shapes, how each parameter is drawn, tolerances, bars, the summary
table, cold-start runs of build-dev/hk_bench_cold, pack metadata through libhkrt, the
environment, and the JSON lines written.

Every record written is one JSON object per line with a "kind":
  env         GPU, driver, CUDA, torch, triton, hkc versions, machine, command line
  latency     spec, batch, system, ms (median of per-call CUDA-event times), p10/p90, iters,
              rounds, rotate, round_ms (median per round), and for compiled systems compile_s
  compare     spec, batch, system, against ("eager" | "float64"), rel, worst, ok
  skip        spec, batch, system, reason (timeout, budget, error text, not requested)
  cold_hkc    spec, batch, runs (hk_bench_cold's JSON per process), medians
  cold_torch  spec, batch, cache ("cold" | "warm"), import_s, ctx_s, setup_s, first_call_s, ...
  build       spec, target, where, cold_s, warm_s, pack_bytes (bench/lib/build_times.sh, device too)
  sizes       spec, pack_bytes, libhkrt_bytes
  point       spec, batch, best_peer, best_peer_ms, hkc_ms, ratio, bar, met (the verdict)
"""
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from reference import eval_dim  # noqa: E402  (the project's dim-expression rules)

# Systems in table order; the last is hkc, the others are the peers.
SYSTEMS = ["eager", "cudagraph", "compile", "max-autotune", "hkc"]
PEERS = SYSTEMS[:-1]
LABEL = {"eager": "PyTorch eager", "cudagraph": "eager + CUDA graph", "compile": "torch.compile",
         "max-autotune": "torch.compile max-autotune", "hkc": "hkc (libhkrt)"}

# Every system's output against eager's, both in bf16: ||out - eager|| / ||eager|| <= 3e-2 and
# every element |out - eager| <= 0.15 * (1 + |eager|) -- the project's bf16 bounds against a
# float64 reference (tests/device/check.py TOL), applied here between two bf16 computations
# of the same function (each is within ~1e-2 of float64, so their difference is too).
TOL_VS_EAGER = (3e-2, 1.5e-1)

# Bars (earlier ones were 0.6 / 1.0, 50 ms, 60 s for sm_90): hkc time / best peer
# time. bert_layer at batch 1 and 8: 0.6; every other point 0.95.
BARS = {"bert_layer": {1: 0.6, 8: 0.6}}
BAR_ELSEWHERE = 0.95
COLD_START_BAR_MS = 20.0  # open -> first result, beyond CUDA context creation (bert_layer)
BUILD_BAR_S = 30.0        # bert_layer for sm_90a, all buckets, cold, on the 2-core CPU machine


def bar_for(spec_name, batch):
    return BARS.get(spec_name, {}).get(batch, BAR_ELSEWHERE)


# ---- specs ----------------------------------------------------------------------------------
def load_spec(path):
    import yaml
    with open(path) as f:
        spec = yaml.safe_load(f)
    for key in ("name", "batch_sizes", "graph", "outputs"):
        if key not in spec:
            raise ValueError("%s: no `%s`" % (path, key))
    spec.setdefault("dims", {})
    spec["dims"] = spec["dims"] or {}
    spec.setdefault("inputs", {})
    spec.setdefault("params", {})
    spec["inputs"] = spec["inputs"] or {}
    spec["params"] = spec["params"] or {}
    spec.setdefault("dtype", "f32")
    # Node attributes written as dim expressions (`heads: kv_heads`) become numbers here, so
    # every consumer (the torch module, check.py's ops without dims) sees what hkc resolved.
    for node in spec["graph"]:
        for key in ("heads", "kv_heads"):
            if isinstance(node.get(key), str):
                node[key] = eval_count(node[key], spec["dims"])
    return spec


def eval_count(expr, dims):
    """An integer dim expression over the spec's dims (no `batch`)."""
    import re
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/() ]+", expr):
        raise ValueError("bad dim expression %r" % expr)
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(dims)))


def shapes(spec, batch):
    """{name: [int, ...]} of every input and param at this batch."""
    out = {}
    for kind in ("inputs", "params"):
        for name, shape in spec[kind].items():
            out[name] = [eval_dim(d, spec["dims"], batch) for d in shape]
    return out


def batch_dependent_params(spec):
    a, b = shapes(spec, 1), shapes(spec, 2)
    return [n for n in spec["params"] if a[n] != b[n]]


def param_roles(spec):
    """How each param is used, which decides how it is drawn (init_rule):
    ("weight", fan_in) for a gemm's B (fan_in = K: rows, or columns when trans_b),
    ("gamma",), ("beta",), ("bias",) or ("other",)."""
    roles = {}
    params = spec["params"]
    shp = shapes(spec, 1)
    for node in spec["graph"]:
        op = node["op"]
        if op == "gemm" and len(node["in"]) > 1 and node["in"][1] in params:
            b = node["in"][1]
            k = shp[b][-1] if node.get("trans_b", False) else shp[b][0]
            roles[b] = ("weight", k)
        for key in ("gamma", "beta", "bias"):
            if key in node and node[key] in params:
                roles.setdefault(node[key], (key,))
    for name in params:
        roles.setdefault(name, ("weight", shp[name][0]) if len(shp[name]) >= 2 else ("other",))
    return roles


def init_rule(spec, name):
    """(mean, std) of the normal distribution a tensor is drawn from: inputs N(0, 1);
    weights N(0, 1/K) (std 1/sqrt(fan-in): activations keep unit scale through each gemm);
    norm gains 1 + N(0, 0.1^2); norm shifts and biases N(0, 0.02^2). Never zeros."""
    if name in spec["inputs"]:
        return 0.0, 1.0
    role = param_roles(spec)[name]
    if role[0] == "weight":
        return 0.0, 1.0 / math.sqrt(max(role[1], 1))
    if role[0] == "gamma":
        return 1.0, 0.1
    if role[0] in ("beta", "bias"):
        return 0.0, 0.02
    return 0.0, 1.0


# ---- statistics and the verdict -----------------------------------------------------------------
def median(xs):
    return statistics.median(xs) if xs else float("nan")


def quantile(xs, q):
    if not xs:
        return float("nan")
    s = sorted(xs)
    i = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[i]


def points(records):
    """The verdict per (spec, batch) from latency records: best peer, hkc / best, bar, met.
    A point with no hkc figure or no peer figure has ratio None and met None."""
    lat = {}
    for r in records:
        if r.get("kind") == "latency":
            lat.setdefault((r["spec"], r["batch"]), {})[r["system"]] = r["ms"]
    out = []
    for (spec, batch) in sorted(lat):
        figs = lat[(spec, batch)]
        peers = {s: ms for s, ms in figs.items() if s in PEERS and ms is not None and math.isfinite(ms)}
        best = min(peers, key=peers.get) if peers else None
        hkc = figs.get("hkc")
        ratio = hkc / peers[best] if best and hkc else None
        bar = bar_for(spec, batch)
        out.append({"kind": "point", "spec": spec, "batch": batch, "best_peer": best,
                    "best_peer_ms": peers.get(best) if best else None, "hkc_ms": hkc, "ratio": ratio, "bar": bar,
                    "met": None if ratio is None else ratio <= bar,
                    "peers_measured": sorted(peers, key=PEERS.index),
                    "peers_missing": [s for s in PEERS if s not in peers]})
    return out


def fmt_ms(x):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return "%.4f" % x if x < 1 else "%.3f" % x


def table(records):
    """The printed summary: per spec and batch, every system's median ms, hkc / best peer,
    the bar and whether it is met; then every failed comparison and skip."""
    lines = []
    pts = {(p["spec"], p["batch"]): p for p in points(records)}
    lat = {}
    for r in records:
        if r.get("kind") == "latency":
            lat[(r["spec"], r["batch"], r["system"])] = r["ms"]
    skips = {(r["spec"], r["batch"], r["system"]): r["reason"] for r in records if r.get("kind") == "skip"}
    head = "%-12s %5s " % ("spec", "batch") + " ".join("%12s" % s for s in SYSTEMS) + \
        " %12s %7s %5s  %s" % ("best peer", "hkc/bp", "bar", "verdict")
    lines.append(head)
    for (spec, batch), p in sorted(pts.items()):
        cells = []
        for s in SYSTEMS:
            ms = lat.get((spec, batch, s))
            cells.append("%12s" % (fmt_ms(ms) if ms is not None else ("skip" if (spec, batch, s) in skips else "-")))
        ratio = "%7.3f" % p["ratio"] if p["ratio"] is not None else "%7s" % "-"
        verdict = "-" if p["met"] is None else ("met" if p["met"] else "MISSED")
        if p["peers_missing"] and p["met"] is not None:
            verdict += " (without %s)" % ", ".join(p["peers_missing"])
        lines.append("%-12s %5d " % (spec, batch) + " ".join(cells) +
                     " %12s %s %5.2f  %s" % (p["best_peer"] or "-", ratio, p["bar"], verdict))
    lines.append("times: median ms per call (CUDA events around each call, inputs rotated); "
                 "hkc/bp = hkc / best peer; bar: hkc/bp must be <= bar")
    bad = [r for r in records if r.get("kind") == "compare" and not r["ok"]]
    for r in bad:
        lines.append("MISMATCH %s batch %d: %s vs %s: rel %.3e, worst %.2f" % (r["spec"], r["batch"], r["system"],
                                                                            r["against"], r["rel"], r["worst"]))
    for (spec, batch, s), why in sorted(skips.items()):
        lines.append("not measured: %s batch %d %s: %s" % (spec, batch, s, why))
    for r in records:
        if r.get("kind") == "cold_hkc":
            m = r["median"]
            verdict = "" if r.get("met") is None else (" (bar %g ms: %s)" % (r["bar_ms"], "met" if r["met"] else "MISSED"))
            lines.append("cold start %s batch %d, median of %d processes: CUDA context %s ms, then first result %s ms "
                         "after opening the pack%s" % (r["spec"], r["batch"], len(r["runs"]), fmt_ms(m.get("ctx_ms")),
                                                       fmt_ms(m.get("first_result_ms")), verdict))
        elif r.get("kind") == "cold_torch":
            lines.append("torch.compile first call in a fresh process, %s cache, %s batch %d: %.2f s (import torch "
                         "%.2f s, CUDA context %.2f s)" % (r["cache"], r["spec"], r["batch"], r["first_call_s"],
                                                           r["import_s"], r["ctx_s"]))
        elif r.get("kind") == "build" and "cold_s" in r:
            lines.append("hkc build %s for %s on the %s (%s cores): cold %.2f s, warm %.2f s" % (
                r["spec"], r["target"], "CPU machine" if r["where"] == "cpu" else "GPU machine's CPUs", r.get("cores"),
                r["cold_s"], r["warm_s"]))
    comp = {}
    for r in records:
        if r.get("kind") == "latency" and r.get("compile_s") is not None:
            comp.setdefault((r["spec"], r["system"]), []).append((r["batch"], r["compile_s"]))
    for (spec, s), xs in sorted(comp.items()):
        lines.append("compile time (first call) of %s, %s: %s" % (LABEL[s], spec, ", ".join(
            "batch %d %.1f s" % x for x in sorted(xs))))
    return "\n".join(lines)


# ---- JSON lines ------------------------------------------------------------------------------------
class Writer:
    """Appends records to a JSON lines file (flushed at once, so a run cut short keeps what it
    measured) and keeps them for the summary."""

    def __init__(self, path):
        self.records = []
        self.f = open(path, "a") if path else None

    def __call__(self, rec):
        self.records.append(rec)
        if self.f:
            self.f.write(json.dumps(rec, sort_keys=True) + "\n")
            self.f.flush()


def read_jsonl(paths):
    out = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    return out


# ---- time budget -------------------------------------------------------------------------------------
class Deadline:
    """Wall-clock budget of the run (None: unlimited). left() in seconds."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds if seconds else None

    def left(self):
        return float("inf") if self.end is None else self.end - time.monotonic()


# ---- libhkrt: pack metadata --------------------------------------------------------------------------
def pack_info(path):
    """Name, targets and batch sizes of a pack, through libhkrt's public API (the hkrt package;
    the pack is read, never run)."""
    import hkrt_load
    with hkrt_load.hkrt.Pack.open(path, metadata_only=True) as pack:
        return {"name": pack.name, "targets": pack.targets, "batch_sizes": [int(b) for b in pack.batch_sizes],
                "bytes": os.path.getsize(path)}


# ---- cold start of the hkc pack: separate processes ------------------------------------------------------
def parse_cold(stdout):
    """hk_bench_cold prints its figures in words, then one JSON line last."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in hk_bench_cold's output:\n" + stdout[-2000:])


def cold_hkc(binary, pack, batch, runs, target=None, timeout=60):
    """Runs hk_bench_cold `runs` times, each a fresh process; returns (record fields, error).
    Medians of each phase; process_s is the wall time of the whole process (exec, dynamic
    loading, context, first result, second run, teardown)."""
    res, err = [], None
    for _ in range(runs):
        cmd = [binary, pack, "--batch", str(batch)] + (["--target", target] if target else [])
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            err = "hk_bench_cold timed out after %d s" % timeout
            break
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            err = "hk_bench_cold exited %d: %s" % (p.returncode, (p.stdout + p.stderr).strip()[-600:])
            break
        r = parse_cold(p.stdout)
        r["process_s"] = wall
        res.append(r)
    med = {}
    for key in ("ctx_ms", "open_ms", "create_ms", "upload_ms", "run_ms", "sync_ms", "first_result_ms",
                "first_result_no_upload_ms", "second_run_ms", "process_s"):
        vals = [r[key] for r in res if r.get(key) is not None]
        med[key] = median(vals) if vals else None
    return {"runs": res, "median": med}, err


# ---- environment ---------------------------------------------------------------------------------
def sh(cmd, timeout=30):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, shell=isinstance(cmd, str))
        return p.stdout.strip() if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def machine_env(hkc=None, hkrt_lib=None):
    """What can be read without torch: GPU and driver (nvidia-smi), OS, CPU, hkc."""
    env = {"kind": "env", "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "hostname": platform.node(), "python": platform.python_version(), "argv": sys.argv,
           "cpu_count": os.cpu_count()}
    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit",
              "--format=csv,noheader"])
    if smi:
        f = [x.strip() for x in smi.splitlines()[0].split(",")]
        env.update({"gpu": f[0], "driver": f[1], "gpu_memory": f[2], "sm_clock_max": f[3],
                    "power_limit": f[4] if len(f) > 4 else None})
    top = sh("nvidia-smi | grep -o 'CUDA Version: [0-9.]*'")
    if top:
        env["driver_cuda"] = top.split(":")[1].strip()
    try:
        with open("/etc/os-release") as f:
            env["os"] = re.search(r'PRETTY_NAME="([^"]*)"', f.read()).group(1)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            env["cpu"] = m.group(1) if m else None
    except OSError:
        pass
    if hkc:
        env["hkc_version"] = sh([hkc, "--version"])
        t = sh([hkc, "targets"]) or ""
        m = re.search(r"nvrtc ([0-9.]+)", t)
        env["nvrtc"] = m.group(1) if m else None
    if hkrt_lib and os.path.exists(hkrt_lib):
        env["libhkrt_bytes"] = os.path.getsize(os.path.realpath(hkrt_lib))
    commit = os.path.join(ROOT, "build-dev", "peers", "commit.txt")
    if os.path.exists(commit):
        with open(commit) as f:
            env["commit"] = f.read().strip()
    return env


def estimate_s(spec, batches, systems, cold_runs, torch_cold):
    """A rough run-time estimate in seconds (printed before the run; the deadline is what
    bounds it). Compile times per batch are guesses from the size of the spec's graph."""
    gemms = sum(1 for n in spec["graph"] if n["op"] == "gemm")
    big = max((math.prod(s) for s in shapes(spec, 1).values()), default=0) > 8e6
    comp = (40 if big else 25) + 2 * gemms
    mat = (120 if big else 70) + 8 * gemms
    t = 20.0 + 5 * len(batches) * sum(s in systems for s in ("eager", "cudagraph", "hkc"))
    t += cold_runs * 1.5
    if "compile" in systems:
        t += len(batches) * (comp + 3)
    if "max-autotune" in systems:
        t += len(batches) * (mat + 3)
    if torch_cold:
        t += 2 * 10 + comp + 10
    return t
