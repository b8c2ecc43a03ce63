#!/usr/bin/env python3
"""Independent reference for hkc packs: reads a spec with PyYAML, draws random inputs
and params with NumPy, runs `hkc run` on them, and compares every output with a NumPy
float64 evaluation of the spec's ops (DESIGN.md "Op semantics").

Each op's result is rounded to the spec dtype, as stored tensors are, so the
comparison measures kernel error rather than the dtype's storage rounding.

usage: reference.py HKC PACK SPEC BATCH WORKDIR [--target T] [--seed S]
exit 0 when every output is within tolerance, 1 otherwise.
"""
import math
import os
import re
import subprocess
import sys

import numpy as np
import yaml

# Relative error bounds (||out - ref|| / ||ref||, and max |out - ref| / (atol + rtol|ref|)).
TOL = {"f32": (1e-5, 1e-4), "f16": (5e-3, 3e-2), "bf16": (3e-2, 1.5e-1)}


def to_bf16(x):
    """Round float64 -> bfloat16 (nearest even), returned as float64."""
    f = np.asarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def round_to(x, dtype):
    if dtype == "f32":
        return np.asarray(x, dtype=np.float32).astype(np.float64)
    if dtype == "f16":
        return np.asarray(x, dtype=np.float16).astype(np.float64)
    return to_bf16(x)


def eval_dim(expr, dims, batch):
    if isinstance(expr, int):
        return expr
    env = dict(dims)
    env["batch"] = batch
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/() ]+", str(expr)):
        raise ValueError("bad dim expression %r" % expr)
    value = eval(str(expr).replace("/", "//"), {"__builtins__": {}}, env)
    return int(value)


def erf(x):
    return np.vectorize(math.erf)(x)


def act(x, name):
    if name in (None, "none"):
        return x
    if name == "relu":
        return np.maximum(x, 0)
    if name == "gelu":
        return 0.5 * x * (1 + erf(x / math.sqrt(2)))
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name == "silu":
        return x / (1 + np.exp(-x))
    raise ValueError(name)


def attention(node, ins):
    heads = node["heads"]
    kv_heads = node.get("kv_heads", heads)
    if len(ins) == 1:
        qkv = ins[0]
        width = qkv.shape[-1]
        dh = width // (heads + 2 * kv_heads)
        q = qkv[..., : heads * dh]
        k = qkv[..., heads * dh : (heads + kv_heads) * dh]
        v = qkv[..., (heads + kv_heads) * dh :]
    else:
        q, k, v = ins
        dh = q.shape[-1] // heads
    b, s, _ = q.shape
    skv = k.shape[1]
    scale = node.get("scale", 1 / math.sqrt(dh))
    out = np.zeros((b, s, heads * dh))
    group = heads // kv_heads
    for h in range(heads):
        kh = h // group
        qh = q[:, :, h * dh : (h + 1) * dh]
        kk = k[:, :, kh * dh : (kh + 1) * dh]
        vv = v[:, :, kh * dh : (kh + 1) * dh]
        scores = np.einsum("bid,bjd->bij", qh, kk) * scale
        if node.get("causal", False):
            mask = np.triu(np.ones((s, skv), dtype=bool), 1)
            scores = np.where(mask, -np.inf, scores)
        scores -= scores.max(-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(-1, keepdims=True)
        out[:, :, h * dh : (h + 1) * dh] = np.einsum("bij,bjd->bid", p, vv)
    return out


def run_node(node, t):
    op = node["op"]
    ins = [t[n] for n in node["in"]]
    if op == "gemm":
        a, bmat = ins
        if node.get("trans_b", False):
            bmat = bmat.T
        y = a @ bmat
        if "bias" in node:
            y = y + t[node["bias"]]
        y = act(y, node.get("act"))
        if "mul" in node:
            y = y * t[node["mul"]]
        if "residual" in node:
            y = y + t[node["residual"]]
        return y
    if op == "add":
        return ins[0] + ins[1]
    if op == "mul":
        return ins[0] * ins[1]
    if op in ("relu", "gelu", "silu"):
        return act(ins[0], op)
    if op == "layernorm":
        x = ins[0]
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + node.get("eps", 1e-5)) * t[node["gamma"]] + t[node["beta"]]
    if op == "rmsnorm":
        x = ins[0]
        return x / np.sqrt((x**2).mean(-1, keepdims=True) + node.get("eps", 1e-5)) * t[node["gamma"]]
    if op == "softmax":
        x = ins[0] - ins[0].max(-1, keepdims=True)
        e = np.exp(x)
        return e / e.sum(-1, keepdims=True)
    if op == "attention":
        return attention(node, ins)
    raise ValueError("op " + op)


def write_npy(path, arr):
    np.save(path, arr.astype(np.float32))


def main():
    args = sys.argv[1:]
    if len(args) < 5:
        print(__doc__)
        return 2
    hkc, pack, spec_path, batch, work = args[:5]
    batch = int(batch)
    target = None
    seed = 7
    rest = args[5:]
    while rest:
        if rest[0] == "--target":
            target = rest[1]
        elif rest[0] == "--seed":
            seed = int(rest[1])
        rest = rest[2:]
    with open(spec_path) as f:
        spec = yaml.safe_load(f)
    dtype = spec.get("dtype", "f32")
    dims = spec.get("dims", {}) or {}
    rng = np.random.default_rng(seed)
    os.makedirs(work, exist_ok=True)
    t = {}
    cmd = [hkc, "run", pack, "--batch", str(batch), "--runs", "1", "--warmup", "0",
           "--save-outputs", os.path.join(work, "out")]
    if target:
        cmd += ["--target", target]
    for kind in ("inputs", "params"):
        for name, shape in (spec.get(kind) or {}).items():
            shp = [eval_dim(d, dims, batch) for d in shape]
            scale = 1.0
            if kind == "params" and len(shp) >= 2:
                scale = 1 / math.sqrt(shp[0])
            x = round_to(rng.uniform(-1, 1, size=shp) * scale, dtype)
            t[name] = x
            path = os.path.join(work, name + ".npy")
            write_npy(path, x)
            cmd += ["--input" if kind == "inputs" else "--param", "%s=%s" % (name, path)]
    for node in spec["graph"]:
        t[node["out"]] = round_to(run_node(node, t), dtype)
    res = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(res.stdout)
    if res.returncode != 0:
        sys.stderr.write(res.stderr)
        print("FAIL: hkc run exited %d" % res.returncode)
        return 1
    norm_tol, max_tol = TOL[dtype]
    ok = True
    for name in spec["outputs"]:
        out = np.load(os.path.join(work, "out", name + ".npy")).astype(np.float64)
        ref = t[name]
        if out.shape != ref.shape:
            print("FAIL %s: shape %s, reference %s" % (name, out.shape, ref.shape))
            ok = False
            continue
        rel = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
        worst = np.max(np.abs(out - ref) / (max_tol + max_tol * np.abs(ref)))
        good = np.all(np.isfinite(out)) and rel <= norm_tol and worst <= 1.0
        print("%s %s batch %d: rel-norm err %.3g (bound %.3g), worst elem/bound %.3g"
              % ("ok  " if good else "FAIL", name, batch, rel, norm_tol, worst))
        ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
