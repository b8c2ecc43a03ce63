#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Device numerics check: one spec, one pack, every batch size, on the GPU.

For each batch size: draws random inputs and params (NumPy, seeded, rounded to the spec
dtype), runs the pack through `hkc run` on the GPU target and on the host target with
the same data (outputs NaN-poisoned by hkc run), and compares both with PyTorch computing
the spec's ops in float64 (each op's result rounded to the spec dtype, as stored
tensors are). Prints one row per output and exits 1 on any mismatch. `repeat:` entries are
expanded (reference.py's expansion); i32 inputs are drawn as reference.py draws them
(attention lengths 0 / 1 / full / over-long, embedding ids out of range).

Batch buckets: when the spec's batch_policy is pad (the default) and two neighbouring
buckets leave a gap, one batch size inside the first gap is checked too (hkc run must
report it padded); --no-padded skips it.

usage: check.py HKC SPEC PACK WORKDIR --gpu-target sm_90 [--host-target host-x86_64] [--seed S] [--no-padded]
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from reference import eval_dim, round_to  # noqa: E402  (shape eval and dtype rounding)
from reference import expand_repeats, i32_input, write_npy  # noqa: E402  (repeat:, i32 draws, .npy)

# ||out - ref|| / ||ref|| bounds and per-element bounds (atol = rtol) per dtype.
TOL = {"f32": (1e-5, 1e-4), "f16": (5e-3, 3e-2), "bf16": (3e-2, 1.5e-1)}
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def t64(x):
    return torch.as_tensor(x, dtype=torch.float64, device=DEV)


def act(x, name):
    if name in (None, "none"):
        return x
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "tanh": torch.tanh}[name](x)


def count(node, key, dims, default=None):
    """A node's integer attribute (heads, kv_heads): a literal or an expression over dims."""
    return eval_dim(node[key], dims or {}, 1) if key in node else default


def attention(node, ins, dims, t=None):
    """SDPA; with `lengths` (keys j >= lengths[b] masked, clamped to 0..Skv) and / or `mask`
    (added to the scaled scores) as one additive mask, causal folded in; a row whose every key
    is masked outputs zeros (SDPA gives NaN there)."""
    heads = count(node, "heads", dims)
    kvh = count(node, "kv_heads", dims, heads)
    if len(ins) == 1:
        dh = ins[0].shape[-1] // (heads + 2 * kvh)
        q, k, v = torch.split(ins[0], [heads * dh, kvh * dh, kvh * dh], dim=-1)
    else:
        q, k, v = ins
        dh = q.shape[-1] // heads

    def split(t, h):
        b, s, _ = t.shape
        return t.reshape(b, s, h, dh).transpose(1, 2)

    if "lengths" not in node and "mask" not in node:
        o = F.scaled_dot_product_attention(split(q, heads), split(k, kvh), split(v, kvh),
                                           is_causal=node.get("causal", False), scale=node.get("scale"),
                                           enable_gqa=kvh != heads)
    else:
        b, sq, skv = q.shape[0], q.shape[1], k.shape[1]
        add = torch.zeros(b, 1, sq, skv, dtype=q.dtype, device=q.device)
        if "mask" in node:
            add = add + t[node["mask"]]
        keep = torch.ones(b, 1, sq, skv, dtype=torch.bool, device=q.device)
        if "lengths" in node:
            n = t[node["lengths"]].round().long().clamp(0, skv)
            keep &= (torch.arange(skv, device=q.device)[None, :] < n[:, None])[:, None, None, :]
        if node.get("causal", False):
            keep &= torch.ones(sq, skv, dtype=torch.bool, device=q.device).tril()[None, None]
        add = add.masked_fill(~keep, float("-inf"))
        qh, kh, vh = split(q, heads), split(k, kvh), split(v, kvh)
        if kvh != heads:
            kh, vh = kh.repeat_interleave(heads // kvh, dim=1), vh.repeat_interleave(heads // kvh, dim=1)
        scale = node.get("scale", 1.0 / math.sqrt(dh))
        scores = (qh @ kh.transpose(-1, -2)) * scale + add
        dead = torch.isinf(scores).all(dim=-1, keepdim=True) & (scores < 0).all(dim=-1, keepdim=True)
        p = torch.softmax(scores.masked_fill(dead, 0.0), dim=-1).masked_fill(dead, 0.0)
        o = p @ vh
    b, h, s, d = o.shape
    return o.transpose(1, 2).reshape(b, s, h * d)


def rope(node, x, dims):
    """Hugging Face Llama's rotary embedding (rotate_half form): inv_freq and the angles
    in float32 as LlamaRotaryEmbedding computes them, cos/sin and the rotation in x's
    dtype (float32 for 16-bit x). Row i along the seq axis (dim -2) is at position
    i + offset; x [..., seq, heads*dh]. `packed: true`: x is q | k | v
    [..., (heads + 2*kv_heads)*dh]; the q and k heads are rotated, v is passed on."""
    heads = count(node, "heads", dims)
    if node.get("packed", False):
        kvh = count(node, "kv_heads", dims, heads)
        split = (heads + kvh) * (x.shape[-1] // (heads + 2 * kvh))
        qk = rope(dict(node, heads=heads + kvh, packed=False), x[..., :split], dims)
        return torch.cat((qk, x[..., split:]), dim=-1)
    seq, width = x.shape[-2], x.shape[-1]
    dh = width // heads
    theta = float(node.get("theta", 10000.0))
    inv_freq = 1.0 / (theta ** (torch.arange(0, dh, 2, dtype=torch.int64, device=x.device).float() / dh))
    pos = torch.arange(seq, device=x.device).float() + float(node.get("offset", 0))
    freqs = torch.outer(pos, inv_freq)  # [seq, dh/2], float32
    emb = torch.cat((freqs, freqs), dim=-1)
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = emb.to(ct).cos()[:, None, :], emb.to(ct).sin()[:, None, :]  # broadcast over heads
    xh = x.to(ct).reshape(*x.shape[:-1], heads, dh)
    rot = torch.cat((-xh[..., dh // 2:], xh[..., : dh // 2]), dim=-1)  # rotate_half
    return (xh * cos + rot * sin).reshape(x.shape).to(x.dtype)


def run_node(node, t, dims=None):
    op = node["op"]
    ins = [t[n] for n in node["in"]]
    if op == "gemm":
        bm = ins[1].T if node.get("trans_b", False) else ins[1]
        y = ins[0] @ bm
        if "bias" in node:
            y = y + t[node["bias"]]
        y = act(y, node.get("act"))
        if "mul" in node:
            y = y * t[node["mul"]]
        return y + t[node["residual"]] if "residual" in node else y
    if op == "add":
        return ins[0] + ins[1]
    if op == "mul":
        return ins[0] * ins[1]
    if op in ("relu", "gelu", "silu", "gelu_tanh", "tanh"):
        return act(ins[0], op)
    if op == "embedding":
        ids, table = ins[0].round().long(), ins[1]
        y = table[ids.clamp(0, table.shape[0] - 1)]
        if "pos" in node:
            y = y + t[node["pos"]][: ids.shape[-1]]
        return y
    if op == "layernorm":
        c = ins[0].shape[-1]
        return F.layer_norm(ins[0], (c,), t[node["gamma"]], t[node["beta"]], node.get("eps", 1e-5))
    if op == "rmsnorm":
        c = ins[0].shape[-1]
        return F.rms_norm(ins[0], (c,), t[node["gamma"]], node.get("eps", 1e-5))
    if op == "softmax":
        return F.softmax(ins[0], dim=-1)
    if op == "attention":
        return attention(node, ins, dims, t)
    if op == "rope":
        return rope(node, ins[0], dims)
    raise ValueError(op)


def hkc_run(hkc, pack, batch, target, args, outdir):
    cmd = [hkc, "run", "--allow-unsigned-native", pack, "--batch", str(batch), "--target", target, "--runs", "3", "--warmup", "1",
           "--save-outputs", outdir] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


def compare(out, ref, dtype):
    norm_tol, el_tol = TOL[dtype]
    if out.shape != ref.shape:
        return False, float("inf"), float("inf")
    if not np.all(np.isfinite(out)):
        return False, float("nan"), float("nan")
    rel = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
    worst = float(np.max(np.abs(out - ref) / (el_tol + el_tol * np.abs(ref)))) if out.size else 0.0
    return rel <= norm_tol and worst <= 1.0, rel, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hkc")
    ap.add_argument("spec")
    ap.add_argument("pack")
    ap.add_argument("work")
    ap.add_argument("--gpu-target", required=True)
    ap.add_argument("--host-target", default=None)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--batches", default=None,
                    help="comma-separated batch sizes instead of the spec's buckets (a non-bucket pads)")
    ap.add_argument("--host-max-batch", type=int, default=None,
                    help="check the host target only up to this batch (it is slow on big specs)")
    ap.add_argument("--no-padded", action="store_true")
    a = ap.parse_args()
    spec = expand_repeats(yaml.safe_load(open(a.spec)))
    dtype = spec.get("dtype", "f32")
    dims = spec.get("dims", {}) or {}
    ok = True
    if a.batches:
        batches, padded = [int(x) for x in a.batches.split(",")], None
    else:
        batches = sorted(set(spec["batch_sizes"]))
        padded = None
        if not a.no_padded and spec.get("batch_policy", "pad") == "pad":
            gaps = [(lo, hi) for lo, hi in zip(batches, batches[1:]) if hi - lo > 1]
            if gaps:
                padded = gaps[0][0] + (gaps[0][1] - gaps[0][0]) // 2
    for batch in batches + ([padded] if padded else []):
        work = os.path.join(a.work, "b%d" % batch)
        os.makedirs(work, exist_ok=True)
        rng = np.random.default_rng(a.seed + batch)
        t, args = {}, []
        for kind in ("inputs", "params"):
            for name, decl in (spec.get(kind) or {}).items():
                shape = decl["shape"] if isinstance(decl, dict) else decl  # {shape, dtype} or a shape
                shp = [eval_dim(d, dims, batch) for d in shape]
                scale = 1 / math.sqrt(shp[0]) if kind == "params" and len(shp) >= 2 else 1.0
                if isinstance(decl, dict) and decl.get("dtype") == "i32":
                    x = i32_input(name, spec, shp, dims, batch, rng)  # lengths 0/1/full/over, ids out of range
                else:
                    x = round_to(rng.uniform(-1, 1, size=shp) * scale, dtype)
                t[name] = t64(x)
                path = os.path.join(work, name + ".npy")
                write_npy(path, x)
                args += ["--input" if kind == "inputs" else "--param", "%s=%s" % (name, path)]
        for node in spec["graph"]:
            y = run_node(node, t, dims)
            t[node["out"]] = t64(round_to(y.cpu().numpy(), dtype))
        results = {}
        for label, target in (("gpu", a.gpu_target), ("host", a.host_target)):
            if not target or (label == "host" and a.host_max_batch is not None and batch > a.host_max_batch):
                continue
            outdir = os.path.join(work, label)
            rc, log = hkc_run(a.hkc, a.pack, batch, target, args, outdir)
            if rc != 0:
                print("FAIL %-14s batch %-3d %s: hkc run exited %d: %s" % (spec["name"], batch, target, rc, log[-400:]))
                ok = False
                continue
            timing = next((l for l in log.splitlines() if l.startswith("target ")), "")  # hkc run's summary line
            if batch == padded and "(padded)" not in timing:
                print("FAIL %-14s batch %-3d %s: hkc run did not run it padded: %s" % (spec["name"], batch, target, timing))
                ok = False
            results[label] = (outdir, timing)
        for name in spec["outputs"]:
            ref = t[name].cpu().numpy()
            row = []
            good = True
            for label in ("gpu", "host"):
                if label not in results:
                    continue
                out = np.load(os.path.join(results[label][0], name + ".npy")).astype(np.float64)
                g, rel, worst = compare(out, ref, dtype)
                good &= g
                row.append("%s %.2e (%.2f)" % (label, rel, worst))
            if "gpu" in results and "host" in results:
                og = np.load(os.path.join(results["gpu"][0], name + ".npy")).astype(np.float64)
                oh = np.load(os.path.join(results["host"][0], name + ".npy")).astype(np.float64)
                row.append("gpu-host %.2e" % (np.linalg.norm(og - oh) / max(np.linalg.norm(oh), 1e-30)))
            print("%s %-14s batch %-3d %-15s %-5s %s" % ("ok  " if good else "FAIL", spec["name"], batch, name, dtype,
                                                        "  ".join(row)))
            ok &= good
        if "gpu" in results:
            print("     %-14s batch %-3d gpu timing: %s" % (spec["name"], batch, results["gpu"][1]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
