#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The GEMM bars (`bench/run.py gemm`): hkc's GEMM packs against torch.matmul / F.linear, same run.

  python3 bench/lib/gemm_bars.py prepare [--configs CFG;CFG..] [--only REGEX]   # CPU machine (needs build-dev/hkc)
  python3 bench/lib/gemm_bars.py run [--only REGEX] [--out FILE.jsonl]          # H200 (build-dev carried)

prepare writes build-dev/bench/gemm/<case>.yaml (one GEMM) and packs for sm_90a: <case>.hkpack
with the compiler's own choice (the model, or the tuning database given by --tuning-db), and
<case>@<cfg>.hkpack per forced gemm_tma configuration (--configs, kernel option gemm_tma_cfg).

run, per case: random inputs (never zeros), the output poisoned with NaN, one hkc run compared
with a float64 reference (relative Frobenius error, bar: <= 2x torch's own error + 1e-3); then
timing with one protocol for both: R launches over R different input/weight copies (together
past the 60 MB L2) captured in one CUDA graph on torch's stream -- hkc through libhkrt in
stream launch mode (each hk_session_run's launches are captured with that run's bindings and
tensor maps), torch as F.linear (weights [N, K]) or torch.matmul (B [K, N]) -- replayed after
warm-up; median over REPS replays of (graph time / R). GPU time only, against GPU time."""
import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DIR = os.path.join(ROOT, "build-dev", "bench", "gemm")
L2_BYTES = 60 << 20

# name, dtype, M, N, K, layout ("nn": B [K, N], torch.matmul; "nt": weight [N, K], F.linear), epilogue
CASES = []
for dt, shapes in (("bf16", [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 14336), (4096, 14336, 4096),
                              (4096, 768, 768), (4096, 2304, 768), (4096, 3072, 768), (4096, 768, 3072)]),
                   ("f16", [(8192, 8192, 8192), (4096, 3072, 768)])):
    for m, n, k in shapes:
        CASES.append(("big_%s_%dx%dx%d" % (dt, m, n, k), dt, m, n, k, "nn", ""))
for m in (128, 1024):
    for n, k in ((768, 768), (2304, 768), (3072, 768), (768, 3072)):
        CASES.append(("small_bf16_%dx%dx%d" % (m, n, k), "bf16", m, n, k, "nt", ""))
for n, k in ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336)):
    CASES.append(("small_bf16_512x%dx%d" % (n, k), "bf16", 512, n, k, "nt", ""))
CASES.append(("epi_bf16_4096x4096x4096", "bf16", 4096, 4096, 4096, "nn", "bias_gelu_res"))
# SwiGLU as one dual gemm (fusion auto on sm_90a) against cuBLAS gate + cuBLAS up + silu * mul
CASES.append(("swiglu_bf16_4096x14336x4096", "bf16", 4096, 14336, 4096, "nn", "swiglu"))
CASES.append(("swiglu_bf16_77x776x1000", "bf16", 77, 776, 1000, "nt", "swiglu"))
# Odd shapes (numerics first: tails in M, N and K, one row, tiles that do not divide)
for m, n, k in ((1, 768, 768), (77, 776, 1000), (1000, 1000, 1000), (129, 264, 4104), (3000, 5000, 136)):
    for layout in ("nn", "nt"):
        CASES.append(("odd_bf16_%dx%dx%d_%s" % (m, n, k, layout), "bf16", m, n, k, layout, ""))
CASES.append(("odd_f16_77x776x1000_epi", "f16", 77, 776, 1000, "nn", "bias_gelu_res"))


def spec_text(name, dt, m, n, k, layout, epi):
    w = "[%d, %d]" % ((n, k) if layout == "nt" else (k, n))
    tb = "trans_b: true, " if layout == "nt" else ""
    lines = ["hkc: 1", "name: %s" % name, "dtype: %s" % dt, "batch_sizes: [1]"]
    if epi == "swiglu":
        lines += ["inputs: {x: [%d, %d]}" % (m, k), "params: {wg: %s, wu: %s}" % (w, w), "graph:",
                  "  - {name: gate, op: gemm, in: [x, wg], %sact: silu, out: g}" % tb,
                  "  - {name: up, op: gemm, in: [x, wu], %sout: u}" % tb,
                  "  - {name: swiglu, op: mul, in: [g, u], out: y}"]
    elif epi:
        lines += ["inputs: {x: [%d, %d], r: [%d, %d]}" % (m, k, m, n), "params: {w: %s, b: [%d]}" % (w, n), "graph:",
                  "  - {name: g, op: gemm, in: [x, w], %sbias: b, act: gelu, residual: r, out: y}"
                  % ("trans_b: true, " if layout == "nt" else "")]
    else:
        lines += ["inputs: {x: [%d, %d]}" % (m, k), "params: {w: %s}" % w, "graph:",
                  "  - {name: g, op: gemm, in: [x, w], %sout: y}" % ("trans_b: true, " if layout == "nt" else "")]
    return "\n".join(lines + ["outputs: [y]", ""])


def prepare(args):
    os.makedirs(DIR, exist_ok=True)
    for f in glob.glob(os.path.join(DIR, "*")) if not args.keep else []:
        os.remove(f)
    hkc = os.path.join(ROOT, "build-dev", "hkc")
    configs = [c for c in (args.configs or "").split(";") if c]
    for case in CASES:
        if args.only and not re.search(args.only, case[0]):
            continue
        yaml_path = os.path.join(DIR, case[0] + ".yaml")
        with open(yaml_path, "w") as f:
            f.write(spec_text(*case))
        builds = [("", [])] + [("@" + c, ["--kernel-option", "gemm_tma_cfg=" + c]) for c in configs]
        if case[6] == "swiglu":  # today's form for comparison: with sm_90 in the pack, fusion keeps gate * up
            builds.append(("@nodual", ["--target", "sm_90a,sm_90"]))
        for tag, extra in builds:
            out = os.path.join(DIR, case[0] + tag + ".hkpack")
            target = [] if "--target" in extra else ["--target", "sm_90a"]
            cmd = [hkc, "build", yaml_path] + target + ["-q", "-o", out] + args.build_flags.split() + extra
            r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0 and tag:  # a configuration this case's kernel cannot take (hkc says why)
                print("skipped %s%s: %s" % (case[0], tag, r.stderr.strip().splitlines()[-1][:160]), flush=True)
            elif r.returncode != 0:
                sys.exit("hkc build failed for %s:\n%s" % (case[0], r.stderr))
        print("prepared", case[0], "x", len(builds), flush=True)


def run(args):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    from hkrt_load import open_session

    torch.manual_seed(0)
    dts = {"bf16": torch.bfloat16, "f16": torch.float16}
    out = open(args.out, "a") if args.out else None
    print("%-28s %-24s %10s %10s %7s %9s %9s" % ("case", "hkc pack", "hkc us", "torch us", "ratio", "err", "torch err"))
    for name, dt, m, n, k, layout, epi in CASES:
        if args.only and not re.search(args.only, name):
            continue
        packs = sorted(glob.glob(os.path.join(DIR, name + ".hkpack")) + glob.glob(os.path.join(DIR, name + "@*.hkpack")))
        if not packs:
            continue
        t = dts[dt]
        per = (m * k + k * n * (2 if epi == "swiglu" else 1) + m * n * (2 if epi else 1)) * 2
        R = max(2, min(64, math.ceil(3 * L2_BYTES / per)))
        xs = [torch.randn(m, k, device="cuda", dtype=t) for _ in range(R)]
        ws = [(torch.randn(n, k, device="cuda", dtype=t) if layout == "nt" else torch.randn(k, n, device="cuda", dtype=t))
              / math.sqrt(k) for _ in range(R)]
        w2s = [(torch.randn(n, k, device="cuda", dtype=t) if layout == "nt" else torch.randn(k, n, device="cuda", dtype=t))
               / math.sqrt(k) for _ in range(R)] if epi == "swiglu" else None
        bs = [torch.randn(n, device="cuda", dtype=t) for _ in range(R)] if epi == "bias_gelu_res" else None
        rs = [torch.randn(m, n, device="cuda", dtype=t) for _ in range(R)] if epi == "bias_gelu_res" else None
        ys = [torch.empty(m, n, device="cuda", dtype=t) for _ in range(R)]

        def prod(x, w):
            return F.linear(x, w) if layout == "nt" else torch.matmul(x, w)

        def peer(i):
            if epi == "swiglu":
                return F.silu(prod(xs[i], ws[i])) * prod(xs[i], w2s[i])
            y = prod(xs[i], ws[i])
            if epi:
                y = F.gelu(y + bs[i]) + rs[i]
            return y

        def ref(i):
            def p64(w):
                return xs[i].double() @ (w.double().t() if layout == "nt" else w.double())
            if epi == "swiglu":
                return F.silu(p64(ws[i])) * p64(w2s[i])
            y = p64(ws[i])
            if epi:
                y = F.gelu(y + bs[i].double()) + rs[i].double()
            return y

        def rel(a, b):
            return ((a.double() - b).norm() / b.norm()).item()

        expect = ref(0)
        torch_err = rel(peer(0), expect)
        torch_us = capture_time(torch, lambda i: peer(i), R, args.reps)
        for pack in packs:
            tag = os.path.basename(pack)[len(name):-len(".hkpack")].lstrip("@") or "default"
            p, s = open_session(pack, 1, launch_mode="stream")
            try:
                def bind(i):
                    s.bind("x", xs[i])
                    s.bind("y", ys[i])
                    if epi == "swiglu":
                        s.bind("wg", ws[i])
                        s.bind("wu", w2s[i])
                        return
                    s.bind("w", ws[i])
                    if epi:
                        s.bind("b", bs[i])
                        s.bind("r", rs[i])
                ys[0].fill_(float("nan"))
                bind(0)
                s.run(torch.cuda.current_stream().cuda_stream)
                torch.cuda.synchronize()
                err = rel(ys[0], expect)
                ok = math.isfinite(err) and err <= 2 * torch_err + 1e-3

                def hk(i):
                    bind(i)
                    s.run(torch.cuda.current_stream().cuda_stream)
                hk_us = capture_time(torch, hk, R, args.reps)
            finally:
                s.close()
                p.close()
            flops = 2.0 * m * n * k * (2 if epi == "swiglu" else 1)
            row = {"case": name, "pack": tag, "dtype": dt, "M": m, "N": n, "K": k, "layout": layout, "epilogue": epi,
                   "hkc_us": hk_us, "torch_us": torch_us, "ratio": torch_us / hk_us, "hkc_tflops": flops / hk_us / 1e6,
                   "torch_tflops": flops / torch_us / 1e6, "err": err, "torch_err": torch_err, "ok": ok, "R": R}
            print("%-28s %-24s %10.2f %10.2f %7.3f %9.2e %9.2e%s" % (name, tag, hk_us, torch_us, row["ratio"], err,
                                                                     torch_err, "" if ok else "  NUMERICS FAIL"),
                  flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
        del xs, ws, ys, bs, rs, w2s
        torch.cuda.empty_cache()


def capture_time(torch, fn, R, reps):
    """Median microseconds per call: R calls (i = 0..R-1) captured in one CUDA graph,
    replayed `reps` times after warm-up, CUDA events around each replay."""
    for i in range(R):
        fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="relaxed"):
        for i in range(R):
            fn(i)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / R)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("--only", help="regex over case names")
    p.add_argument("--configs", help="prepare: gemm_tma configurations to force, ';'-separated (pp=0,mw=1,bn=256,st=4)")
    p.add_argument("--keep", action="store_true", help="prepare: keep what earlier prepares wrote")
    p.add_argument("--build-flags", default="--tuning-db specs/tuning/h200.db", help="prepare: extra hkc build flags")
    p.add_argument("--out", help="run: append JSON lines here")
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    os.chdir(ROOT)
    prepare(args) if args.mode == "prepare" else run(args)


if __name__ == "__main__":
    main()
