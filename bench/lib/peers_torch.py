# SPDX-License-Identifier: Apache-2.0
"""The GPU half of bench/lib/peers.py (needs PyTorch and a CUDA GPU): the spec as a PyTorch
module, the five systems, timing, comparisons, and the torch.compile first-call worker.

The peers compute the spec's function in the spec's dtype (bf16) with PyTorch's own ops:
every op through tests/device/check.py's run_node (the project's PyTorch semantics of each
op), except two that the peers run the way a PyTorch user writes them, for speed:
  gemm  F.linear on a weight stored [N, K] (nn.Linear's layout; a transposed contiguous
        copy of the spec's [K, N] tensor, made once), bias in the cuBLASLt epilogue, then
        check.act, the `mul` and `residual` epilogue (act(A @ B + bias) * mul + residual);
  rope  rotate-half with cos/sin tables computed once in float32 and stored in bf16 (as
        Hugging Face's Llama does), applied to [batch, seq, heads * dh]; a packed q|k|v
        (`packed: true`) rotates its q and k heads and passes v on.
`--reference-ops` runs check.run_node for every op instead. Either way every system's
output is compared with a float64 evaluation of check.run_node (the independent reference),
so a peer that computed something else would fail the run.
"""
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "device"))
import check  # noqa: E402  (run_node, act, compare, TOL: the ops in PyTorch)
import hkrt_load  # noqa: E402  (the hkrt package, python/hkrt)
import peers_common as pc  # noqa: E402

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
L2_BYTES = 60 << 20  # H200: inputs rotate over enough sets to pass twice this, 2..8 sets


def versions():
    v = {"torch": torch.__version__, "cuda_runtime": torch.version.cuda,
         "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    try:
        import triton
        v["triton"] = triton.__version__
    except ImportError:
        v["triton"] = None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        v.update({"gpu_torch": torch.cuda.get_device_name(0), "sm_count": p.multi_processor_count,
                  "capability": "%d.%d" % (p.major, p.minor)})
    return v


# ---- data: the same for every system -------------------------------------------------------------
def _seed(*parts):
    h = 1469598103934665603
    for x in parts:
        h = ((h ^ (x & 0xFFFFFFFFFFFF)) * 1099511628211) & 0x7FFFFFFFFFFFFFFF
    return h


def draw(spec, name, shape, dev, *seed_parts):
    mean, std = pc.init_rule(spec, name)
    g = torch.Generator(device=dev).manual_seed(_seed(*seed_parts))
    x = torch.randn(shape, generator=g, device=dev, dtype=torch.float32) * std + mean
    return x.to(DT[spec["dtype"]]).contiguous()


def make_params(spec, seed, dev):
    if pc.batch_dependent_params(spec):
        raise NotImplementedError("params whose shape depends on the batch: %s" % pc.batch_dependent_params(spec))
    shp = pc.shapes(spec, 1)
    return {n: draw(spec, n, shp[n], dev, seed, 0, i) for i, n in enumerate(spec["params"])}


def make_inputs(spec, batch, r, seed, dev):
    shp = pc.shapes(spec, batch)
    return {n: draw(spec, n, shp[n], dev, seed, 1 + batch, r, i) for i, n in enumerate(spec["inputs"])}


# ---- the spec as a module ----------------------------------------------------------------------------
def _rope_heads(node, width):
    """(rotated heads, dh) of a rope node over a last dim of `width`: heads, or a packed
    q|k|v's heads + kv_heads (v's kv_heads follow, unrotated)."""
    if node.get("packed", False):
        kvh = node.get("kv_heads", node["heads"])
        return node["heads"] + kvh, width // (node["heads"] + 2 * kvh)
    return node["heads"], width // node["heads"]


def _rope_tables(x_shape, node, dtype, dev):
    """cos, sin [seq, dh] for positions offset .. offset + seq - 1 (rotate-half layout)."""
    seq, width = x_shape[-2], x_shape[-1]
    dh = _rope_heads(node, width)[1]
    theta = float(node.get("theta", 10000.0))
    offset = int(node.get("offset", node.get("pos_offset", 0)))
    inv = 1.0 / (theta ** (torch.arange(0, dh, 2, device=dev, dtype=torch.float32) / dh))
    pos = torch.arange(offset, offset + seq, device=dev, dtype=torch.float32)
    f = torch.outer(pos, inv)
    emb = torch.cat((f, f), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _graph_shapes(spec, params, batch=1):
    """Shape of every tensor of the graph: check.run_node on meta tensors, or, should an op
    have no meta kernel, on zeros on the params' device. Rope keeps its input's shape."""
    def walk(device):
        t = {n: torch.zeros(p.shape, dtype=p.dtype, device=device) for n, p in params.items()}
        for n, s in pc.shapes(spec, batch).items():
            if n in spec["inputs"]:
                t[n] = torch.zeros(s, dtype=DT[spec["dtype"]], device=device)
        for node in spec["graph"]:
            if node["op"] == "rope":
                t[node["out"]] = torch.empty_like(t[node["in"][0]])
            else:
                t[node["out"]] = check.run_node(node, t)
        return {n: tuple(v.shape) for n, v in t.items()}
    try:
        return walk("meta")
    except Exception:  # noqa: BLE001
        with torch.no_grad():
            return walk(next(iter(params.values())).device)


class SpecModule(torch.nn.Module):
    """forward(*inputs in spec order) -> tuple of outputs in spec order."""

    def __init__(self, spec, params, reference_ops=False):
        super().__init__()
        self.inputs = list(spec["inputs"])
        self.outputs = list(spec["outputs"])
        self.graph = [dict(n) for n in spec["graph"]]
        self.names = []  # (tensor name, attribute)
        for i, (n, p) in enumerate(params.items()):
            attr = "p%d_%s" % (i, "".join(c if c.isalnum() else "_" for c in n))
            self.register_parameter(attr, torch.nn.Parameter(p, requires_grad=False))
            self.names.append((n, attr))
        self.steps = []  # (kind, node, extra)
        shp = _graph_shapes(spec, params) if any(n["op"] == "rope" for n in self.graph) else {}
        for k, node in enumerate(self.graph):
            kind, extra = "ref", None
            if not reference_ops and node["op"] == "gemm" and node["in"][1] in params:
                if node.get("trans_b", False):  # stored [N, K] already: the param itself
                    attr = dict(self.names)[node["in"][1]]
                else:
                    attr = "w%d_nk" % k
                    nk = params[node["in"][1]].t().contiguous()
                    self.register_parameter(attr, torch.nn.Parameter(nk, requires_grad=False))
                kind, extra = "linear", attr
            elif not reference_ops and node["op"] == "rope" and len(shp[node["in"][0]]) == 3:
                cos, sin = _rope_tables(shp[node["in"][0]], node, DT[spec["dtype"]], next(iter(params.values())).device)
                self.register_buffer("rope%d_cos" % k, cos, persistent=False)
                self.register_buffer("rope%d_sin" % k, sin, persistent=False)
                kind, extra = "rope", ("rope%d_cos" % k, "rope%d_sin" % k)
            self.steps.append((kind, node, extra))

    def forward(self, *xs):
        t = dict(zip(self.inputs, xs))
        for n, attr in self.names:
            t[n] = getattr(self, attr)
        for kind, node, extra in self.steps:
            if kind == "linear":
                y = F.linear(t[node["in"][0]], getattr(self, extra), t[node["bias"]] if "bias" in node else None)
                y = check.act(y, node.get("act"))
                if "mul" in node:
                    y = y * t[node["mul"]]
                if "residual" in node:
                    y = y + t[node["residual"]]
            elif kind == "rope":
                x = t[node["in"][0]]
                b, s, w = x.shape
                h, dh = _rope_heads(node, w)
                xv = x[..., : h * dh].reshape(b, s, h, dh)
                cos = getattr(self, extra[0])[:, None, :]
                sin = getattr(self, extra[1])[:, None, :]
                rot = torch.cat((-xv[..., dh // 2:], xv[..., : dh // 2]), dim=-1)
                y = (xv * cos + rot * sin).reshape(b, s, h * dh)
                if h * dh < w:  # packed q|k|v: v passes unrotated
                    y = torch.cat((y, x[..., h * dh:]), dim=-1)
            else:
                y = check.run_node(node, t)
            t[node["out"]] = y
        return tuple(t[o] for o in self.outputs)


def float64_reference(spec, params, inputs):
    """check.run_node in float64, each op's result rounded to the spec dtype (as stored
    tensors are; check.py does the same)."""
    dt = DT[spec["dtype"]]
    t = {n: v.double() for n, v in params.items()}
    t.update({n: v.double() for n, v in inputs.items()})
    for node in spec["graph"]:
        t[node["out"]] = check.run_node(node, t).to(dt).double()
    return tuple(t[o] for o in spec["outputs"])


def compare(outs, refs, tol):
    """(ok, rel, worst) over all outputs, with check.py's measure: relative norm error and
    max |out - ref| / (el_tol + el_tol * |ref|)."""
    ok, rel, worst = True, 0.0, 0.0
    for o, r in zip(outs, refs):
        o, r = o.double(), r.double()
        if o.shape != r.shape:
            return False, math.inf, math.inf
        if not torch.isfinite(o).all():
            return False, math.nan, math.nan
        n = torch.linalg.vector_norm(o - r).item() / max(torch.linalg.vector_norm(r).item(), 1e-30)
        w = (torch.abs(o - r) / (tol[1] + tol[1] * torch.abs(r))).max().item() if o.numel() else 0.0
        ok &= n <= tol[0] and w <= 1.0
        rel, worst = max(rel, n), max(worst, w)
    return ok, rel, worst


# ---- timing -------------------------------------------------------------------------------------------
def time_calls(fn, rotate, seconds, min_iters=20, max_iters=2000):
    """Per-call times in ms: CUDA events recorded before and after each call, calls back to
    back (no synchronize between them), call i on input set i % rotate. Warm-up first (at
    least 5 calls and 0.1 s), which also sizes the number of timed calls to `seconds`."""
    for i in range(5):
        fn(i % rotate)
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    while n < 5 or time.perf_counter() - t0 < 0.1:
        fn(n % rotate)
        n += 1
        if n % 5 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / n
    iters = max(min_iters, min(max_iters, int(seconds / max(per, 1e-6))))
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for i, (a, b) in enumerate(ev):
        a.record()
        fn(i % rotate)
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in ev], ev[0][0].elapsed_time(ev[-1][1]) / iters


def time_systems(fns, rotate, seconds, rounds):
    """Interleaved rounds (system A, B, ..., then again) so that clock drift hits every
    system alike. Returns {system: figures}."""
    samples = {s: [] for s in fns}
    per_round = {s: [] for s in fns}
    b2b = {s: [] for s in fns}
    for _ in range(rounds):
        for s, fn in fns.items():
            xs, mean_b2b = time_calls(fn, rotate, seconds / rounds)
            samples[s] += xs
            per_round[s].append(statistics.median(xs))
            b2b[s].append(mean_b2b)
    return {s: {"ms": statistics.median(samples[s]), "p10": pc.quantile(samples[s], 0.1),
                "p90": pc.quantile(samples[s], 0.9), "min": min(samples[s]), "iters": len(samples[s]),
                "round_ms": per_round[s], "back_to_back_ms": statistics.median(b2b[s])} for s in fns}


class CompileTimeout(Exception):
    pass


def timed_first_call(call, timeout_s):
    """(seconds, outputs cloned, error): the first call of a compiled function (= its compile
    time, with its first run), abandoned by SIGALRM after timeout_s."""
    fired = []

    def on_alarm(signum, frame):
        fired.append(1)
        raise CompileTimeout("compile over %.0f s" % timeout_s)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(timeout_s, 1.0))
    t0 = time.perf_counter()
    try:
        out = call()
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        signal.setitimer(signal.ITIMER_REAL, 0)
        return secs, tuple(o.clone() for o in out), None
    except BaseException as e:  # noqa: B902  (a compile error of any kind is the peer's result)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if fired:
            return None, None, "timeout: compile abandoned after %.0f s" % timeout_s
        if isinstance(e, KeyboardInterrupt):
            raise
        return None, None, "error: %s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def dynamo_reset():
    import torch._dynamo
    torch._dynamo.reset()


# ---- one spec, every system ---------------------------------------------------------------------------
class Run:
    def __init__(self, a, spec, batches, systems, write, deadline):
        self.a, self.spec, self.batches, self.systems = a, spec, batches, systems
        self.W, self.deadline = write, deadline
        self.dev = torch.device("cuda")
        self.name = spec["name"]
        self.bad = 0
        self.stream = torch.cuda.current_stream().cuda_stream
        self.params = make_params(spec, a.seed, self.dev)
        self.module = SpecModule(spec, self.params, reference_ops=a.reference_ops).eval()
        self.inputs, self.eager_out, self.ref64, self.eager_ms = {}, {}, {}, {}
        self.check_batch = a.check_batch or min(batches)

    def rotation(self, batch):
        if self.a.rotate:
            return self.a.rotate
        nbytes = sum(math.prod(s) * 2 for n, s in pc.shapes(self.spec, batch).items() if n in self.spec["inputs"])
        return max(2, min(8, math.ceil(2 * L2_BYTES / max(nbytes, 1))))

    def skip(self, batch, system, reason):
        print("  skip %s batch %d %s: %s" % (self.name, batch, system, reason), flush=True)
        self.W({"kind": "skip", "spec": self.name, "batch": batch, "system": system, "reason": reason})

    def compare_record(self, batch, system, outs, refs, against, tol):
        ok, rel, worst = compare(outs, refs, tol)
        self.W({"kind": "compare", "spec": self.name, "batch": batch, "system": system, "against": against,
                "rel": rel, "worst": worst, "ok": ok, "tol": list(tol)})
        if not ok:
            self.bad += 1
            hint = ""
            if system == "eager" and not self.a.reference_ops:
                hint = " (eager runs its own gemm and rope: --reference-ops runs check.py's instead)"
            print("  MISMATCH %s batch %d: %s vs %s: rel %.3e worst %.2f%s" % (self.name, batch, system, against, rel,
                                                                             worst, hint), flush=True)
        return ok

    def compare_all(self, batch, system, outs):
        self.compare_record(batch, system, outs, self.eager_out[batch], "eager", pc.TOL_VS_EAGER)
        if batch == self.check_batch and self.ref64.get(batch) is not None:
            self.compare_record(batch, system, outs, self.ref64[batch], "float64", check.TOL[self.spec["dtype"]])

    def latency(self, batch, system, fig, rotate, **extra):
        rec = {"kind": "latency", "spec": self.name, "batch": batch, "system": system, "rotate": rotate}
        rec.update(fig)
        rec.update(extra)
        self.W(rec)
        print("  %-12s batch %4d %-13s %10s ms  (p10 %s, p90 %s, %d calls)%s" % (
            self.name, batch, system, pc.fmt_ms(fig["ms"]), pc.fmt_ms(fig["p10"]), pc.fmt_ms(fig["p90"]),
            fig["iters"], "".join("  %s %s" % (k, ("%.2f" % v) if isinstance(v, float) else v)
                                  for k, v in extra.items() if k in ("compile_s",))), flush=True)

    # phase A: eager, eager in a CUDA graph, hkc -- and the float64 check
    @torch.no_grad()
    def phase_a(self, batch):
        R = self.rotation(batch)
        sets = [make_inputs(self.spec, batch, r, self.a.seed, self.dev) for r in range(R)]
        args = [tuple(s[n] for n in self.spec["inputs"]) for s in sets]
        mod = self.module
        eager = tuple(o.clone() for o in mod(*args[0]))
        torch.cuda.synchronize()
        self.eager_out[batch] = eager
        self.inputs[batch] = sets  # the compile phases run only batches with an eager reference
        if batch == self.check_batch:
            try:
                self.ref64[batch] = float64_reference(self.spec, self.params, sets[0])
            except Exception as e:  # noqa: BLE001  (e.g. an op check.py does not know: a failed check)
                self.ref64[batch] = None
                self.bad += 1
                self.W({"kind": "compare", "spec": self.name, "batch": batch, "system": "all", "against": "float64",
                        "rel": math.nan, "worst": math.nan, "ok": False,
                        "error": "no float64 reference: %s: %s" % (type(e).__name__, str(e)[:300])})
                print("  MISMATCH %s batch %d: no float64 reference: %s: %s" % (self.name, batch, type(e).__name__, e))
            if self.ref64[batch] is not None:
                self.compare_record(batch, "eager", eager, self.ref64[batch], "float64", check.TOL[self.spec["dtype"]])
        fns = {"eager": lambda r: mod(*args[r])}
        keep = []
        if "cudagraph" in self.systems:
            try:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        mod(*args[0])
                torch.cuda.current_stream().wait_stream(side)
                graphs, gouts = [], []
                for r in range(R):
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        gouts.append(mod(*args[r]))
                    graphs.append(g)
                graphs[0].replay()
                torch.cuda.synchronize()
                self.compare_all(batch, "cudagraph", tuple(o.clone() for o in gouts[0]))
                fns["cudagraph"] = lambda r: graphs[r].replay()
                keep.append((graphs, gouts))
            except Exception as e:  # noqa: BLE001
                self.bad += 1
                self.skip(batch, "cudagraph", "error: %s: %s" % (type(e).__name__, e))
        sessions, pack = [], None
        one = getattr(self.a, "hkc_sessions", "per-set") == "one"
        if "hkc" in self.systems:
            try:
                for r in range(1 if one else R):
                    if pack is None:
                        pack, s = hkrt_load.open_session(self.a.pack, batch, target=self.a.target)
                    else:
                        s = pack.session(batch=batch, target=self.a.target)
                    sessions.append(s)
                    outs = {}
                    for info in s.tensors:
                        n = info.name
                        if info.role == "output":
                            outs[n] = torch.full(info.shape, float("nan"), dtype=DT[self.spec["dtype"]],
                                                 device=self.dev)
                            s.bind(n, outs[n])
                        else:
                            src = self.params[n] if info.role == "param" else sets[r][n]
                            if tuple(src.shape) != info.shape:
                                raise RuntimeError("tensor %s: the pack says %s, the spec %s" % (
                                    n, list(info.shape), list(src.shape)))
                            s.bind(n, src)
                    s.outs = tuple(outs[o] for o in self.spec["outputs"])
                sessions[0].run(self.stream)
                torch.cuda.synchronize()
                self.compare_all(batch, "hkc", tuple(o.clone() for o in sessions[0].outs))
                if one:
                    s0 = sessions[0]
                    rebind = [(n, [sets[r][n] for r in range(R)]) for n in self.spec["inputs"]]

                    def run_one(r):
                        for n, per_set in rebind:
                            s0.bind(n, per_set[r])
                        s0.run(self.stream)
                    fns["hkc"] = run_one
                else:
                    fns["hkc"] = lambda r: sessions[r].run(self.stream)
            except Exception as e:  # noqa: BLE001
                self.bad += 1
                self.skip(batch, "hkc", "error: %s: %s" % (type(e).__name__, e))
        figs = time_systems(fns, R, self.a.time_per_point, self.a.rounds)
        for s, fig in figs.items():
            extra = {"target": sessions[0].target, "hkc_sessions": "one" if one else "per-set"} if s == "hkc" else {}
            self.latency(batch, s, fig, R, **extra)
        self.eager_ms[batch] = figs["eager"]["ms"]
        for s in sessions:
            s.close()
        if pack is not None:
            pack.close()
        keep = fns = sessions = pack = None  # free graphs, sessions
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    # phases B and C: torch.compile, per batch, dynamic=False
    @torch.no_grad()
    def phase_compile(self, system, expect_s):
        mode = "max-autotune" if system == "max-autotune" else None
        stop = None
        for batch in self.batches:
            if batch not in self.inputs:
                continue
            if stop:
                self.skip(batch, system, stop)
                continue
            left = self.deadline.left() - 25
            if left < min(expect_s, self.a.compile_timeout) + 10:
                self.skip(batch, system, "time budget: %.0f s left, a compile takes about %.0f s" % (
                    max(left, 0), expect_s))
                continue
            timeout = min(self.a.compile_timeout, left - 10)
            dynamo_reset()
            sets = self.inputs[batch]
            args = [tuple(s[n] for n in self.spec["inputs"]) for s in sets]
            R = len(sets)
            note = {}
            secs, out, err = None, None, None
            for fullgraph in (True, False):
                compiled = torch.compile(self.module, mode=mode, dynamic=False, fullgraph=fullgraph)
                if mode:
                    call = (lambda c: lambda r: (torch.compiler.cudagraph_mark_step_begin(), c(*args[r]))[1])(compiled)
                else:
                    call = (lambda c: lambda r: c(*args[r]))(compiled)
                secs, out, err = timed_first_call(lambda: call(0), timeout)
                if err is None or err.startswith("timeout") or not fullgraph:
                    break
                note["fullgraph_error"] = err  # graph breaks: compile again, allowing them
                dynamo_reset()
            if err:
                self.skip(batch, system, err)
                if err.startswith("timeout"):
                    stop = "not tried: the compile at batch %d took over %.0f s" % (batch, timeout)
                continue
            note["fullgraph"] = "fullgraph_error" not in note
            expect_s = max(expect_s, secs)
            try:
                t1 = time.perf_counter()
                for r in range(3):  # cudagraph trees: warm-up, record, replay
                    call(r % R)
                torch.cuda.synchronize()
                note["next_3_calls_s"] = time.perf_counter() - t1
                self.compare_all(batch, system, out)
                eager = self.module
                figs = time_systems({system: call, "eager": lambda r: eager(*args[r])}, R, self.a.time_per_point,
                                    self.a.rounds)
                self.latency(batch, system, figs[system], R, compile_s=secs, eager_anchor_ms=figs["eager"]["ms"],
                             eager_phase_a_ms=self.eager_ms.get(batch), **note)
            except Exception as e:  # noqa: BLE001  (the compiled peer failed after compiling)
                self.skip(batch, system, "error after compiling (%.1f s): %s: %s" % (secs, type(e).__name__,
                                                                                     str(e)[:300]))
            compiled = call = figs = None  # free before the next batch
            dynamo_reset()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def torch_cold(a, spec, batch, cache_dir, label, timeout):
    """torch.compile's first call in a fresh process (this file's worker mode)."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
               TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, os.path.join(HERE, "peers.py"), a.spec, a.pack, "--torch-first-call", "--batch", str(batch),
           "--seed", str(a.seed)] + (["--reference-ops"] if a.reference_ops else [])
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, "timeout after %.0f s" % timeout
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return None, "exited %d: %s" % (p.returncode, (p.stdout + p.stderr).strip()[-800:])
    rec = pc.parse_cold(p.stdout)
    rec.update({"kind": "cold_torch", "spec": spec["name"], "batch": batch, "cache": label, "process_s": wall})
    return rec, None


@torch.no_grad()
def first_call_worker(a, spec, t_import):
    """Worker: a fresh process times CUDA context creation, then torch.compile's first call
    (default mode, dynamic=False) at one batch, and prints one JSON line."""
    import json
    t0 = time.perf_counter()
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    dev = torch.device("cuda")
    params = make_params(spec, a.seed, dev)
    mod = SpecModule(spec, params, reference_ops=a.reference_ops).eval()
    x = make_inputs(spec, a.batch, 0, a.seed, dev)
    args = tuple(x[n] for n in spec["inputs"])
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    compiled = torch.compile(mod, dynamic=False)
    out = compiled(*args)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    compiled(*args)
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    finite = all(bool(torch.isfinite(o).all()) for o in out)
    print(json.dumps({"import_s": t_import, "ctx_s": t1 - t0, "setup_s": t2 - t1, "first_call_s": t3 - t2,
                      "second_call_ms": (t4 - t3) * 1e3, "finite": finite,
                      "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}))
    return 0 if finite else 1


def run(a, spec, batches, systems, W, deadline, env):
    """Every phase for one spec; returns the number of failures."""
    env.update(versions())
    W(env)
    print("GPU %s, driver %s, torch %s (CUDA %s), triton %s" % (env.get("gpu_torch"), env.get("driver"),
          env["torch"], env["cuda_runtime"], env["triton"]), flush=True)
    R = Run(a, spec, batches, systems, W, deadline)
    t0 = time.perf_counter()
    for batch in batches:
        if deadline.left() < 30:
            for s in systems:
                R.skip(batch, s, "time budget")
            continue
        try:
            R.phase_a(batch)
        except Exception as e:  # noqa: BLE001  (eager itself failed: record, go on with the next batch)
            import traceback
            traceback.print_exc()
            R.bad += 1
            R.skip(batch, "eager", "error: %s: %s" % (type(e).__name__, str(e)[:300]))
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    print("phase A (eager, CUDA graph, hkc) %.1f s" % (time.perf_counter() - t0), flush=True)
    if "compile" in systems:
        t0 = time.perf_counter()
        R.phase_compile("compile", 20.0)
        print("phase B (torch.compile) %.1f s" % (time.perf_counter() - t0), flush=True)
    if not a.no_torch_cold:
        cold_batch = a.cold_batch or min(batches)
        with tempfile.TemporaryDirectory(prefix="peers-inductor-") as cache:
            for label in ("cold", "warm"):
                left = deadline.left() - 25
                if left < 60:
                    W({"kind": "skip", "spec": spec["name"], "batch": cold_batch, "system": "cold_torch_" + label,
                       "reason": "time budget"})
                    continue
                rec, err = torch_cold(a, spec, cold_batch, cache, label, min(a.compile_timeout + 60, left))
                if err:
                    W({"kind": "skip", "spec": spec["name"], "batch": cold_batch, "system": "cold_torch_" + label,
                       "reason": err})
                    print("  torch.compile first call (%s cache): %s" % (label, err), flush=True)
                    continue
                W(rec)
                print("  torch.compile first call in a fresh process, %s cache: import %.2f s, context %.2f s, "
                      "first call %.2f s" % (label, rec["import_s"], rec["ctx_s"], rec["first_call_s"]), flush=True)
    if "max-autotune" in systems:
        t0 = time.perf_counter()
        R.phase_compile("max-autotune", 60.0)
        print("phase C (torch.compile max-autotune) %.1f s" % (time.perf_counter() - t0), flush=True)
    return R.bad
