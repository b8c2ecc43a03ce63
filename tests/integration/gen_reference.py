#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Greedy generation of Hugging Face decoder models in NumPy: a reference for `hkc generate`.

    gen_reference.py weights CONFIG.json OUT.safetensors [--seed S]
    gen_reference.py greedy CONFIG.json W.safetensors --ids P.npy [--ids ...] -n N [--stop ID] [--json]
    gen_reference.py emulate SPEC.yaml MAP W.safetensors --ids P.npy [--ids ...] -n N [--stop ID] [--json]

`greedy` (and the function greedy(config, weights, prompt_ids, n_new)) runs the model of a
config.json -- Llama (rope scaling llama3, linear and dynamic computed from their definitions),
Mistral (sliding window), Qwen2 (biases on q, k and v; its sliding window rule), GPT-2 -- in
float64, written here from the Hugging Face modeling code's semantics and from nothing of hkc:
every step recomputes the whole sequence from its first token (no KV cache), so it checks
hkc's caches, positions and token rows independently. The next id is the first index of the
largest logit; the smallest top-1 minus top-2 logit margin over all steps is printed (stderr;
`min_margin` in --json), so a near tie -- where f32 kernels may rightly pick the other id -- is
visible. --stop ID ends a sequence after it has produced ID (the id is kept, as generate does).
--json prints {"outputs": [[new ids of prompt 0], ...], "min_margin": m} (`greedy` adds
"margins": each prompt's margin per step; `emulate` "prefill_steps"), the form of `hkc generate
--json`.

`weights` writes random weights for a config as a safetensors file (written by hand: u64
header length, JSON header, raw little-endian F32 data), under the checkpoint's names and
layouts (nn.Linear [out, in]; GPT-2's Conv1D [in, out]; lm_head.weight only when the
embeddings are not tied): matrices normal * 2 / sqrt(fan_in) (0.18 to 0.25 here), token and
position embeddings normal * 0.15, norm gains 1 +- 0.2, biases normal * 0.1. The layers' outputs
then outweigh the token's own embedding in the residual stream, so that greedy ids follow the
context instead of repeating the last token (which tied embeddings favour), and the top two
logits stay apart (the smallest margin over a test's steps is about 1e-3 of logits of about 1,
against f32 errors near 1e-6).

`emulate` runs a generation spec (`hkc import hf --generate`) the way docs/GENERATE.md defines
its ops and the generator -- token rows, ctx/slot/rows inputs, buckets with padding rows of ctx
0, prompts longer than the largest bucket prefilled in chunks, KV caches as state -- in
float64 with the spec's own params bound through its name map (parts concatenated). Its ids
must equal `greedy`'s: this checks the importer's spec without hkc's compiler, so that a
difference between `hkc generate` and `greedy` can be placed. Needs PyYAML.

Exit status: 0 done, 1 bad input (one line on stderr), 2 usage.
"""
import json
import math
import re
import sys

import numpy as np

# ---- safetensors ---------------------------------------------------------------------------


def write_safetensors(path, tensors):
    """Writes {name: array} as a safetensors file: u64 little-endian header length, the JSON
    header (padded with spaces to 8 bytes), then each tensor's F32 bytes, row-major."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(tensors[name])), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.write(b"".join(blobs))


def read_safetensors(path):
    """{name: float64 array} of a safetensors file's F32, F16, BF16 and F64 tensors."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    base, out = 8 + n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        buf = raw[base + b:base + e]
        if t["dtype"] == "BF16":
            a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(buf, {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[t["dtype"]])
        out[name] = a.astype(np.float64).reshape(t["shape"])
    return out


# ---- the models ----------------------------------------------------------------------------

LLAMA_FAMILY = ("llama", "mistral", "qwen2")


def hidden_of(cfg):
    return cfg["n_embd"] if cfg["model_type"] == "gpt2" else cfg["hidden_size"]


def kv_heads_of(cfg):
    """num_key_value_heads as the config classes default it (Mistral 8, Qwen2 32, Llama the
    heads; null: the heads)."""
    nh = cfg["num_attention_heads"]
    default = {"llama": nh, "mistral": 8, "qwen2": 32}[cfg["model_type"]]
    return cfg.get("num_key_value_heads", default) or nh


def head_dim_of(cfg):
    if cfg["model_type"] == "gpt2":
        return cfg["n_embd"] // cfg["n_head"]
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def tied(cfg):
    """tie_word_embeddings: PretrainedConfig's default (true) for GPT-2; LlamaConfig,
    MistralConfig and Qwen2Config default it to false."""
    return cfg.get("tie_word_embeddings", cfg["model_type"] == "gpt2")


def biases(cfg):
    """(q/k/v, o, MLP) biases: Llama per attention_bias / mlp_bias; Mistral none; Qwen2 q, k, v."""
    kind = cfg["model_type"]
    if kind == "qwen2":
        return True, False, False
    if kind == "mistral":
        return False, False, False
    ab = bool(cfg.get("attention_bias", False))
    return ab, ab, bool(cfg.get("mlp_bias", False))


def checkpoint_shapes(cfg):
    """name -> shape of the tensors a Hugging Face checkpoint of this config holds."""
    kind, t = cfg["model_type"], {}
    H = hidden_of(cfg)
    V = cfg["vocab_size"]
    if kind == "gpt2":
        F = cfg.get("n_inner") or 4 * H
        t["transformer.wte.weight"] = (V, H)
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
    elif kind in LLAMA_FAMILY:
        F, nh, nkv, dh = cfg["intermediate_size"], cfg["num_attention_heads"], kv_heads_of(cfg), head_dim_of(cfg)
        qkv_b, o_b, mlp_b = biases(cfg)
        t["model.embed_tokens.weight"] = (V, H)
        for i in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % i
            t[p + "input_layernorm.weight"] = t[p + "post_attention_layernorm.weight"] = (H,)
            for n, rows in (("q", nh * dh), ("k", nkv * dh), ("v", nkv * dh)):
                t[p + "self_attn.%s_proj.weight" % n] = (rows, H)
                if qkv_b:
                    t[p + "self_attn.%s_proj.bias" % n] = (rows,)
            t[p + "self_attn.o_proj.weight"] = (H, nh * dh)
            if o_b:
                t[p + "self_attn.o_proj.bias"] = (H,)
            for n, shp in (("gate", (F, H)), ("up", (F, H)), ("down", (H, F))):
                t[p + "mlp.%s_proj.weight" % n] = shp
                if mlp_b:
                    t[p + "mlp.%s_proj.bias" % n] = (shp[0],)
        t["model.norm.weight"] = (H,)
    else:
        raise ValueError("model_type %r: not a decoder this reference knows (gpt2, llama, mistral, qwen2)" % kind)
    if not tied(cfg):
        t["lm_head.weight"] = (V, H)
    return t


def random_weights(cfg, seed=0):
    rng = np.random.default_rng(seed)
    w = {}
    for name, shp in checkpoint_shapes(cfg).items():
        if len(shp) == 1:
            gain = name.endswith(".weight")  # every 1-D weight is a norm's gain here
            w[name] = (1.0 + rng.uniform(-0.2, 0.2, size=shp)) if gain else rng.normal(0, 0.1, size=shp)
        elif name.endswith(("wte.weight", "wpe.weight", "embed_tokens.weight", "lm_head.weight")):
            w[name] = rng.normal(0, 0.15, size=shp)
        else:  # GPT-2's Conv1D is [in, out], nn.Linear [out, in]
            fan_in = shp[0] if cfg["model_type"] == "gpt2" else shp[1]
            w[name] = rng.normal(0, 2.0 / math.sqrt(fan_in), size=shp)
    return {k: v.astype(np.float32) for k, v in w.items()}


def act(name, x):
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    if name in ("silu", "swish"):
        return x / (1 + np.exp(-x))
    if name == "relu":
        return np.maximum(x, 0)
    if name == "quick_gelu":
        return x / (1 + np.exp(-1.702 * x))
    raise ValueError("activation %r" % name)


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def rope_params(cfg):
    """The rope scaling dict (rope_scaling, or rope_parameters in newer configs) and theta."""
    rs = cfg.get("rope_scaling")
    rp = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    if not isinstance(rs, dict):
        rs = rp
    theta = cfg.get("rope_theta", rp.get("rope_theta", 10000.0))
    return (rs or {}), theta


def inv_freq(cfg, seq_len):
    """Rotary frequencies of the Llama family for a sequence of seq_len tokens, from the
    definitions of transformers' rope types (modeling_rope_utils): default 1/theta^(2j/dh);
    linear: / factor; llama3: wavelengths above original_max / low_freq_factor divided by
    factor, below original_max / high_freq_factor kept, between interpolated; dynamic (NTK):
    theta * (factor * L / original_max - (factor - 1))^(dh / (dh - 2)) once L passes the original
    positions."""
    rs, theta = rope_params(cfg)
    dh = head_dim_of(cfg)
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "dynamic":
        orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
        if seq_len > orig:
            f = rs["factor"]
            theta = theta * ((f * seq_len / orig) - (f - 1)) ** (dh / (dh - 2))
    inv = 1.0 / theta ** (np.arange(0, dh, 2, dtype=np.float64) / dh)
    if kind in ("default", "dynamic"):
        return inv
    if kind == "linear":
        return inv / rs["factor"]
    if kind == "llama3":
        f, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        orig = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        out = np.where(wavelen > orig / lo, inv / f, inv)
        smooth = (orig / wavelen - lo) / (hi - lo)
        mid = (wavelen >= orig / hi) & (wavelen <= orig / lo)
        return np.where(mid, (1 - smooth) * inv / f + smooth * inv, out)
    raise ValueError("rope type %r" % kind)


def window_of(cfg, i):
    """Layer i's sliding window (query i sees keys j with i - w < j <= i) or None: Mistral's
    sliding_window on every layer; Qwen2's with use_sliding_window on layers >= max_window_layers;
    a layer_types list, where the config has one, names the sliding_attention layers."""
    kind, win = cfg["model_type"], cfg.get("sliding_window")
    if kind == "llama" or win is None or (kind == "qwen2" and not cfg.get("use_sliding_window", False)):
        return None
    types = cfg.get("layer_types")
    if isinstance(types, list) and i < len(types):
        return win if types[i] == "sliding_attention" else None
    if kind == "qwen2" and i < cfg.get("max_window_layers", 28):
        return None
    return win


def attend(q, k, v, scale, window):
    """q [h, T, dh], k and v [h, T, dh] of one sequence: causal (and windowed) softmax
    attention -> [T, h*dh]."""
    T = q.shape[1]
    s = q @ k.transpose(0, 2, 1) * scale
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    keep = j <= i
    if window is not None:
        keep &= i - j < window
    s = np.where(keep, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(1, 0, 2).reshape(T, -1)


def logits_llama(cfg, w, ids):
    nh, nkv, dh = cfg["num_attention_heads"], kv_heads_of(cfg), head_dim_of(cfg)
    eps = cfg.get("rms_norm_eps", 1e-6)
    hidden_act = cfg.get("hidden_act", "silu")
    T = len(ids)

    def lin(x, p):
        y = x @ w[p + ".weight"].T
        return y + w[p + ".bias"] if p + ".bias" in w else y

    ang = np.outer(np.arange(T, dtype=np.float64), inv_freq(cfg, T))
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rotary(t):  # [h, T, dh], rotate_half form
        rot = np.concatenate([-t[..., dh // 2:], t[..., :dh // 2]], -1)
        return t * cos + rot * sin

    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj").reshape(T, nh, dh).transpose(1, 0, 2)
        k = lin(h, p + "self_attn.k_proj").reshape(T, nkv, dh).transpose(1, 0, 2)
        v = lin(h, p + "self_attn.v_proj").reshape(T, nkv, dh).transpose(1, 0, 2)
        q, k = rotary(q), rotary(k)
        k, v = np.repeat(k, nh // nkv, 0), np.repeat(v, nh // nkv, 0)  # repeat_kv
        x = x + lin(attend(q, k, v, dh ** -0.5, window_of(cfg, i)), p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + lin(act(hidden_act, lin(h, p + "mlp.gate_proj")) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    # a tied model's head is the table, unless the checkpoint has a head of its own (an 8-bit
    # checkpoint from `hkc quantize` keeps the float table and adds the head's quantized copy)
    head = w["model.embed_tokens.weight"] if tied(cfg) and "lm_head.weight" not in w else w["lm_head.weight"]
    return x @ head.T


def logits_gpt2(cfg, w, ids):
    nh, dh, T = cfg["n_head"], head_dim_of(cfg), len(ids)
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    if T > cfg["n_positions"]:
        raise ValueError("%d tokens: GPT-2 has %d positions" % (T, cfg["n_positions"]))

    def conv(x, p):  # Conv1D: x @ W[in, out] + b
        return x @ w[p + ".weight"] + w[p + ".bias"]

    x = w["transformer.wte.weight"][np.asarray(ids)] + w["transformer.wpe.weight"][:T]
    for i in range(cfg["n_layer"]):
        p = "transformer.h.%d." % i
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        q, k, v = (t.reshape(T, nh, dh).transpose(1, 0, 2) for t in np.split(conv(h, p + "attn.c_attn"), 3, -1))
        scale = dh ** -0.5 if cfg.get("scale_attn_weights", True) else 1.0
        if cfg.get("scale_attn_by_inverse_layer_idx"):
            scale /= i + 1
        x = x + conv(attend(q, k, v, scale, None), p + "attn.c_proj")
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        x = x + conv(act(cfg.get("activation_function", "gelu_new"), conv(h, p + "mlp.c_fc")), p + "mlp.c_proj")
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ (w["transformer.wte.weight"] if tied(cfg) else w["lm_head.weight"]).T


def logits(cfg, w, ids):
    """The logits [len(ids), vocab] of every position of one sequence, recomputed from scratch."""
    return (logits_gpt2 if cfg["model_type"] == "gpt2" else logits_llama)(cfg, w, ids)


def margin(row):
    """Top-1 minus top-2 logit of a row."""
    top = np.partition(row, -2)[-2:]
    return float(top[1] - top[0])


def greedy(config, weights, prompt_ids, n_new, stop=None, margins=None):
    """The n_new ids greedy decoding appends to prompt_ids (fewer when stop is produced: it is
    kept). config: a config.json path or dict; weights: a safetensors path or {name: array}.
    margins, a list, receives each step's top-1 minus top-2 logit."""
    cfg = load_config(config)
    w = read_safetensors(weights) if isinstance(weights, str) else {k: np.asarray(v, np.float64)
                                                                       for k, v in weights.items()}
    seq, out = [int(t) for t in prompt_ids], []
    vocab = cfg["vocab_size"]
    if not seq or min(seq) < 0 or max(seq) >= vocab:
        raise ValueError("prompt ids must be 1 or more ids in 0 .. %d" % (vocab - 1))
    for _ in range(n_new):
        row = logits(cfg, w, seq)[-1]
        t = int(np.argmax(row))
        if margins is not None:
            margins.append(margin(row))
        out.append(t)
        seq.append(t)
        if stop is not None and t == stop:
            break
    return out


def load_config(config):
    if isinstance(config, dict):
        return config
    with open(config) as f:
        return json.load(f)


# ---- emulate: a generation spec under docs/GENERATE.md's semantics ---------------------------

REF_KEYS = ("in", "bias", "residual", "mul", "gamma", "beta")  # renamed in a repeat's copies


def expand_repeats(spec):
    """docs/SPEC.md "Repeated layers": copies of the body with layer-local names renamed."""
    graph, params = [], dict(spec.get("params") or {})
    for entry in spec["graph"]:
        if "repeat" not in entry:
            graph.append(entry)
            continue
        r = entry["repeat"]
        count = r["count"] if isinstance(r["count"], int) else spec["dims"][r["count"]]
        var = "{%s}" % r.get("var", "i")
        local = {n["name"] for n in r["body"]} | {n["out"] for n in r["body"]} | set(r.get("params") or {})

        def sub(v, k):
            if isinstance(v, str):
                return v.replace(var, str(k))
            if isinstance(v, list):
                return [sub(x, k) for x in v]
            if isinstance(v, dict):
                return {a: sub(b, k) for a, b in v.items()}
            return v

        def name(n, k):
            if n == r["out"]:
                return n if k == count - 1 else "%s_%d" % (n, k)
            return n.replace(var, str(k)) if var in n else "%s_%d" % (n, k)

        def ref(n, k):
            if n == r["in"]:
                return r["in"] if k == 0 else name(r["out"], k - 1)
            return name(n, k) if n in local else n.replace(var, str(k))

        for k in range(count):
            for pn, shp in (r.get("params") or {}).items():
                params[name(pn, k)] = sub(shp, k)
            for node in r["body"]:
                c = sub(dict(node), k)
                c["name"], c["out"] = name(node["name"], k), name(node["out"], k)
                for key in REF_KEYS:
                    if key in node:
                        v = node[key]
                        c[key] = [ref(x, k) for x in v] if isinstance(v, list) else ref(v, k)
                graph.append(c)
    spec = dict(spec, graph=graph, params=params)
    return spec


def dim_value(expr, dims):
    if isinstance(expr, int):
        return expr
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/() ]+", expr):
        raise ValueError("bad dim expression %r" % expr)
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(dims)))


def read_map(path):
    pairs = {}
    with open(path) as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith("#"):
                a, b = line.split()
                pairs[a] = b
    return pairs


def round_fp8(x):
    """x rounded to float8 e4m3fn as an FP8 KV cache stores it: the 3-bit mantissa of its binade
    (2^-9 steps below 2^-6), to nearest even, saturating at +-448."""
    a = np.abs(np.asarray(x, np.float64))
    e = np.floor(np.log2(np.maximum(a, 2.0 ** -10)))
    step = 2.0 ** (np.maximum(e, -6) - 3)
    return np.sign(x) * np.minimum(np.rint(a / step) * step, 448.0)


class Emulator:
    """A generation spec's graph in float64 with its state caches, driven like libhkrt's
    generator: per step the token rows of the sequences (ids, ctx, slot), rows [slots], padded
    to the step's bucket with zero rows (ctx 0)."""

    def __init__(self, spec_path, map_path, weights_path):
        import yaml
        with open(spec_path) as f:
            spec = expand_repeats(yaml.safe_load(f))
        self.dims = dict(spec.get("dims") or {})
        self.buckets = sorted(spec["batch_sizes"])
        self.graph = spec["graph"]
        self.outputs = spec["outputs"]
        ck, names = read_safetensors(weights_path), read_map(map_path)
        self.t = {}
        for n, decl in spec["params"].items():
            shape = decl["shape"] if isinstance(decl, dict) else decl
            shape = tuple(dim_value(d, self.dims) for d in shape)
            if isinstance(decl, dict) and decl.get("parts"):
                a = np.concatenate([ck[p] for p in decl["parts"]], 0)
            else:
                a = ck[names.get(n, n)]
            if a.shape != shape:
                raise ValueError("param %s: checkpoint shape %s, spec %s" % (n, a.shape, shape))
            self.t[n] = a
        self.state, self.fp8_state = {}, set()
        for n, decl in spec["state"].items():  # [shape] or {shape, dtype}: fp8_e4m3 caches round what they store
            shape = decl["shape"] if isinstance(decl, dict) else decl
            self.state[n] = np.zeros(tuple(dim_value(d, self.dims) for d in shape))
            if isinstance(decl, dict) and decl.get("dtype") == "fp8_e4m3":
                self.fp8_state.add(n)
        self.slots = dim_value("slots", self.dims)
        self.max_seq = dim_value("max_seq", self.dims)
        self.lengths = [0] * self.slots

    def count(self, node, key, default=None):
        v = node.get(key, default)
        return v if v is None else dim_value(v, self.dims)

    def run(self, ids, ctx, slot, rows):
        t = dict(self.t, **self.state)
        t.update(ids=np.asarray(ids), ctx=np.asarray(ctx), slot=np.asarray(slot), rows=np.asarray(rows),
                 sampling=np.zeros((self.slots, 4), np.int32))  # greedy: temperature 0
        for node in self.graph:
            t[node["out"]] = self.op(node, t)
        return [t[o] for o in self.outputs]

    def op(self, nd, t):
        op, x = nd["op"], t[nd["in"][0]]
        if op == "embedding":
            table = t[nd["in"][1]]
            y = table[np.clip(x, 0, len(table) - 1)]
            if "pos" in nd:
                pos = t[nd["pos"]]
                y = y + pos[np.clip(t[nd["ctx"]] - 1, 0, len(pos) - 1)]
            return y
        if op == "rmsnorm":
            return rms_norm(x, t[nd["gamma"]], float(nd.get("eps", 1e-5)))
        if op == "layernorm":
            return layer_norm(x, t[nd["gamma"]], t[nd["beta"]], float(nd.get("eps", 1e-5)))
        if op == "mul":
            return x * t[nd["in"][1]]
        if op == "add":
            return x + t[nd["in"][1]]
        if op == "gemm":
            b = t[nd["in"][1]]
            y = x @ (b.T if nd.get("trans_b") else b)
            if "bias" in nd:
                y = y + t[nd["bias"]]
            if nd.get("act") not in (None, "none"):
                y = act({"gelu_tanh": "gelu_new"}.get(nd["act"], nd["act"]), y)
            if "mul" in nd:
                y = y * t[nd["mul"]]
            if "residual" in nd:
                y = y + t[nd["residual"]]
            return y
        if op == "rope":
            return self.rope(nd, x, t)
        if op == "kv_append":
            return self.kv_append(nd, x, t)
        if op == "kv_attention":
            return self.kv_attention(nd, x, t)
        if op == "take_rows":
            r = t[nd["in"][1]]
            ok = (r >= 0) & (r < len(x))
            return np.where(ok[:, None], x[np.where(ok, r, 0)], 0.0)
        if op == "argmax":
            return np.argmax(x, -1)
        if op == "sample":  # greedy only (temperature <= 0 or top_k 1): the argmax
            p = t[nd["in"][1]]
            temp = p[:, 2].astype(np.int32).view(np.float32)
            if not np.all((temp <= 0) | (p[:, 1] == 1)):
                raise ValueError("emulate: sample with temperature > 0 is not emulated")
            return np.argmax(x, -1)
        raise ValueError("emulate: op %r is not emulated" % op)

    def heads(self, nd, width):
        h = self.count(nd, "heads")
        kv = self.count(nd, "kv_heads", nd["heads"])
        return h, kv, width // (h + 2 * kv)

    def rope(self, nd, x, t):
        h, kv, dh = self.heads(nd, x.shape[-1])
        theta = float(nd.get("theta", 10000.0))
        inv = 1.0 / theta ** (np.arange(0, dh, 2, dtype=np.float64) / dh)
        sc = nd.get("scaling")
        if sc == "linear":
            inv = inv / float(nd["factor"])
        elif sc == "llama3":  # docs/GENERATE.md: as Hugging Face's rope_scaling
            cfg = {"model_type": "llama", "head_dim": dh, "rope_theta": theta,
                   "rope_scaling": {"rope_type": "llama3", "factor": float(nd["factor"]),
                                    "low_freq_factor": float(nd["low_freq_factor"]),
                                    "high_freq_factor": float(nd["high_freq_factor"]),
                                    "original_max_position_embeddings": int(nd["original_max"])}}
            inv = inv_freq(cfg, 0)
        elif sc is not None:
            raise ValueError("emulate: rope scaling %r" % sc)
        pos = np.maximum(t[nd["ctx"]] - 1, 0).astype(np.float64)
        ang = np.outer(pos, inv)
        cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
        y = x.copy()
        for hh in range(h + kv if nd.get("packed") else h):
            s = x[:, hh * dh:(hh + 1) * dh]
            rot = np.concatenate([-s[:, dh // 2:], s[:, :dh // 2]], -1)
            y[:, hh * dh:(hh + 1) * dh] = s * cos + rot * sin
        return y

    def valid(self, ctx, slot):
        return (ctx >= 1) & (ctx <= self.max_seq) & (slot >= 0) & (slot < self.slots)

    def kv_append(self, nd, x, t):
        h, kv, dh = self.heads(nd, x.shape[-1])
        layer = int(nd.get("layer", 0))
        kc, vc = self.state[nd["k_cache"]], self.state[nd["v_cache"]]
        fp8 = nd["k_cache"] in self.fp8_state
        ctx, slot = t[nd["ctx"]], t[nd["slot"]]
        for r in range(len(x)):
            if self.valid(ctx[r], slot[r]):
                k, v = x[r, h * dh:(h + kv) * dh], x[r, (h + kv) * dh:]
                kc[layer, slot[r], ctx[r] - 1] = round_fp8(k) if fp8 else k
                vc[layer, slot[r], ctx[r] - 1] = round_fp8(v) if fp8 else v
        return x[:, :h * dh].copy()

    def kv_attention(self, nd, q, t):
        h = self.count(nd, "heads")
        kv = self.count(nd, "kv_heads", nd["heads"])
        dh = q.shape[-1] // h
        layer, win = int(nd.get("layer", 0)), nd.get("window")
        scale = float(nd["scale"]) if "scale" in nd else dh ** -0.5
        kc, vc = self.state[nd["k_cache"]], self.state[nd["v_cache"]]
        ctx, slot = t[nd["ctx"]], t[nd["slot"]]
        out = np.zeros_like(q)
        for r in range(len(q)):
            if not self.valid(ctx[r], slot[r]):
                continue
            lo = max(0, ctx[r] - int(win)) if win is not None else 0
            k = kc[layer, slot[r], lo:ctx[r]].reshape(-1, kv, dh)
            v = vc[layer, slot[r], lo:ctx[r]].reshape(-1, kv, dh)
            for hh in range(h):
                g = hh // (h // kv)
                s = k[:, g] @ q[r, hh * dh:(hh + 1) * dh] * scale
                p = np.exp(s - s.max())
                out[r, hh * dh:(hh + 1) * dh] = (p / p.sum()) @ v[:, g]
        return out

    def append(self, seqs, margins=None):
        """Appends seqs {slot: [ids]} (a prefill or a decode step) in steps of at most the
        largest bucket; returns {slot: next id after its last token}."""
        rows_all = [(s, i, tok) for s, toks in seqs.items() for i, tok in enumerate(toks)]
        for s, toks in seqs.items():
            if self.lengths[s] + len(toks) > self.max_seq:
                raise ValueError("slot %d: %d + %d tokens pass max_seq %d" % (s, self.lengths[s], len(toks),
                                                                               self.max_seq))
        nxt, big = {}, self.buckets[-1]
        self.steps = 0
        for at in range(0, len(rows_all), big):
            self.steps += 1
            chunk = rows_all[at:at + big]
            n = next(b for b in self.buckets if b >= len(chunk))
            ids, ctx, slot = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
            rows = np.full(self.slots, -1, np.int64)
            for r, (s, i, tok) in enumerate(chunk):
                ids[r], ctx[r], slot[r] = tok, self.lengths[s] + i + 1, s
                if i == len(seqs[s]) - 1:
                    rows[s] = r
            outs = self.run(ids, ctx, slot, rows)
            for s in range(self.slots):
                if rows[s] >= 0:
                    nxt[s] = int(outs[0][s])
                    if margins is not None and len(outs) > 1:
                        margins.append(margin(outs[1][s]))
        for s, toks in seqs.items():
            self.lengths[s] += len(toks)
        return nxt

    def generate(self, prompts, n_new, stop=None, margins=None):
        """Greedy: prompts in slots 0.., prefilled together, then decoded together."""
        outs = [[] for _ in prompts]
        live = {s: list(p) for s, p in enumerate(prompts)}
        for k in range(n_new):
            if not live:
                break
            nxt = self.append(live, margins)
            if k == 0:
                self.prefill_steps = self.steps
            live = {}
            for s, tok in nxt.items():
                outs[s].append(tok)
                if not (stop is not None and tok == stop) and len(outs[s]) < n_new:
                    live[s] = [tok]
        return outs


# ---- command line ----------------------------------------------------------------------------


def main(argv):
    import argparse
    p = argparse.ArgumentParser(prog="gen_reference.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    w = sub.add_parser("weights", help="random weights for a config, as safetensors")
    w.add_argument("config")
    w.add_argument("out")
    w.add_argument("--seed", type=int, default=0)
    for name, first in (("greedy", "config"), ("emulate", "spec")):
        g = sub.add_parser(name)
        g.add_argument(first)
        if name == "emulate":
            g.add_argument("map")
        g.add_argument("weights")
        g.add_argument("--ids", action="append", required=True, help="a 1-D integer .npy prompt (repeatable)")
        g.add_argument("-n", type=int, required=True, help="new tokens per prompt")
        g.add_argument("--stop", type=int, help="end a sequence after this id")
        g.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if not a.cmd:
        p.print_usage(sys.stderr)
        return 2
    try:
        if a.cmd == "weights":
            cfg = load_config(a.config)
            tensors = random_weights(cfg, a.seed)
            write_safetensors(a.out, tensors)
            print("wrote %s: %d tensors, %d values (%s, seed %d)"
                  % (a.out, len(tensors), sum(v.size for v in tensors.values()), cfg["model_type"], a.seed))
            return 0
        prompts = [np.load(f).astype(np.int64).reshape(-1).tolist() for f in a.ids]
        margins, steps, extra = [], [], {}
        if a.cmd == "greedy":
            cfg, wts = load_config(a.config), read_safetensors(a.weights)
            outs = []
            for pr in prompts:
                mine = []
                outs.append(greedy(cfg, wts, pr, a.n, a.stop, mine))
                steps.append(mine)
                margins += mine
        else:
            emu = Emulator(a.spec, a.map, a.weights)
            outs = emu.generate(prompts, a.n, a.stop, margins)
            extra = {"prefill_steps": emu.prefill_steps}
    except (OSError, ValueError, KeyError) as e:
        print("gen_reference.py %s: %s" % (a.cmd, e if not isinstance(e, KeyError) else "no tensor %s" % e),
              file=sys.stderr)
        return 1
    low = min(margins) if margins else float("nan")
    print("%s: smallest top-1/top-2 logit margin %.4g over %d steps" % (a.cmd, low, len(margins)), file=sys.stderr)
    if a.json:  # greedy: also each step's margin, per prompt
        if steps:
            extra["margins"] = steps
        print(json.dumps(dict({"outputs": outs, "min_margin": low}, **extra)))
    else:
        for pr, o in zip(prompts, outs):
            print("prompt of %d -> %s" % (len(pr), " ".join(map(str, o))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
