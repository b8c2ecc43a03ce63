#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The decode step's kernels as they run inside the replayed graph (GPU machine, after
bench/gen_prepare.sh and `bench/gen_device.py weights`):

    python3 bench/gen_trace.py PACK [--batch 1] [--context 1024] [--steps 8]

`hkc generate --profile` times each launch alone, which adds a launch's fixed costs to every
kernel and hides what programmatic dependent launches overlap. This script prefills `batch`
prompts of `context` tokens through hkrt's Generator, decodes a few warm-up steps, then records
`steps` decode steps under the PyTorch profiler (CUPTI's kernel records: start and end of each
kernel on the GPU, graph kernels included) and prints, per launch of the step in order, the
median over the steps of its duration and of the gap from the previous kernel's end to its
start (negative: the two overlapped), then the sums per kernel name and the step's span (first
kernel's start to last kernel's end). The CUPTI records cost some time of their own: compare
spans and durations with each other, the graph replay time with `hkc generate --profile`.
"""
import argparse
import collections
import json
import os
import statistics
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import hkrt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pack")
    ap.add_argument("--weights", default="/tmp/gen_llama-3.2-1b/model.safetensors")
    ap.add_argument("--map", default=os.path.join(ROOT, "build-dev", "gen", "llama-3.2-1b.map"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--json", help="write the per-launch medians here")
    a = ap.parse_args()
    names = {}
    with open(a.map) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                x, y = line.split()[:2]
                names[x] = y
    torch.cuda.init()
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 128000, size=a.context).tolist() for _ in range(a.batch)]
    slots = list(range(a.batch))
    with hkrt.Pack.open(a.pack) as pack:
        sess = pack.session()
        sess.bind_weights(a.weights, names=names)
        with sess.generator() as gen:
            for i in slots:
                gen.reset(i)
            nxt = gen.append(slots, prompts)
            for _ in range(4):  # warm-up decode steps
                nxt = gen.append(slots, [[t] for t in nxt])
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(a.steps):
                    nxt = gen.append(slots, [[t] for t in nxt])
                torch.cuda.synchronize()
        sess.close()
    path = "/tmp/gen_trace.json"
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    if not kernels:
        print("no kernel records (CUPTI gave none)")
        return 1
    # steps: split where the gap between kernels exceeds 20 us (the host's work between steps)
    runs, cur = [], [kernels[0]]
    for prev, e in zip(kernels, kernels[1:]):
        if e["ts"] - (prev["ts"] + prev["dur"]) > 20.0:
            runs.append(cur)
            cur = []
        cur.append(e)
    runs.append(cur)
    n = collections.Counter(len(r) for r in runs).most_common(1)[0][0]
    runs = [r for r in runs if len(r) == n]
    print("%s: %d steps of %d kernels recorded (batch %d, context %d)" % (os.path.basename(a.pack), len(runs), n,
                                                                          a.batch, a.context))
    spans = [r[-1]["ts"] + r[-1]["dur"] - r[0]["ts"] for r in runs]
    rows = []
    for i in range(n):
        dur = statistics.median(r[i]["dur"] for r in runs)
        gap = statistics.median(r[i]["ts"] - (r[i - 1]["ts"] + r[i - 1]["dur"]) for r in runs) if i else 0.0
        rows.append((runs[0][i]["name"], dur, gap))
    print("    #  kernel                                                    in-graph us   gap us")
    for i, (name, dur, gap) in enumerate(rows):
        print("  %3d  %-56s %10.2f %8.2f" % (i, name[:56], dur, gap))
    by = collections.OrderedDict()
    for name, dur, gap in rows:
        s = by.setdefault(name, [0, 0.0, 0.0])
        s[0] += 1
        s[1] += dur
        s[2] += gap
    print("per kernel: launches, sum of durations, sum of gaps before them (us)")
    for name, (c, d, g) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print("  %-56s %4d %10.1f %8.1f" % (name[:56], c, d, g))
    print("step span (first start to last end), median of %d: %.1f us; sum of durations %.1f, of gaps %.1f" %
          (len(spans), statistics.median(spans), sum(r[1] for r in rows), sum(r[2] for r in rows)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "span_us": statistics.median(spans)}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
