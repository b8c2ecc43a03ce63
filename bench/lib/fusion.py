#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fused against unfused: the same spec built twice (hkc build --fusion auto / none),
replayed through libhkrt on the GPU at every batch bucket, same inputs, same protocol.

For each bucket: random inputs and params (never zeros; weights scaled by 1/sqrt(fan-in)),
outputs of both packs compared with each other (a mismatch fails the run), then the
median graph latency of each (bench/lib/ops.py's timeit: CUDA events, warm-up, many samples).
Prints a table and writes JSON lines to --out.

usage: fusion.py SPEC FUSED.hkpack UNFUSED.hkpack [--target T] [--out FILE]
"""
import argparse
import json
import math
import os
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from hkrt_load import open_session  # noqa: E402
from ops import timeit  # noqa: E402

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# ||fused - unfused|| / ||unfused||: both round the same f32 values at different points
# (an unfused pipeline rounds every intermediate to the dtype), so allow a few ulps.
TOL = {"f32": 1e-5, "f16": 5e-3, "bf16": 3e-2}


def bind_random(sessions, dt, gen, dev):
    """Binds the same random inputs/params to every session; NaN-poisoned outputs each."""
    outs = []
    base = {}
    for info in sessions[0].tensors:
        if info.role == "output":
            continue
        shape = info.shape
        scale = 1 / math.sqrt(shape[0]) if info.role == "param" and len(shape) >= 2 else 1.0
        base[info.name] = ((torch.rand(shape, generator=gen, device=dev) * 2 - 1) * scale).to(dt)
    for s in sessions:
        o = {}
        for info in s.tensors:
            if info.role == "output":
                o[info.name] = torch.full(info.shape, float("nan"), dtype=dt, device=dev)
                s.bind(info.name, o[info.name])
            else:
                s.bind(info.name, base[info.name])
        outs.append(o)
    return base, outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("fused")
    ap.add_argument("unfused")
    ap.add_argument("--target")
    ap.add_argument("--out")
    a = ap.parse_args()
    spec = yaml.safe_load(open(a.spec))
    dt = DT[spec.get("dtype", "f32")]
    dev = torch.device("cuda")
    stream = torch.cuda.current_stream().cuda_stream
    out = open(a.out, "a") if a.out else None
    bad = 0
    print("%-14s %6s %12s %12s %8s %10s" % ("spec", "batch", "fused ms", "unfused ms", "speedup", "rel diff"))
    for batch in spec["batch_sizes"]:
        pf, sf = open_session(a.fused, batch, target=a.target)
        pu, su = open_session(a.unfused, batch, target=a.target)
        gen = torch.Generator(device=dev).manual_seed(batch)
        _, (of, ou) = bind_random([sf, su], dt, gen, dev)
        sf.run(stream)
        su.run(stream)
        torch.cuda.synchronize()
        rel = 0.0
        for name in of:
            f, u = of[name].double(), ou[name].double()
            r = (torch.linalg.vector_norm(f - u) / torch.linalg.vector_norm(u)).item()
            rel = max(rel, r if math.isfinite(r) else math.inf)
        ok = rel <= TOL[spec.get("dtype", "f32")]
        bad += not ok
        ms_f = timeit(lambda i: sf.run(stream), 1)
        ms_u = timeit(lambda i: su.run(stream), 1)
        print("%-14s %6d %12.4f %12.4f %7.2fx %10.2e%s" % (spec["name"], batch, ms_f, ms_u, ms_u / ms_f, rel,
                                                          "" if ok else "  MISMATCH"))
        if out:
            out.write(json.dumps({"spec": spec["name"], "batch": batch, "target": sf.target, "fused_ms": ms_f,
                                  "unfused_ms": ms_u, "rel_diff": rel, "ok": ok}) + "\n")
        sf.close()
        su.close()
        pf.close()
        pu.close()
        torch.cuda.empty_cache()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
