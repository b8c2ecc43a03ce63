#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kv_append + kv_attention on a GPU target against a float64 NumPy model of the cache
(device machine, with torch and the hkrt package).

For each case (heads, kv_heads, head_dim, window) a spec of one layer -- kv_append of a packed
q|k|v row into the state caches, kv_attention over them -- is built for GPU_TARGET (bf16,
buckets 1, 4, 512; 3 slots of max_seq 1024) and driven through one session, the caches
persisting across runs and buckets:
  prefill runs (bucket 512) that fill slot 0 up to max_seq in three chunks, slots 1 and 2 part
  way, with padding rows (ctx 0) between;
  decode runs (buckets 4 and 1: the split-over-keys path) at each slot's next position, at
  max_seq itself (overwriting the last key), with a padding row and a slot out of range (both
  must read zeros and write nothing).
Every run's output is compared with the model (each valid row: softmax over keys
[max(0, ctx - window), ctx) of its slot, grouped-query heads), every row; outputs are poisoned
(NaN) before each run. Cases cover groups of 1, 4, 7, 8 and 16 q heads per kv head (16: two
rounds of the kernel's 4), head_dim 64 and 128, and a sliding window; each case twice, with the
default NVIDIA kernels (kv_attention_mma for the prefill bucket, kv_attention_warp for the decode
ones) and with the portable one (kv_warp=off+kv_mma=off); KV_CHECK_OPTIONS (comma-separated sets
of kernel options, "+" joining the options of a set; default "kv_warp=auto,kv_warp=off+kv_mma=off")
picks others.

  PYTHONPATH=python HKRT_LIBRARY=build-dev/libhkrt.so python3 tests/device/kv_attention_check.py \\
      build-dev/hkc sm_90a
Exits 1 on any mismatch."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import hkrt

HKC, TARGET = sys.argv[1], sys.argv[2]
SLOTS, MAX_SEQ = 3, 1024
CASES = [  # heads, kv_heads, head_dim, window
    (32, 8, 64, 0), (14, 2, 64, 0), (16, 1, 128, 0), (8, 8, 128, 0), (32, 4, 64, 100), (24, 3, 128, 0)]
failures = []


def spec(heads, kv, dh, window):
    win = "\n    window: %d" % window if window else ""
    return """hkc: 1
name: kv_check
dtype: bf16
batch_sizes: [1, 4, 512]
batch_policy: pad
inputs:
  qkv: [batch, %d]
  ctx: {shape: [batch], dtype: i32}
  slot: {shape: [batch], dtype: i32}
state:
  k_cache: [1, %d, %d, %d]
  v_cache: [1, %d, %d, %d]
graph:
  - name: app
    op: kv_append
    in: [qkv]
    heads: %d
    kv_heads: %d
    k_cache: k_cache
    v_cache: v_cache
    ctx: ctx
    slot: slot
    out: q
  - name: att
    op: kv_attention
    in: [q]
    heads: %d
    kv_heads: %d
    k_cache: k_cache
    v_cache: v_cache
    ctx: ctx
    slot: slot%s
    out: o
outputs: [o]
fusion: none
""" % ((heads + 2 * kv) * dh, SLOTS, MAX_SEQ, kv * dh, SLOTS, MAX_SEQ, kv * dh, heads, kv, heads, kv, win)


def bf16_round(x):
    return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).float().numpy().astype(np.float64)


class Model:
    def __init__(self, heads, kv, dh, window):
        self.h, self.kv, self.dh, self.win = heads, kv, dh, window
        self.k = np.zeros((SLOTS, MAX_SEQ, kv, dh))
        self.v = np.zeros((SLOTS, MAX_SEQ, kv, dh))

    def step(self, qkv, ctx, slot):
        h, kv, dh = self.h, self.kv, self.dh
        rows = qkv.shape[0]
        valid = [(1 <= c <= MAX_SEQ and 0 <= s < SLOTS) for c, s in zip(ctx, slot)]
        for t in range(rows):  # every append first (kv_append runs before kv_attention)
            if valid[t]:
                self.k[slot[t], ctx[t] - 1] = qkv[t, h * dh:(h + kv) * dh].reshape(kv, dh)
                self.v[slot[t], ctx[t] - 1] = qkv[t, (h + kv) * dh:].reshape(kv, dh)
        out = np.zeros((rows, h * dh))
        g = h // kv
        for t in range(rows):
            if not valid[t]:
                continue
            c, s = ctx[t], slot[t]
            lo = max(0, c - self.win) if self.win else 0
            q = qkv[t, :h * dh].reshape(h, dh)
            for hh in range(h):
                keys, vals = self.k[s, lo:c, hh // g], self.v[s, lo:c, hh // g]
                sc = keys @ q[hh] / np.sqrt(dh)
                p = np.exp(sc - sc.max())
                out[t, hh * dh:(hh + 1) * dh] = p @ vals / p.sum()
        return out


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run_case(work, heads, kv, dh, window, option):
    name = "h%d_kv%d_d%d_w%d_%s" % (heads, kv, dh, window, option.replace("=", "_").replace("+", "_"))
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(spec(heads, kv, dh, window))
    pack = os.path.join(work, name + ".hkpack")
    opts = [a for o in option.split("+") for a in ("--kernel-option", o)]
    subprocess.run([HKC, "build", path, "-o", pack, "--target", TARGET] + opts + ["-q"], check=True)
    model = Model(heads, kv, dh, window)
    rng = np.random.default_rng(heads * 1000 + kv * 10 + dh)
    dev = torch.device("cuda", 0)
    width = (heads + 2 * kv) * dh
    with hkrt.Pack.open(pack) as p, p.session(batch=512, target=TARGET) as s:
        kernel = [k for k in subprocess.run([HKC, "inspect", pack], capture_output=True, text=True).stdout.split("\n")
                  if "kv_attention" in k]
        print("     " + (kernel[-1].strip() if kernel else "(no kv_attention line in inspect)"))

        def step(what, ctx, slot, bucket):
            ctx, slot = np.asarray(ctx, np.int32), np.asarray(slot, np.int32)
            rows = len(ctx)
            if s.batch != bucket:
                s.set_batch(bucket)
            pad = bucket - rows
            ctx_b = np.concatenate([ctx, np.zeros(pad, np.int32)])
            slot_b = np.concatenate([slot, np.zeros(pad, np.int32)])
            qkv = bf16_round(rng.standard_normal((bucket, width)))
            qkv_t = torch.from_numpy(qkv.astype(np.float32)).to(torch.bfloat16).to(dev)
            out_t = torch.full((bucket, heads * dh), float("nan"), dtype=torch.bfloat16, device=dev)
            ctx_t, slot_t = torch.from_numpy(ctx_b).to(dev), torch.from_numpy(slot_b).to(dev)
            s.bind("qkv", qkv_t)
            s.bind("ctx", ctx_t)
            s.bind("slot", slot_t)
            s.bind("o", out_t)
            s.run()
            s.synchronize()
            got = out_t.float().cpu().numpy().astype(np.float64)
            ref = model.step(qkv, ctx_b, slot_b)
            err = np.abs(got - ref)
            bad = ~(err <= 1.5e-2 + 1.6e-2 * np.abs(ref))  # bf16 output (2^-8) and bf16 probabilities
            check(not bad.any(), "%s %s: %d rows, bucket %d, max |err| %.2e%s" % (
                name, what, rows, bucket, np.nanmax(err) if np.isfinite(err).any() else float("nan"),
                "" if not bad.any() else " at rows %s" % sorted(set(np.nonzero(bad)[0].tolist()))[:8]))

        # prefill: slot 0 to 300, slot 1 to 200 (padding rows between them)
        step("prefill 1", list(range(1, 301)) + [0] * 7 + list(range(1, 201)),
             [0] * 300 + [0] * 7 + [1] * 200, 512)
        step("prefill 2", list(range(301, 801)) + list(range(1, 13)), [0] * 500 + [2] * 12, 512)
        step("prefill 3 (to max_seq)", list(range(801, 1025)), [0] * 224, 512)
        # decode: split over the keys
        step("decode (max_seq, pad row, bad slot)", [1024, 201, 0, 13], [0, 1, 1, 7], 4)
        step("decode b1", [202], [1], 1)
        step("decode b1 short", [14], [2], 1)
        step("decode b4", [203, 15, 1024, 1], [1, 2, 0, 2], 4)  # slot 2 refilled from position 1


def main():
    with tempfile.TemporaryDirectory() as work:
        for option in os.environ.get("KV_CHECK_OPTIONS", "kv_warp=auto,kv_warp=off+kv_mma=off").split(","):
            for case in CASES:
                run_case(work, *case, option)
    print("%d failure(s)" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
