#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent reference for hkc packs: reads a spec with PyYAML, draws random inputs
and params with NumPy, runs `hkc run` on them, and compares every output with a NumPy
float64 evaluation of the spec's ops (docs/SPEC.md, "Graph nodes").

Each op's result is rounded to the spec dtype, as stored tensors are, so the
comparison measures kernel error rather than the dtype's storage rounding.

usage: reference.py HKC PACK SPEC BATCH WORKDIR [--target T] [--seed S]
exit 0 when every output is within tolerance, 1 otherwise.

$HK_REF_CACHE (a directory), when set, keeps the float64 reference outputs between runs,
keyed by the spec's bytes, the batch, the seed and this file's own bytes: the sanitizer
pass of scripts/test.sh compares against the outputs the release pass computed instead of
evaluating the graph again (llama_block's batch 1 alone takes minutes in NumPy).
"""
import hashlib
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


def fp8_e4m3_table():
    """The 256 values of float8 e4m3fn by bit pattern: (8 + m) 2^(e - 10) for exponent field
    e in 1..15, m 2^-9 for e = 0; S.1111.111 is NaN."""
    vals = np.empty(256)
    for b in range(256):
        e, m = (b >> 3) & 15, b & 7
        v = math.nan if (e == 15 and m == 7) else (m * 2.0 ** -9 if e == 0 else (8 + m) * 2.0 ** (e - 10))
        vals[b] = -v if b & 0x80 else v
    return vals


FP8 = fp8_e4m3_table()
FP8_FINITE = np.where(np.isfinite(FP8))[0].astype(np.uint8)


def quantized_params(spec, dims, batch, rng):
    """{name: (raw array written for hkc, dequantized float64)} for the params of dtype int8 and
    fp8_e4m3, and {scale name: its f32 values}. Element (r, c) is q[r, c] * scale[r // br, c // bc]
    with the block (br, bc) given, or rows / scale_rows x cols / scale_cols (docs/SPEC.md)."""
    decls = spec.get("params") or {}
    raw, scales = {}, {}
    for name, decl in decls.items():
        if not isinstance(decl, dict) or decl.get("dtype") not in ("int8", "fp8_e4m3"):
            continue
        rows, cols = [eval_dim(d, dims, batch) for d in decl["shape"]]
        sdecl = decls[decl["scale"]]
        sshape = [eval_dim(d, dims, batch) for d in sdecl["shape"]]
        srows, scols = (sshape + [1])[:2] if len(sshape) == 2 else (1, 1)
        br, bc = decl.get("block") or (rows // srows, cols // scols)
        if decl["dtype"] == "int8":
            q = rng.integers(-127, 128, size=(rows, cols)).astype(np.int8)
            qf, unit = q.astype(np.float64), 127.0
        else:
            q = rng.choice(FP8_FINITE, size=(rows, cols)).astype(np.uint8)  # any finite code: +-448 .. 2^-9
            qf, unit = FP8[q], 448.0
        s = (rng.uniform(0.5, 1.5, size=sshape) / (unit * math.sqrt(rows))).astype(np.float32)
        s2 = s.astype(np.float64).reshape(srows, scols)
        full = s2[np.arange(rows)[:, None] // br, np.arange(cols)[None, :] // bc]
        raw[name] = (q, qf * full)
        scales[decl["scale"]] = s
    return raw, scales


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
    if name == "tanh":
        return np.tanh(x)
    raise ValueError(name)


def count(node, key, dims, default=None):
    """A node's integer attribute (heads, kv_heads): a literal or an expression over dims."""
    return eval_dim(node[key], dims or {}, 1) if key in node else default


def attention(node, ins, dims, t=None):
    """softmax(q k^T * scale + mask) v per head; grouped-query: q head h reads kv head
    h // (heads / kv_heads); causal masks key j > query i (top-left aligned); `lengths`
    (i32 [B]) masks keys j >= lengths[b] (clamped to 0..seq_kv); `mask` [B, 1|heads, S, Skv]
    is added to the scaled scores. A row with every key masked outputs zeros."""
    heads = count(node, "heads", dims)
    kv_heads = count(node, "kv_heads", dims, heads)
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
    valid = np.ones((b, s, skv), dtype=bool)
    if node.get("causal", False):
        valid &= ~np.triu(np.ones((s, skv), dtype=bool), 1)[None]
    if "lengths" in node:
        lens = np.clip(t[node["lengths"]].astype(np.int64), 0, skv)
        valid &= (np.arange(skv)[None, None, :] < lens[:, None, None])
    add = t[node["mask"]] if "mask" in node else None
    for h in range(heads):
        kh = h // group
        qh = q[:, :, h * dh : (h + 1) * dh]
        kk = k[:, :, kh * dh : (kh + 1) * dh]
        vv = v[:, :, kh * dh : (kh + 1) * dh]
        scores = np.einsum("bid,bjd->bij", qh, kk) * scale
        if add is not None:
            scores = scores + add[:, h if add.shape[1] > 1 else 0]
        scores = np.where(valid, scores, -np.inf)
        m = scores.max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        p = np.exp(scores - m)
        l = p.sum(-1, keepdims=True)
        p = np.where(l > 0, p / np.where(l > 0, l, 1.0), 0.0)
        out[:, :, h * dh : (h + 1) * dh] = np.einsum("bij,bjd->bid", p, vv)
    return out


def rope(node, x, dims):
    """Rotary embedding, rotate-half form (Hugging Face Llama): x [..., seq, heads*dh];
    row i along the seq axis is at position i + offset. inv_freq = 1 / theta^(2j/dh) and
    angle = position * inv_freq are rounded to f32, as Hugging Face computes them (and
    as DESIGN's semantics say); cos, sin and the rotation are float64. `packed: true`:
    x is q | k | v [..., (heads + 2*kv_heads)*dh]; q and k are rotated, v is passed on."""
    heads = count(node, "heads", dims)
    if node.get("packed", False):
        kvh = count(node, "kv_heads", dims, heads)
        dh = x.shape[-1] // (heads + 2 * kvh)
        assert dh * (heads + 2 * kvh) == x.shape[-1]
        split = (heads + kvh) * dh
        qk = rope(dict(node, heads=heads + kvh, packed=False), x[..., :split], dims)
        return np.concatenate([qk, x[..., split:]], axis=-1)
    seq, width = x.shape[-2], x.shape[-1]
    dh = width // heads
    assert dh * heads == width and dh % 2 == 0
    theta = np.float32(node.get("theta", 10000.0))
    inv_freq = np.float32(1) / theta ** (np.arange(0, dh, 2).astype(np.float32) / np.float32(dh))
    pos = (np.arange(seq) + int(node.get("offset", 0))).astype(np.float32)
    angle = (pos[:, None] * inv_freq[None, :]).astype(np.float64)  # [seq, dh/2], f32 product
    cos, sin = np.cos(angle), np.sin(angle)
    xh = x.reshape(x.shape[:-1] + (heads, dh))  # [..., seq, heads, dh]
    x1, x2 = xh[..., : dh // 2], xh[..., dh // 2 :]
    cos, sin = cos[:, None, :], sin[:, None, :]  # broadcast over heads
    out = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.reshape(x.shape)


def run_node(node, t, dims=None):
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
    if op in ("relu", "gelu", "silu", "gelu_tanh", "tanh"):
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
        return attention(node, ins, dims, t)
    if op == "rope":
        return rope(node, ins[0], dims)
    if op == "embedding":
        ids, table = ins
        y = table[np.clip(ids.astype(np.int64), 0, table.shape[0] - 1)]
        if "pos" in node:
            seq = ids.shape[-1]
            y = y + t[node["pos"]][:seq]
        return y
    raise ValueError("op " + op)


REF_KEYS = ("bias", "residual", "mul", "gamma", "beta")


def expand_repeats(spec):
    """Expands `repeat:` graph entries (docs/SPEC.md "Repeated layers"), written here from the
    documented rules rather than from hkc's code, so that a difference shows as a failure."""
    dims = spec.get("dims") or {}
    graph, params = [], dict(spec.get("params") or {})
    for entry in spec["graph"]:
        if "repeat" not in entry:
            graph.append(entry)
            continue
        r = entry["repeat"]
        count = r["count"] if isinstance(r["count"], int) else int(dims[r["count"]])
        pat = "{%s}" % r.get("var", "i")
        rin, rout = r["in"], r["out"]
        local = set((r.get("params") or {}).keys())
        local |= {n["out"] for n in r["body"] if n["out"] != rout}

        def sub(v, k):
            return v.replace(pat, str(k)) if isinstance(v, str) else v

        def loc_name(name, k):
            return sub(name, k) if pat in name else "%s_%d" % (name, k)

        def io(k, inp):
            if inp and k == 0:
                return rin
            layer = k - 1 if inp else k
            return rout if layer == count - 1 else "%s_%d" % (rout, layer)

        def ref(name, k):
            if name == rin:
                return io(k, True)
            if name == rout:
                return io(k, False)
            return loc_name(name, k) if name in local else sub(name, k)

        for k in range(count):
            for name, shape in (r.get("params") or {}).items():
                params[loc_name(name, k)] = [sub(d, k) for d in shape]
            for n in r["body"]:
                c = {key: sub(v, k) for key, v in n.items()}
                c["name"] = loc_name(n["name"], k)
                c["out"] = io(k, False) if n["out"] == rout else loc_name(n["out"], k)
                c["in"] = [ref(x, k) for x in n["in"]]
                for key in REF_KEYS:
                    if key in n:
                        c[key] = ref(n[key], k)
                graph.append(c)
    spec["graph"], spec["params"] = graph, params
    return spec


def write_npy(path, arr):
    np.save(path, arr if arr.dtype in (np.int32, np.int8, np.uint8) else arr.astype(np.float32))


def decl_shape(spec, name):
    """The declared shape of an input or param (either spelling), None for a node output."""
    for kind in ("inputs", "params"):
        decl = (spec.get(kind) or {}).get(name)
        if decl is not None:
            return decl["shape"] if isinstance(decl, dict) else decl
    return None


def i32_input(name, spec, shp, dims, batch, rng):
    """Random values for an i32 input, by its use: attention lengths cover 1, the full
    length, 0 and over-long (clamped) in the first rows, random after; embedding ids are
    random rows with a few out of range (clamped)."""
    for node in spec["graph"]:
        if node["op"] == "attention" and node.get("lengths") == name:
            kv = decl_shape(spec, node["in"][1] if len(node["in"]) == 3 else node["in"][0])
            if kv is None:  # k is a node output: any lengths (the kernels clamp)
                break
            skv = eval_dim(kv[1], dims, batch)
            x = rng.integers(1, skv + 1, size=shp)
            special = [skv, 1, 0, skv + 3] if batch > 1 else []
            x.flat[: len(special)] = special[: x.size]
            return x.astype(np.int32)
        if node["op"] == "embedding" and node["in"][0] == name:
            vocab = eval_dim(decl_shape(spec, node["in"][1])[0], dims, batch)
            x = rng.integers(0, vocab, size=shp)
            if x.size > 2:
                x.flat[0], x.flat[-1] = -5, vocab + 7  # out of range: clamped
            return x.astype(np.int32)
    return rng.integers(0, 100, size=shp).astype(np.int32)


def ref_cache_path(spec_path, batch, seed):
    """Where $HK_REF_CACHE keeps this reference's outputs, or None without a cache."""
    root = os.environ.get("HK_REF_CACHE")
    if not root:
        return None
    h = hashlib.sha256()
    for path in (spec_path, os.path.abspath(__file__)):
        with open(path, "rb") as f:
            h.update(f.read())
    h.update(("batch=%d seed=%d" % (batch, seed)).encode())
    os.makedirs(root, exist_ok=True)
    return os.path.join(root, h.hexdigest()[:32] + ".npz")


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
        spec = expand_repeats(yaml.safe_load(f))
    dtype = spec.get("dtype", "f32")
    dims = spec.get("dims", {}) or {}
    rng = np.random.default_rng(seed)
    os.makedirs(work, exist_ok=True)
    t = {}
    cmd = [hkc, "run", "--allow-unsigned-native", pack, "--batch", str(batch), "--runs", "1", "--warmup", "0",
           "--save-outputs", os.path.join(work, "out")]
    if target:
        cmd += ["--target", target]
    quant, quant_scales = quantized_params(spec, dims, batch, np.random.default_rng(seed + 1))
    for kind in ("inputs", "params"):
        for name, decl in (spec.get(kind) or {}).items():
            shape = decl["shape"] if isinstance(decl, dict) else decl
            shp = [eval_dim(d, dims, batch) for d in shape]
            scale = 1.0
            if kind == "params" and len(shp) >= 2:
                scale = 1 / math.sqrt(shp[0])
            if name in quant:  # the raw 8-bit values for hkc; the gemm reads its dequant node's copy
                x, t[name] = quant[name][0], round_to(quant[name][1], dtype)
            elif name in quant_scales:
                x = t[name] = quant_scales[name]
            elif isinstance(decl, dict) and decl.get("dtype") == "i32":
                x = t[name] = i32_input(name, spec, shp, dims, batch, rng)
            else:
                x = t[name] = round_to(rng.uniform(-1, 1, size=shp) * scale, dtype)
            path = os.path.join(work, name + ".npy")
            write_npy(path, x)
            cmd += ["--input" if kind == "inputs" else "--param", "%s=%s" % (name, path)]
    cached = ref_cache_path(spec_path, batch, seed)
    if cached and os.path.exists(cached):
        with np.load(cached) as saved:
            t.update({name: saved[name] for name in spec["outputs"]})
    else:
        for node in spec["graph"]:
            t[node["out"]] = round_to(run_node(node, t, dims), dtype)
        if cached:
            tmp = cached + ".%d.tmp.npz" % os.getpid()
            np.savez(tmp, **{name: t[name] for name in spec["outputs"]})
            os.replace(tmp, cached)
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
