#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks a pack written by `hkc import hf` against the Hugging Face layer math, in NumPy.

usage: hf_layers_ref.py HKC PACK CONFIG.json MAP WORKDIR [--batch N] [--seq N] [--swap-map A B]
                        [--quantize int8|fp8_e4m3]

Draws random weights in the checkpoint's own names and layouts (nn.Linear [out, in], GPT-2's
Conv1D [in, out]), with a few tensors the spec does not use (embeddings), writes them as
safetensors by hand (u64 header length | JSON | data), runs `hkc run --weights --weights-map`
on a random input, and compares the output with a float64 evaluation of the model's layers
written here from the Hugging Face modeling code's semantics (BertLayer: post-norm, erf gelu;
GPT2Block: pre-norm, fused c_attn, gelu_new, causal, ln_f; LlamaDecoderLayer: RMSNorm, rotary
embedding, grouped-query causal attention, SwiGLU, final norm, the projections' biases with
attention_bias / mlp_bias; MistralDecoderLayer: the same without biases, with its sliding
window mask; Qwen2DecoderLayer: biases on q, k and v only, its sliding window on layers >=
max_window_layers with use_sliding_window), independent of hkc's spec.
--swap-map A B swaps the checkpoint names of pack params A and B in the map (a wrong binding:
the comparison must then fail). --quantize D (a pack from `hkc import hf --quantize D`): the
random checkpoint goes through `hkc quantize --dtype D`; its 8-bit tensors and scales, read back
here, must be within half a quantization step of the float weights (int8: scale / 2; fp8_e4m3:
2^-4 relative, or half the subnormal step), and the reference evaluates the dequantized
weights. Exit 0 when the output is within tolerance, 1 otherwise.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np

import safetensors_io  # beside this file


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.write(b"".join(blobs))


def dequantized(hkc, w, path, qpath, dtype):
    """Runs hkc quantize on path; returns {name: dequantized weights} of the tensors it quantized,
    after checking each against its float weights; raises on a missing or wrong tensor."""
    # the layers' spec has no LM head: --no-lm-head (quantize.sh checks the head's copy)
    res = subprocess.run([hkc, "quantize", path, "-o", qpath, "--dtype", dtype, "--no-lm-head"], capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise ValueError("hkc quantize exited %d: %s" % (res.returncode, res.stderr))
    q, deq = {k: v[:2] for k, v in safetensors_io.read(qpath).items()}, {}
    for name, (dt, s) in q.items():
        if not name.endswith("_scale"):
            continue
        base = name[:-len("_scale")]
        qdt, qv = q[base]
        want = w[base].astype(np.float64)
        if qdt != ("I8" if dtype == "int8" else "F8_E4M3") or s.shape != (want.shape[0], 1):
            raise ValueError("%s: %s %s, scales %s" % (base, qdt, qv.shape, s.shape))
        d = qv * s
        if dtype == "int8":
            bound = s / 2 * (1 + 1e-6)
        else:
            bound = np.maximum(np.abs(want) * 2.0 ** -4, s * 2.0 ** -10) * (1 + 1e-6)
        if np.any(np.abs(d - want) > bound):
            raise ValueError("%s: dequantized weights off by %.3g" % (base, np.max(np.abs(d - want))))
        deq[base] = d
    if not deq:
        raise ValueError("hkc quantize wrote no scales")
    return deq


def write_npy(path, arr):
    np.save(path, np.ascontiguousarray(arr, dtype=np.int32 if arr.dtype.kind == "i" else np.float32))


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1 + np.exp(-x))


def heads_of(t, n):
    b, s, d = t.shape
    return t.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)  # [b, n, s, dh]


LENGTHS = None  # --padding: key lengths per batch entry (Hugging Face attention_mask, right padding)


def sdpa(q, k, v, causal, window=None):
    """q [b, h, s, dh], k and v [b, h, s, dh] -> [b, s, h*dh]; window: query i sees keys
    i - window < j only (Mistral's and Qwen2's sliding window)."""
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        s = q.shape[2]
        scores = np.where(np.tril(np.ones((s, s), dtype=bool)), scores, -np.inf)
    if window is not None:
        i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
        scores = np.where(i - j < window, scores, -np.inf)
    if LENGTHS is not None:  # keys j >= lengths[b] masked for every query row
        keep = np.arange(k.shape[2])[None, :] < LENGTHS[:, None]  # [b, s_kv]
        scores = np.where(keep[:, None, None, :], scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = p @ v
    b, h, s, dh = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


def bert(cfg, w, x):
    H, nh, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    eps = cfg.get("layer_norm_eps", 1e-12)
    lin = lambda t, p: t @ w[p + ".weight"].T + w[p + ".bias"]  # noqa: E731
    for i in range(L):
        p = "bert.encoder.layer.%d." % i
        q, k, v = (heads_of(lin(x, p + "attention.self." + n), nh) for n in ("query", "key", "value"))
        ctx = sdpa(q, k, v, False)
        h1 = layer_norm(lin(ctx, p + "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], eps)
        f = gelu_erf(lin(h1, p + "intermediate.dense"))
        x = layer_norm(lin(f, p + "output.dense") + h1, w[p + "output.LayerNorm.weight"],
                       w[p + "output.LayerNorm.bias"], eps)
    return x


def gpt2(cfg, w, x):
    H, nh, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    conv = lambda t, p: t @ w[p + ".weight"] + w[p + ".bias"]  # noqa: E731  Conv1D: [in, out]
    for i in range(L):
        p = "transformer.h.%d." % i
        qkv = conv(layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps), p + "attn.c_attn")
        q, k, v = (heads_of(t, nh) for t in np.split(qkv, 3, axis=-1))
        x = x + conv(sdpa(q, k, v, True), p + "attn.c_proj")
        f = gelu_new(conv(layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps), p + "mlp.c_fc"))
        x = x + conv(f, p + "mlp.c_proj")
    return layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)


def rotary(t, theta):
    """HF apply_rotary_pov on t [b, h, s, dh] at positions 0..s-1 (rotate_half form)."""
    dh, s = t.shape[-1], t.shape[2]
    inv_freq = 1.0 / (theta ** (np.arange(0, dh, 2, dtype=np.float64) / dh))
    freqs = np.outer(np.arange(s, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    rot = np.concatenate([-t[..., dh // 2:], t[..., :dh // 2]], axis=-1)
    return t * np.cos(emb) + rot * np.sin(emb)


def window_of(cfg, i):
    """Layer i's sliding window as the Mistral and Qwen2 modeling code applies it, or None."""
    kind, win = cfg["model_type"], cfg.get("sliding_window")
    if kind == "mistral":
        return win
    if kind == "qwen2" and cfg.get("use_sliding_window") and i >= cfg.get("max_window_layers", 28):
        return win
    return None


def llama(cfg, w, x):
    nh, L = cfg["num_attention_heads"], cfg["num_hidden_layers"]
    nkv = cfg.get("num_key_value_heads", nh)
    eps, theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
    # nn.Linear; q/k/v/o_proj have biases with attention_bias, the MLP's with mlp_bias
    lin = lambda t, p: t @ w[p + ".weight"].T + w.get(p + ".bias", 0.0)  # noqa: E731
    for i in range(L):
        p = "model.layers.%d." % i
        n1 = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = rotary(heads_of(lin(n1, p + "self_attn.q_proj"), nh), theta)
        k = rotary(heads_of(lin(n1, p + "self_attn.k_proj"), nkv), theta)
        v = heads_of(lin(n1, p + "self_attn.v_proj"), nkv)
        k, v = (np.repeat(t, nh // nkv, axis=1) for t in (k, v))  # repeat_kv
        x = x + lin(sdpa(q, k, v, True, window_of(cfg, i)), p + "self_attn.o_proj")
        n2 = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + lin(silu(lin(n2, p + "mlp.gate_proj")) * lin(n2, p + "mlp.up_proj"), p + "mlp.down_proj")
    return rms_norm(x, w["model.norm.weight"], eps)


def shapes(cfg):
    """The checkpoint's tensors (name -> shape), as transformers saves them."""
    t = {}
    kind = cfg["model_type"]
    if kind == "bert":
        H, F = cfg["hidden_size"], cfg["intermediate_size"]
        t["bert.embeddings.word_embeddings.weight"] = (cfg["vocab_size"], H)
        t["bert.embeddings.position_embeddings.weight"] = (cfg["max_position_embeddings"], H)
        t["bert.embeddings.token_type_embeddings.weight"] = (cfg.get("type_vocab_size", 2), H)
        t["bert.embeddings.LayerNorm.weight"] = t["bert.embeddings.LayerNorm.bias"] = (H,)
        for i in range(cfg["num_hidden_layers"]):
            p = "bert.encoder.layer.%d." % i
            for n in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
                t[p + n + ".weight"], t[p + n + ".bias"] = (H, H), (H,)
            for n in ("attention.output.LayerNorm", "output.LayerNorm"):
                t[p + n + ".weight"], t[p + n + ".bias"] = (H,), (H,)
            t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = (F, H), (F,)
            t[p + "output.dense.weight"], t[p + "output.dense.bias"] = (H, F), (H,)
    elif kind == "gpt2":
        H = cfg["n_embd"]
        F = cfg.get("n_inner") or 4 * H
        t["transformer.wte.weight"] = (cfg["vocab_size"], H)
        t["transformer.wpe.weight"] = (cfg["n_positions"], H)
        for i in range(cfg["n_layer"]):
            p = "transformer.h.%d." % i
            for n in ("ln_1", "ln_2"):
                t[p + n + ".weight"], t[p + n + ".bias"] = (H,), (H,)
            t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = (H, 3 * H), (3 * H,)
            t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = (H, H), (H,)
            t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = (H, F), (F,)
            t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = (F, H), (H,)
        t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = (H,), (H,)
    else:
        H, F, nh = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
        nkv = cfg.get("num_key_value_heads", nh)
        dh = cfg.get("head_dim") or H // nh
        t["model.embed_tokens.weight"] = (cfg["vocab_size"], H)
        for i in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % i
            t[p + "input_layernorm.weight"] = t[p + "post_attention_layernorm.weight"] = (H,)
            t[p + "self_attn.q_proj.weight"] = (nh * dh, H)
            t[p + "self_attn.k_proj.weight"] = t[p + "self_attn.v_proj.weight"] = (nkv * dh, H)
            t[p + "self_attn.o_proj.weight"] = (H, nh * dh)
            t[p + "mlp.gate_proj.weight"] = t[p + "mlp.up_proj.weight"] = (F, H)
            t[p + "mlp.down_proj.weight"] = (H, F)
            # Llama: biases with attention_bias / mlp_bias; Mistral: none; Qwen2: on q, k and v
            qkv_bias = kind == "qwen2" or (kind == "llama" and cfg.get("attention_bias"))
            if qkv_bias:
                t[p + "self_attn.q_proj.bias"] = (nh * dh,)
                t[p + "self_attn.k_proj.bias"] = t[p + "self_attn.v_proj.bias"] = (nkv * dh,)
            if kind == "llama" and cfg.get("attention_bias"):
                t[p + "self_attn.o_proj.bias"] = (H,)
            if kind == "llama" and cfg.get("mlp_bias"):
                t[p + "mlp.gate_proj.bias"] = t[p + "mlp.up_proj.bias"] = (F,)
                t[p + "mlp.down_proj.bias"] = (H,)
        t["model.norm.weight"] = (H,)
    return t


def main():
    args = sys.argv[1:]
    if len(args) < 5:
        print(__doc__)
        return 2
    hkc, pack, cfg_path, map_path, work = args[:5]
    global LENGTHS
    batch, seq, swap, padding, embeddings, quantize = 2, 8, None, False, False, None
    rest = args[5:]
    while rest:
        if rest[0] == "--batch":
            batch, rest = int(rest[1]), rest[2:]
        elif rest[0] == "--seq":
            seq, rest = int(rest[1]), rest[2:]
        elif rest[0] == "--swap-map":
            swap, rest = (rest[1], rest[2]), rest[3:]
        elif rest[0] == "--padding":  # a pack from `hkc import hf --padding-mask`: random lengths
            padding, rest = True, rest[1:]
        elif rest[0] == "--embeddings":  # a pack from `hkc import hf --embeddings`: token ids in
            embeddings, rest = True, rest[1:]
        elif rest[0] == "--quantize":
            quantize, rest = rest[1], rest[2:]
        else:
            print("unknown argument", rest[0])
            return 2
    cfg = json.load(open(cfg_path))
    rng = np.random.default_rng(11)
    w = {}
    for name, shp in shapes(cfg).items():
        if len(shp) == 1:  # norm gains near 1, biases small
            gain = name.endswith(".weight") and ("norm" in name or "LayerNorm" in name or ".ln_" in name)
            base = 1.0 if gain else 0.0
            w[name] = (base + rng.uniform(-0.2, 0.2, size=shp)).astype(np.float32)
        else:
            fan_in = shp[0] if cfg["model_type"] == "gpt2" else shp[1]
            w[name] = (rng.uniform(-1, 1, size=shp) / math.sqrt(fan_in)).astype(np.float32)
    hidden = cfg.get("hidden_size", cfg.get("n_embd"))
    x = rng.uniform(-1, 1, size=(batch, seq, hidden)).astype(np.float32)
    os.makedirs(work, exist_ok=True)
    extra = []
    if padding:
        LENGTHS = rng.integers(1, seq + 1, size=batch).astype(np.int32)
        LENGTHS[-1] = max(1, seq // 2)  # a padded entry whatever the draw
        write_npy(os.path.join(work, "lengths.npy"), LENGTHS)
        extra = ["--input", "lengths=" + os.path.join(work, "lengths.npy")]
    write_safetensors(os.path.join(work, "model.safetensors"), w)
    checkpoint = os.path.join(work, "model.safetensors")
    deq = {}
    if quantize:
        try:
            deq = dequantized(hkc, w, checkpoint, os.path.join(work, "model-q.safetensors"), quantize)
        except ValueError as e:
            print("FAIL: %s" % e)
            return 1
        checkpoint = os.path.join(work, "model-q.safetensors")
    write_npy(os.path.join(work, "x.npy"), x)
    if swap:
        lines = open(map_path).read().splitlines()
        pairs = {l.split()[0]: l.split()[1] for l in lines if l.strip() and not l.startswith("#")}
        pairs[swap[0]], pairs[swap[1]] = pairs[swap[1]], pairs[swap[0]]
        map_path = os.path.join(work, "swapped.map")
        open(map_path, "w").write("".join("%s %s\n" % kv for kv in pairs.items()))
    model = {"bert": bert, "gpt2": gpt2, "llama": llama, "mistral": llama, "qwen2": llama}[cfg["model_type"]]
    w64 = {k: deq[k] if k in deq else v.astype(np.float64) for k, v in w.items()}
    inputs = ["--input", "x=" + os.path.join(work, "x.npy")]
    if embeddings:  # token ids (a few out of range: clamped) -> the embeddings -> x
        kind, vocab = cfg["model_type"], cfg["vocab_size"]
        ids = rng.integers(0, vocab, size=(batch, seq)).astype(np.int32)
        ids.flat[0], ids.flat[-1] = -3, vocab + 5
        write_npy(os.path.join(work, "ids.npy"), ids)
        inputs = ["--input", "ids=" + os.path.join(work, "ids.npy")]
        cl = np.clip(ids, 0, vocab - 1)
        if kind == "bert":
            tt = rng.integers(0, cfg.get("type_vocab_size", 2), size=(batch, seq)).astype(np.int32)
            write_npy(os.path.join(work, "tt.npy"), tt)
            inputs += ["--input", "token_type_ids=" + os.path.join(work, "tt.npy")]
            e = (w64["bert.embeddings.word_embeddings.weight"][cl] + w64["bert.embeddings.position_embeddings.weight"][:seq]
                 + w64["bert.embeddings.token_type_embeddings.weight"][tt])
            x64 = layer_norm(e, w64["bert.embeddings.LayerNorm.weight"], w64["bert.embeddings.LayerNorm.bias"],
                             cfg.get("layer_norm_eps", 1e-12))
        elif kind == "gpt2":
            x64 = w64["transformer.wte.weight"][cl] + w64["transformer.wpe.weight"][:seq]
        else:
            x64 = w64["model.embed_tokens.weight"][cl]
    else:
        x64 = x.astype(np.float64)
    ref = model(cfg, w64, x64)
    out_dir = os.path.join(work, "out")
    cmd = [hkc, "run", "--allow-unsigned-native", pack, "--batch", str(batch), "--runs", "1", "--warmup", "0",
           "--weights", checkpoint, "--weights-map", map_path,
           "--save-outputs", out_dir] + inputs + extra
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stdout.write(res.stdout + res.stderr)
        print("FAIL: hkc run exited %d" % res.returncode)
        return 1
    outs = [f for f in os.listdir(out_dir) if f.endswith(".npy")]
    if len(outs) != 1:
        print("FAIL: expected one output, got %s" % outs)
        return 1
    out = np.load(os.path.join(out_dir, outs[0])).astype(np.float64)
    if out.shape != ref.shape:
        print("FAIL: output shape %s, reference %s" % (out.shape, ref.shape))
        return 1
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    worst = np.max(np.abs(out - ref) / (1e-4 + 1e-4 * np.abs(ref)))
    good = bool(np.all(np.isfinite(out))) and rel <= 1e-5 and worst <= 1.0
    print("%s %s %s batch %d seq %d%s%s: rel-norm err %.3g (bound 1e-05), worst elem/bound %.3g"
          % ("ok  " if good else "FAIL", cfg["model_type"] + (" " + quantize if quantize else ""), outs[0], batch, seq,
             " lengths %s" % LENGTHS.tolist() if padding else "", " from token ids" if embeddings else "", rel, worst))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
