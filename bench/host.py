#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The host target (CPU) against NumPy/OpenBLAS and PyTorch eager, on the same thread count.

    bench/host.py [--build build] [--threads 2] [--runs 30] [--rounds 3] [--warmup 5]
                  [--dtypes f32,bf16] [--batches 1,8,32] [--only gemm|bert|llama] [--json FILE]

Measures, each in its own process and each as the median of the timed runs after --warmup
untimed ones:
  gemm   C[1024, 3072] = A[1024, 768] @ B[768, 3072]: hkc's host pack (a one-gemm spec, `hkc run`
         with HK_HOST_THREADS) in each of --dtypes, NumPy f32 (OPENBLAS_NUM_THREADS), PyTorch
         eager f32 (torch.set_num_threads)
  bert   specs/bert_layer.yaml at each of --batches, hkc's pack in each of --dtypes, against the
         same layer written with torch ops (linear, attention as softmax(q k^T / sqrt(d)) v,
         layernorm, exact gelu) in eager mode, f32
  llama  specs/llama_block.yaml at reduced dims (seq 128, hidden 1024, 8 heads over 2 kv heads
         of 128, ffn 2816) at batch 1 and 4, hkc in each of --dtypes, against the same block in
         eager torch f32 (rmsnorm, one qkv linear, rotate-half rope, causal grouped-query
         attention, SwiGLU)
Contenders alternate in --rounds rounds (a change of load hits them alike); each figure is the
median of the rounds' medians. hkc's f32 packs run twice: with the default GEMM path (OpenBLAS
bound at run time where libopenblas.so.0 is installed) and with HK_HOST_BLAS=off (the C
loops). The 1-minute load average is printed beside each figure: on a shared machine, compare
figures taken at similar loads.

Needs /usr/bin/python3 with NumPy (Debian python3-numpy, whose BLAS is libopenblas0-pthread) and
torch (python3-torch; without it the torch rows say so), and a build of hkc (--build).
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
M, N, K = 1024, 3072, 768

GEMM_SPEC = """hkc: 1
name: host_gemm_bench
dtype: DTYPE
batch_sizes: [1]
dims: {m: %d, n: %d, k: %d}
targets: [host]
inputs: {a: [batch, m, k]}
params: {b: [k, n]}
graph:
  - {name: mm, op: gemm, in: [a, b], out: c}
outputs: [c]
""" % (M, N, K)

# Timing loop shared by the NumPy and torch children: median and min of runs after warm-ups, in ms.
TIMER = """
import json, statistics, time
def timeit(fn, runs, warmup):
    for _ in range(warmup): fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": statistics.median(ts), "min_ms": min(ts)}
"""

NUMPY_GEMM = TIMER + """
import numpy as np, sys
runs, warmup = int(sys.argv[1]), int(sys.argv[2])
blas = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower() and ".so" in l})
rng = np.random.default_rng(1)
a = rng.uniform(-1, 1, (%d, %d)).astype(np.float32); b = rng.uniform(-1, 1, (%d, %d)).astype(np.float32)
r = timeit(lambda: a @ b, runs, warmup); r["blas"] = [os.path.realpath(p) for p in blas]
print(json.dumps(r))
""" % (M, K, K, N)
NUMPY_GEMM = "import os\n" + NUMPY_GEMM

TORCH_GEMM = TIMER + """
import sys, torch
runs, warmup, threads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(1)
a = torch.rand(%d, %d, generator=g) * 2 - 1; b = torch.rand(%d, %d, generator=g) * 2 - 1
with torch.no_grad():
    r = timeit(lambda: torch.matmul(a, b), runs, warmup)
r["torch"] = torch.__version__; r["threads"] = torch.get_num_threads()
print(json.dumps(r))
""" % (M, K, K, N)

# bert_layer.yaml's graph (post-norm BERT encoder layer), eager torch, f32.
TORCH_BERT = TIMER + """
import math, sys, torch
import torch.nn.functional as F
runs, warmup, threads, batch = (int(v) for v in sys.argv[1:5])
torch.set_num_threads(threads)
seq, hidden, heads, ffn = 128, 768, 12, 3072
g = torch.Generator().manual_seed(1)
def r(*shape, s=0.05): return (torch.rand(*shape, generator=g) * 2 - 1) * s
x = r(batch, seq, hidden, s=1.0)
w_qkv, b_qkv = r(3 * hidden, hidden), r(3 * hidden)
w_o, b_o = r(hidden, hidden), r(hidden)
w_1, b_1, w_2, b_2 = r(ffn, hidden), r(ffn), r(hidden, ffn), r(hidden)
ln1_g, ln1_b, ln2_g, ln2_b = 1 + r(hidden), r(hidden), 1 + r(hidden), r(hidden)
dh = hidden // heads
def layer(x):
    qkv = F.linear(x, w_qkv, b_qkv).view(batch, seq, 3, heads, dh).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh), dim=-1)
    ctx = torch.matmul(p, v).transpose(1, 2).reshape(batch, seq, hidden)
    h1 = F.layer_norm(F.linear(ctx, w_o, b_o) + x, (hidden,), ln1_g, ln1_b, 1e-12)
    f = F.gelu(F.linear(h1, w_1, b_1))
    return F.layer_norm(F.linear(f, w_2, b_2) + h1, (hidden,), ln2_g, ln2_b, 1e-12)
with torch.no_grad():
    res = timeit(lambda: layer(x), runs, warmup)
res["torch"] = torch.__version__; res["threads"] = torch.get_num_threads()
print(json.dumps(res))
"""

# specs/llama_block.yaml's graph at reduced dims, eager torch, f32: Hugging Face's Llama layer
# (rmsnorm in f32, rotate-half rope at positions 0.., causal grouped-query attention, SwiGLU).
LLAMA_DIMS = {"seq": 128, "hidden": 1024, "heads": 8, "kv_heads": 2, "head_dim": 128, "ffn": 2816}
TORCH_LLAMA = TIMER + """
import math, sys, torch
import torch.nn.functional as F
runs, warmup, threads, batch = (int(v) for v in sys.argv[1:5])
torch.set_num_threads(threads)
seq, hidden, heads, kvh, dh, ffn = %(seq)d, %(hidden)d, %(heads)d, %(kv_heads)d, %(head_dim)d, %(ffn)d
g = torch.Generator().manual_seed(1)
def r(*shape, s=0.05): return (torch.rand(*shape, generator=g) * 2 - 1) * s
x = r(batch, seq, hidden, s=1.0)
g_attn, g_ffn = 1 + r(hidden), 1 + r(hidden)
w_qkv, w_o = r(hidden, (heads + 2 * kvh) * dh), r(heads * dh, hidden)
w_gate, w_up, w_down = r(hidden, ffn), r(hidden, ffn), r(ffn, hidden)
inv = 1.0 / (500000.0 ** (torch.arange(0, dh, 2).float() / dh))
ang = torch.outer(torch.arange(seq).float(), inv)
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
mask = torch.full((seq, seq), float("-inf")).triu(1)
def rms(v, w): return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5) * w
def rot(t): return torch.cat([-t[..., dh // 2:], t[..., :dh // 2]], -1)
def block(x):
    qkv = rms(x, g_attn) @ w_qkv
    q = qkv[..., :heads * dh].view(batch, seq, heads, dh).transpose(1, 2)
    k = qkv[..., heads * dh:(heads + kvh) * dh].view(batch, seq, kvh, dh).transpose(1, 2)
    v = qkv[..., (heads + kvh) * dh:].view(batch, seq, kvh, dh).transpose(1, 2)
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(heads // kvh, 1), v.repeat_interleave(heads // kvh, 1)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + mask, -1)
    h = x + (p @ v).transpose(1, 2).reshape(batch, seq, heads * dh) @ w_o
    n2 = rms(h, g_ffn)
    return h + (F.silu(n2 @ w_gate) * (n2 @ w_up)) @ w_down
with torch.no_grad():
    res = timeit(lambda: block(x), runs, warmup)
res["torch"] = torch.__version__; res["threads"] = torch.get_num_threads()
print(json.dumps(res))
""" % LLAMA_DIMS


def load():
    return os.getloadavg()[0]


def child(code, args, env=None):
    """Runs a Python snippet under /usr/bin/python3; its last stdout line is JSON. None: it failed."""
    p = subprocess.run([PY, "-c", code] + [str(a) for a in args], cwd=ROOT, env=dict(os.environ, **(env or {})),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def hkc_build(hkc, spec_text, path):
    spec = path + ".yaml"
    with open(spec, "w") as f:
        f.write(spec_text)
    cmd = [hkc, "build", spec, "--target", "host", "-o", path]
    print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def hkc_run(hkc, pack, batch, args, blas):
    env = dict(os.environ, HK_HOST_THREADS=str(args.threads), HK_HOST_BLAS="auto" if blas else "off")
    cmd = [hkc, "run", pack, "--allow-unsigned-native", "--random-params", "--batch", str(batch), "--runs",
           str(args.runs), "--warmup", str(args.warmup)]
    if args.verbose:
        print("+ HK_HOST_THREADS=%d HK_HOST_BLAS=%s %s" % (args.threads, env["HK_HOST_BLAS"],
                                                          " ".join(shlex.quote(c) for c in cmd)), flush=True)
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        return None
    # "host gemm: WHAT[: why]" and "...: median X ms, min Y ms over ..." (hkc run's report)
    gemm = re.search(r"^host gemm: (.*)$", p.stdout, re.M)
    t = re.search(r"median ([0-9.]+) ms, min ([0-9.]+) ms", p.stdout)
    if not t:
        sys.stderr.write(p.stdout)
        return None
    what = gemm.group(1) if gemm else "default"
    return {"median_ms": float(t.group(1)), "min_ms": float(t.group(2)),
            "host_gemm": "OpenBLAS" if what.startswith("OpenBLAS") else what.split(":")[0], "host_gemm_detail": what}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build folder holding hkc (default: build)")
    ap.add_argument("--threads", type=int, default=2, help="threads of every contender (default 2)")
    ap.add_argument("--runs", type=int, default=30, help="timed runs of each contender, over all rounds")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batches", default="1,8,32", help="bert_layer's batches (default 1,8,32)")
    ap.add_argument("--dtypes", default="f32,bf16", help="hkc's pack dtypes (default f32,bf16)")
    ap.add_argument("--only", choices=["gemm", "bert", "llama"], help="one of the measurements")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("-v", "--verbose", action="store_true", help="echo every hkc run")
    args = ap.parse_args()
    hkc = os.path.abspath(os.path.join(ROOT, args.build, "hkc"))
    if not os.access(hkc, os.X_OK):
        sys.exit("host.py: %s is missing (build first: cmake --build %s)" % (hkc, args.build))
    rows = []
    load_before = load()

    def measure(what, contenders):
        """Runs the contenders (name, fn) in --rounds interleaved rounds, so that a change of the
        machine's load hits them alike; reports the median of the rounds' medians and the least min."""
        got = {name: [] for name, _ in contenders}
        for _ in range(args.rounds):
            for name, fn in contenders:
                r = fn()
                if r:
                    got[name].append(dict(r, load=load()))
        for name, _ in contenders:
            rs = got[name]
            if not rs:
                print("%-9s %-28s failed" % (what, name), flush=True)
                continue
            row = dict(rs[-1], what=what, who=name, median_ms=statistics.median(r["median_ms"] for r in rs),
                       min_ms=min(r["min_ms"] for r in rs), load=statistics.mean(r["load"] for r in rs),
                       rounds=[r["median_ms"] for r in rs])
            rows.append(row)
            print("%-9s %-28s median %8.2f ms  min %8.2f ms  (load %.2f; round medians %s)"
                  % (what, name, row["median_ms"], row["min_ms"], row["load"],
                     " ".join("%.1f" % v for v in row["rounds"])), flush=True)
            if row.get("host_gemm_detail"):
                print("      host gemm: %s" % row["host_gemm_detail"])
            if row.get("blas"):
                print("      numpy's BLAS: %s" % ", ".join(row["blas"]))

    per = max(1, args.runs // args.rounds)
    quiet = dict(vars(args), runs=per)
    qa = argparse.Namespace(**quiet)
    dtypes = [d for d in args.dtypes.split(",") if d]
    batches = [int(b) for b in args.batches.split(",") if b]

    def hkc_rows(pack, batch):
        """hkc's contenders for one pack: f32 packs also with the C loops."""
        rows = [("hkc host %s (default)" % pack[1], lambda: hkc_run(hkc, pack[0], batch, qa, True))]
        if pack[1] == "f32":
            rows.append(("hkc host f32 (C loops)", lambda: hkc_run(hkc, pack[0], batch, qa, False)))
        return rows

    with tempfile.TemporaryDirectory(prefix="hk-host-bench-") as tmp:
        if args.only in (None, "gemm"):
            packs = []
            for dt in dtypes:
                packs.append((os.path.join(tmp, "gemm_%s.hkpack" % dt), dt))
                hkc_build(hkc, GEMM_SPEC.replace("DTYPE", dt), packs[-1][0])
            measure("gemm", [row for p in packs for row in hkc_rows(p, 1)] + [
                ("numpy f32", lambda: child(NUMPY_GEMM, [per, args.warmup], {"OPENBLAS_NUM_THREADS": str(args.threads)})),
                ("torch eager f32", lambda: child(TORCH_GEMM, [per, args.warmup, args.threads]))])
        if args.only in (None, "bert"):
            with open(os.path.join(ROOT, "specs", "bert_layer.yaml")) as f:
                text = f.read()
            text = text.replace("targets: [host, sm_90]", "targets: [host]")
            text = text.replace("batch_sizes: [1, 8, 32, 128]", "batch_sizes: [%s]" % ", ".join(map(str, batches)))
            packs = []
            for dt in dtypes:
                packs.append((os.path.join(tmp, "bert_%s.hkpack" % dt), dt))
                hkc_build(hkc, text.replace("dtype: bf16", "dtype: " + dt), packs[-1][0])
            for b in batches:
                measure("bert b%d" % b, [row for p in packs for row in hkc_rows(p, b)] + [
                    ("torch eager f32", lambda b=b: child(TORCH_BERT, [per, args.warmup, args.threads, b]))])
        if args.only in (None, "llama"):
            with open(os.path.join(ROOT, "specs", "llama_block.yaml")) as f:
                text = f.read()
            text = text.replace("targets: [host, sm_90]", "targets: [host]")
            text = text.replace("batch_sizes: [1, 4, 16]", "batch_sizes: [1, 4]")
            text = re.sub(r"^dims: .*$", "dims: {%s}" % ", ".join("%s: %d" % kv for kv in LLAMA_DIMS.items()), text,
                          flags=re.M)
            packs = []
            for dt in dtypes:
                packs.append((os.path.join(tmp, "llama_%s.hkpack" % dt), dt))
                hkc_build(hkc, text.replace("dtype: bf16", "dtype: " + dt), packs[-1][0])
            for b in (1, 4):
                measure("llama b%d" % b, [row for p in packs for row in hkc_rows(p, b)] + [
                    ("torch eager f32", lambda b=b: child(TORCH_LLAMA, [per, args.warmup, args.threads, b]))])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "runs": args.runs, "rounds": args.rounds, "warmup": args.warmup,
                       "batches": batches, "dtypes": dtypes, "load_before": load_before,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
