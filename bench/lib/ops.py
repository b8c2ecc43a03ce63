#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Op benchmark on the GPU machine: hkc's kernels against the PyTorch peer, same run.

For every case in build-dev/bench/ops/*.yaml (written with its pack by bench/ops_prepare.sh):
  1. random inputs (never zeros) on the GPU; hkc's outputs poisoned with NaN;
  2. one run through libhkrt (the hkrt package, python/hkrt), outputs compared with torch in float64;
  3. timing: CUDA events around ITERS back-to-back runs, median of REPS samples after
     warm-up, inputs rotated over enough copies to exceed the L2 (hkc rebinds them,
     torch indexes them) -- the same protocol for hkc and the peer.
Peers: torch.matmul (cuBLAS) + the same epilogue in torch for gemm, F.scaled_dot_product_
attention, F.layer_norm / F.rms_norm / softmax / element-wise; memory-bound ops are also
reported against a device-to-device copy measured in this run.
Prints a table; writes JSON lines to OUT if given. Exit 1 on a numerics failure.
usage: ops.py [CASE_GLOB] [--out FILE] [--target T]
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "device"))
from hkrt_load import open_session  # noqa: E402
from check import run_node as torch_node  # noqa: E402  (the ops in PyTorch, any dtype)

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
TOL = {"f32": 1e-4, "f16": 5e-3, "bf16": 3e-2}
L2_BYTES = 60 << 20


def timeit(fn, rotate, reps=15, iters=20, warm=3):
    """Median ms per call: CUDA events around `iters` back-to-back calls, `reps` samples,
    after warm-up; iters/reps shrink for slow calls so a case stays within seconds."""
    for i in range(warm):
        fn(i % rotate)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn(0)
    b.record()
    b.synchronize()
    once = max(a.elapsed_time(b), 1e-3)
    iters = max(1, min(iters, int(10.0 / once)))
    if once > 50:
        reps = 5
    times = []
    for r in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(iters):
            fn((r * iters + i) % rotate)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / iters)
    return statistics.median(times)


def work_of(spec, t):
    """(flops, bytes) the case must do/move at least."""
    node = spec["graph"][0]
    out = t[node["out"]]
    nbytes = sum(x.numel() * x.element_size() for x in t.values())
    if node["op"] == "gemm":
        a, b = t[node["in"][0]], t[node["in"][1]]
        k = a.shape[-1]
        return 2.0 * out.numel() * k, nbytes
    if node["op"] == "attention":
        q, k = t[node["in"][0]], t[node["in"][1]]
        h = node["heads"]
        dh = q.shape[-1] // h
        f = 4.0 * q.shape[0] * h * q.shape[1] * k.shape[1] * dh
        return f / 2 if node.get("causal") else f, nbytes
    return 0.0, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pattern", nargs="?", default="*")
    ap.add_argument("--out")
    ap.add_argument("--target")
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "build-dev", "bench", "ops"))
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    # ceilings measured in this run
    big = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    big2 = torch.empty_like(big)
    copy_ms = timeit(lambda i: big2.copy_(big), 1, reps=10, iters=5)
    copy_tbs = 2 * big.numel() / copy_ms / 1e9
    del big, big2
    print("GPU %s, torch %s; device-to-device copy %.2f TB/s (read + write)" %
          (torch.cuda.get_device_name(), torch.__version__, copy_tbs))
    print("%-34s %10s %10s %9s %9s %7s %10s" % ("case", "hkc ms", "peer ms", "hkc", "peer", "ratio", "rel err"))
    out = open(a.out, "w") if a.out else None
    bad = 0
    for path in sorted(glob.glob(os.path.join(a.dir, a.pattern + ".yaml"))):
        name = os.path.basename(path)[:-5]
        spec = yaml.safe_load(open(path))
        dt = DT[spec.get("dtype", "f32")]
        pack, s = open_session(path[:-5] + ".hkpack", spec["batch_sizes"][0], target=a.target)
        gen = torch.Generator(device=dev).manual_seed(1)
        base = {}
        for info in s.tensors:
            shape = info.shape
            if info.role == "output":
                base[info.name] = torch.full(shape, float("nan"), dtype=dt, device=dev)
            else:  # weights ([K, N] params) scaled by 1/sqrt(fan-in), everything else in [-1, 1)
                scale = 1 / math.sqrt(shape[0]) if info.role == "param" and len(shape) >= 2 else 1.0
                base[info.name] = ((torch.rand(shape, generator=gen, device=dev) * 2 - 1) * scale).to(dt)
        case_bytes = sum(x.numel() * x.element_size() for x in base.values())
        rotate = max(1, min(8, math.ceil(2 * L2_BYTES / case_bytes)))
        names = [i.name for i in s.tensors if i.role != "output"]
        sets = [base] + [{k: (v.clone() if k in names else v) for k, v in base.items()} for _ in range(rotate - 1)]
        for k, v in base.items():
            s.bind(k, v)
        s.run(torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        node = spec["graph"][0]
        t64 = {k: v.double() for k, v in base.items() if k != node["out"]}
        ref = torch_node(node, t64)
        got = base[node["out"]].double()
        rel = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
        ok = math.isfinite(rel) and rel <= TOL[spec.get("dtype", "f32")]
        bad += not ok
        stream = torch.cuda.current_stream().cuda_stream

        def run_hkc(i):
            if rotate > 1:
                for k in names:
                    s.bind(k, sets[i][k])
            s.run(stream)

        def run_peer(i):
            return torch_node(node, sets[i])

        ms_h = timeit(run_hkc, rotate)
        ms_p = timeit(run_peer, rotate)
        flops, nbytes = work_of(spec, base)
        if flops:
            hv, pv, unit = flops / ms_h / 1e9, flops / ms_p / 1e9, "TFLOP/s"
            ratio = pv and hv / pv
            shown = ("%7.1f" % hv, "%7.1f" % pv)
        else:
            hv, pv, unit = nbytes / ms_h / 1e9, nbytes / ms_p / 1e9, "TB/s"
            ratio = hv / copy_tbs  # memory-bound bar: against the copy
            shown = ("%5.2fTB" % hv, "%5.2fTB" % pv)
        print("%-34s %10.4f %10.4f %9s %9s %6.2f%s %10.2e%s" % (name, ms_h, ms_p, shown[0], shown[1], ratio,
              "c" if not flops else "x", rel, "" if ok else "  NUMERICS FAIL"))
        rec = {"case": name, "target": s.target, "hkc_ms": ms_h, "peer_ms": ms_p, "unit": unit, "hkc": hv, "peer": pv,
               "ratio": ratio, "ratio_of": "copy" if not flops else "peer", "rel_err": rel, "ok": ok,
               "rotate": rotate, "copy_tbs": copy_tbs}
        if out:
            out.write(json.dumps(rec) + "\n")
        s.close()
        pack.close()
        del sets, base
        torch.cuda.empty_cache()
    print("ratio: x = hkc / peer (TFLOP/s); c = hkc / measured copy bandwidth (bytes read + written once)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
