#!/usr/bin/env python3
"""Device numerics check: one spec, one pack, every batch size, on the GPU.

For each batch size: draws random inputs and params (NumPy, seeded, rounded to the spec
dtype), runs the pack through `hkc run` on the GPU target and on the host target with
the same data (outputs NaN-poisoned by hkc run), and compares both with PyTorch computing
the spec's ops in float64 (each op's result rounded to the spec dtype, as stored
tensors are). Prints one row per output and exits 1 on any mismatch.

usage: check.py HKC SPEC PACK WORKDIR --gpu-target sm_90 [--host-target host-x86_64] [--seed S]
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
    return {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[name](x)


def attention(node, ins):
    heads = node["heads"]
    kvh = node.get("kv_heads", heads)
    if len(ins) == 1:
        dh = ins[0].shape[-1] // (heads + 2 * kvh)
        q, k, v = torch.split(ins[0], [heads * dh, kvh * dh, kvh * dh], dim=-1)
    else:
        q, k, v = ins
        dh = q.shape[-1] // heads

    def split(t, h):
        b, s, _ = t.shape
        return t.reshape(b, s, h, dh).transpose(1, 2)

    o = F.scaled_dot_product_attention(split(q, heads), split(k, kvh), split(v, kvh),
                                       is_causal=node.get("causal", False), scale=node.get("scale"),
                                       enable_gqa=kvh != heads)
    b, h, s, d = o.shape
    return o.transpose(1, 2).reshape(b, s, h * d)


def rope(node, x):
    """Rotate-half RoPE (Hugging Face Llama) on x [..., seq, heads*dh]: row r of the flattened
    leading dims is at position r % seq + offset. inv_freq = theta^(-2j/dh) and the angle
    position * inv_freq are f32, as HF's (and the kernels': the ABI's angle is an f32
    product); their cos and sin and the rotation are float64."""
    heads = node["heads"]
    theta = float(node.get("theta", 10000.0))
    offset = int(node.get("offset", 0))
    hd = x.shape[-1]
    dh = hd // heads
    half = dh // 2
    seq = x.shape[-2] if x.dim() >= 2 else 1
    rows = x.numel() // hd
    xr = x.reshape(rows, heads, dh)
    pos = (torch.arange(rows, device=x.device) % seq + offset).to(torch.float32)
    expo = -(2 * torch.arange(half, device=x.device)).to(torch.float32) / dh
    inv_freq = torch.pow(torch.tensor(theta, dtype=torch.float32, device=x.device), expo)
    ang = (pos[:, None] * inv_freq[None, :]).to(torch.float64)[:, None, :]  # [rows, 1, half]
    c, s = torch.cos(ang), torch.sin(ang)
    x1, x2 = xr[..., :half], xr[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).reshape(x.shape)


def run_node(node, t):
    op = node["op"]
    ins = [t[n] for n in node["in"]]
    if op == "gemm":
        bm = ins[1].T if node.get("trans_b", False) else ins[1]
        y = ins[0] @ bm
        if "bias" in node:
            y = y + t[node["bias"]]
        y = act(y, node.get("act"))
        if "mul" in node:  # the SwiGLU gate: act(A @ B + bias) * mul + residual
            y = y * t[node["mul"]]
        return y + t[node["residual"]] if "residual" in node else y
    if op == "add":
        return ins[0] + ins[1]
    if op == "mul":
        return ins[0] * ins[1]
    if op in ("relu", "gelu", "silu"):
        return act(ins[0], op)
    if op == "layernorm":
        c = ins[0].shape[-1]
        return F.layer_norm(ins[0], (c,), t[node["gamma"]], t[node["beta"]], node.get("eps", 1e-5))
    if op == "rmsnorm":
        c = ins[0].shape[-1]
        return F.rms_norm(ins[0], (c,), t[node["gamma"]], node.get("eps", 1e-5))
    if op == "softmax":
        return F.softmax(ins[0], dim=-1)
    if op == "attention":
        return attention(node, ins)
    if op == "rope":
        return rope(node, ins[0])
    raise ValueError(op)


def hkc_run(hkc, pack, batch, target, args, outdir):
    cmd = [hkc, "run", pack, "--batch", str(batch), "--target", target, "--runs", "3", "--warmup", "1",
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
    a = ap.parse_args()
    spec = yaml.safe_load(open(a.spec))
    dtype = spec.get("dtype", "f32")
    dims = spec.get("dims", {}) or {}
    ok = True
    for batch in spec["batch_sizes"]:
        work = os.path.join(a.work, "b%d" % batch)
        os.makedirs(work, exist_ok=True)
        rng = np.random.default_rng(a.seed + batch)
        t, args = {}, []
        for kind in ("inputs", "params"):
            for name, shape in (spec.get(kind) or {}).items():
                shp = [eval_dim(d, dims, batch) for d in shape]
                scale = 1 / math.sqrt(shp[0]) if kind == "params" and len(shp) >= 2 else 1.0
                x = round_to(rng.uniform(-1, 1, size=shp) * scale, dtype)
                t[name] = t64(x)
                path = os.path.join(work, name + ".npy")
                np.save(path, x.astype(np.float32))
                args += ["--input" if kind == "inputs" else "--param", "%s=%s" % (name, path)]
        for node in spec["graph"]:
            y = run_node(node, t)
            t[node["out"]] = t64(round_to(y.cpu().numpy(), dtype))
        results = {}
        for label, target in (("gpu", a.gpu_target), ("host", a.host_target)):
            if not target:
                continue
            outdir = os.path.join(work, label)
            rc, log = hkc_run(a.hkc, a.pack, batch, target, args, outdir)
            if rc != 0:
                print("FAIL %-14s batch %-3d %s: hkc run exited %d: %s" % (spec["name"], batch, target, rc, log[-400:]))
                ok = False
                continue
            timing = log.splitlines()[0] if log else ""
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
