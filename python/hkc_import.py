#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hkc-import: model importers for hkc, run as `hkc import FORMAT ...` (installed next to hkc).

    hkc import hf config.json -o model.yaml [--weights-map-out model.map] [--layers N]
                  [--seq N] [--batch-sizes 1,8] [--dtype f32|f16|bf16] [--prefix P]
                  [--name NAME] [--targets LIST] [--embeddings] [--padding-mask] [-q]
    hkc import hf config.json --generate -o gen.yaml [--weights-map-out gen.map] [--max-seq N]
                  [--slots N] [--token-buckets LIST] [--layers N] [--dtype ...] [--prefix P]
                  [--name NAME] [--targets LIST] [-q]

`hf` reads a Hugging Face config.json of a BERT (model_type bert), GPT-2 (gpt2) or Llama-family
(llama, mistral, qwen2) model and writes
  - an hkc spec of the model's transformer layers (one `repeat:` over num_hidden_layers) and,
    for GPT-2 and Llama, the final norm; its input `x` is the hidden states after the
    embeddings (--embeddings: token ids, the embeddings as `embedding` ops; --padding-mask: an
    i32 input `lengths` on every attention), its output `z` (GPT-2, Llama) or `y` (BERT) the
    last hidden state;
  - the weights name map (docs/WEIGHTS.md) from the spec's param names to the checkpoint's
    safetensors names, for `hkc run --weights model.safetensors --weights-map model.map`.
Weights bind as the checkpoint stores them: nn.Linear's [out, in] through gemm `trans_b`,
GPT-2's Conv1D [in, out] as it is (its fused c_attn feeds attention's packed q|k|v input).
BERT's query, key and value (weights and biases) are the `parts:` of one [3*hidden, hidden]
weight and [3*hidden] bias (docs/SPEC.md): one q|k|v GEMM writes attention's packed input, and
libhkrt concatenates the three checkpoint tensors when it binds them (the spec names the
parts; the map has no entry for them). Llama does the same with grouped-query sizes: q_proj,
k_proj and v_proj are the parts of one [(heads + 2*kv_heads)*head_dim, hidden] weight (and
bias, with attention_bias); one rope node (`packed: true`) rotates the q and k heads of the
packed q|k|v and passes v on, and attention reads the result packed, with kv_heads. Mistral
and Qwen2 are Llama's layer with fixed biases (Mistral none; Qwen2 on q, k and v, not on o
or the MLP) and a sliding window, which is full causal attention when it is at least --seq
(accepted then; refused otherwise: hkc's attention has no window).
What the spec leaves out (pooler, LM heads) is said in notes; what hkc cannot express -- rope
scaling, relative position embeddings, cross-attention -- is refused with an error naming it.

`hf --generate` (GPT-2 and the Llama family; docs/GENERATE.md) writes a generation spec instead:
the batch counts token rows (i32 inputs ids, ctx, slot [batch] and rows [slots]; the buckets are
--token-buckets), the KV caches are `state:` tensors [layers, slots, max_seq, kv width], each
layer's attention is a kv_append (its k and v into the caches) and a kv_attention over them (a
sliding window where the model has one), rope and GPT-2's position embeddings read ctx, and
after the layers take_rows picks each sequence's last token row, the final norm, the LM head
(the tied embedding table or lm_head.weight) gives `logits` [slots, vocab] and `next`, the id the
device picks from them (`sample`: greedy, or drawn with each slot's sampling settings).
Rope scaling llama3 and linear are written as the rope's `scaling:`; dynamic only where it is
the identity (--max-seq within the original positions).

Only the standard library is used. Exit status: 0 written, 1 unsupported or bad input, 2 usage.
"""
import argparse
import json
import os
import sys
import tempfile

PROG = "hkc import hf"
DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
# Hugging Face activation names -> hkc's gemm epilogue act.
ACTS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": None,
        "relu": "relu", "silu": "silu", "swish": "silu"}


class Unsupported(Exception):
    """A configuration hkc cannot express; the message names the piece."""


def num(x):
    """A float as YAML that every reader takes for a number (1.0e-12, not 1e-12)."""
    s = repr(float(x))
    if "e" in s and "." not in s.split("e")[0]:
        s = s.replace("e", ".0e")
    return s


def act_of(cfg, key, default):
    name = cfg.get(key, default)
    if ACTS.get(name) is None:
        raise Unsupported("%s '%s' has no hkc activation (supported: %s)"
                          % (key, name, ", ".join(k for k, v in ACTS.items() if v)))
    return ACTS[name]


def need(cfg, *keys):
    for k in keys:
        if k not in cfg:
            raise Unsupported("config.json has no '%s'" % k)
    return [cfg[k] for k in keys]


class Model:
    """What a builder returns: dims, the layer's params (spec name, shape, checkpoint name with
    {k}), its body nodes, and the nodes and params after the layers."""

    def __init__(self, kind, layers, prefix):
        self.kind, self.layers, self.prefix = kind, layers, prefix
        self.dims, self.layer_params, self.body, self.final_params, self.final = {}, [], [], [], []
        self.pre_params, self.pre, self.pre_inputs = [], [], []  # --embeddings: token ids -> x
        self.out = "y"
        self.input_note, self.rest_note, self.causal = "", "", False  # notes() puts them in words
        self.linear = set()  # layer params that are nn.Linear weights [out, in]: --quantize's
        self.quantize = None  # --quantize: int8 or fp8_e4m3
        self.quantize_head = False  # the LM head 8-bit too (generation specs)
        self.final_quant = {}  # final param -> (dtype, scale param or None): the 8-bit head's

    def notes(self, embeddings, padding):
        """What the spec does not cover or assumes, for stderr and the spec's header."""
        if embeddings:
            first = "input: token ids (i32 [batch, seq]%s); ids outside the vocabulary are clamped" % (
                " and token_type_ids" if self.kind == "bert" else "")
        else:
            first = "x is the embeddings' output (%s); --embeddings starts from token ids" % self.input_note
        if padding:
            mask = ("padding: input lengths (i32 [batch]) masks the keys at positions >= lengths[b] (right padding)%s"
                    % (", with the causal mask" if self.causal else ""))
        else:
            mask = ("no attention mask%s: every sequence is seq tokens long (no padding; --padding-mask adds one)"
                    % (" beyond the causal one" if self.causal else ""))
        return [first, mask, self.rest_note]

    def lp(self, name, shape, ckpt, linear=False):
        """A per-layer param; ckpt is its checkpoint name, or a list of the names of its parts;
        linear: an nn.Linear weight [out, in] (--quantize makes it 8-bit with per-row scales)."""
        ckpt = [self.prefix + c for c in ckpt] if isinstance(ckpt, list) else self.prefix + ckpt
        self.layer_params.append((name, shape, ckpt))
        if linear:
            self.linear.add(name)

    def layer_params_out(self):
        """The layer's params as the spec declares them: (name, shape, checkpoint, dtype, scale).
        Under --quantize each linear weight is 8-bit with an f32 scale per output row, `<name>_s`
        [out, 1], bound from `<checkpoint name>_scale` (compressed-tensors' weight_scale)."""
        out = []
        for n, s, ck in self.layer_params:
            if self.quantize and n in self.linear:
                out.append((n, s, ck, self.quantize, n + "_s"))
                sck = [c + "_scale" for c in ck] if isinstance(ck, list) else ck + "_scale"
                out.append((n + "_s", [s[0], "1"], sck, "f32", None))
            else:
                out.append((n, s, ck, None, None))
        return out

    def fp(self, name, shape, ckpt):
        self.final_params.append((name, shape, self.prefix + ckpt))

    def pp(self, name, shape, ckpt):
        self.pre_params.append((name, shape, self.prefix + ckpt))


def add_embeddings(m, cfg, kind):
    """--embeddings: the model's input embeddings as spec nodes (the embedding op) writing x,
    the layers' input; i32 inputs ids [batch, seq] (and BERT's token_type_ids)."""
    vocab = need(cfg, "vocab_size")[0]
    m.dims["vocab"] = vocab
    m.pre_inputs.append("ids")
    if kind == "bert":
        max_pos, types = need(cfg, "max_position_embeddings")[0], cfg.get("type_vocab_size", 2)
        m.dims.update(max_pos=max_pos, types=types)
        m.pp("word_emb", ["vocab", "hidden"], "embeddings.word_embeddings.weight")
        m.pp("pos_emb", ["max_pos", "hidden"], "embeddings.position_embeddings.weight")
        m.pp("type_emb", ["types", "hidden"], "embeddings.token_type_embeddings.weight")
        m.pp("emb_g", ["hidden"], "embeddings.LayerNorm.weight")
        m.pp("emb_b", ["hidden"], "embeddings.LayerNorm.bias")
        m.pre_inputs.append("token_type_ids")
        eps = cfg.get("layer_norm_eps", 1e-12)
        m.pre = [
            dict(name="tok_emb", op="embedding", **{"in": ["ids", "word_emb"]}, pos="pos_emb", out="e0"),
            dict(name="type_emb_lookup", op="embedding", **{"in": ["token_type_ids", "type_emb"]}, out="e1"),
            dict(name="emb_sum", op="add", **{"in": ["e0", "e1"]}, out="e2"),
            dict(name="emb_ln", op="layernorm", **{"in": ["e2"]}, gamma="emb_g", beta="emb_b", eps=num(eps), out="x"),
        ]
    elif kind == "gpt2":
        m.dims["max_pos"] = need(cfg, "n_positions")[0]
        m.pp("wte", ["vocab", "hidden"], "wte.weight")
        m.pp("wpe", ["max_pos", "hidden"], "wpe.weight")
        m.pre = [dict(name="emb", op="embedding", **{"in": ["ids", "wte"]}, pos="wpe", out="x")]
    else:
        m.pp("embed", ["vocab", "hidden"], "embed_tokens.weight")
        m.pre = [dict(name="emb", op="embedding", **{"in": ["ids", "embed"]}, out="x")]



def build_bert(cfg, layers, prefix, generate=False):
    hidden, heads, ffn = need(cfg, "hidden_size", "num_attention_heads", "intermediate_size")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise Unsupported("position_embedding_type '%s' (relative position scores in attention) is not expressible "
                          "in hkc's attention op" % cfg["position_embedding_type"])
    if cfg.get("is_decoder") or cfg.get("add_cross_attention"):
        raise Unsupported("BERT as a decoder (is_decoder / add_cross_attention) is not supported")
    eps = cfg.get("layer_norm_eps", 1e-12)
    act = act_of(cfg, "hidden_act", "gelu")
    m = Model("bert", layers, prefix)
    m.dims = {"seq": None, "hidden": hidden, "heads": heads, "ffn": ffn}
    L = "encoder.layer.{k}."
    # One q|k|v GEMM: the checkpoint keeps query, key and value apart, and `parts:` binds their
    # concatenation (rows q, then k, then v: nn.Linear's [out, in]) to one [3*hidden, hidden]
    # weight, whose output is attention's packed q|k|v input.
    qkv = [L + "attention.self.%s" % n for n in ("query", "key", "value")]
    m.lp("qkv_w", ["3*hidden", "hidden"], [c + ".weight" for c in qkv])
    m.lp("qkv_b", ["3*hidden"], [c + ".bias" for c in qkv])
    m.lp("o_w", ["hidden", "hidden"], L + "attention.output.dense.weight")
    m.lp("o_b", ["hidden"], L + "attention.output.dense.bias")
    m.lp("ln1_g", ["hidden"], L + "attention.output.LayerNorm.weight")
    m.lp("ln1_b", ["hidden"], L + "attention.output.LayerNorm.bias")
    m.lp("up_w", ["ffn", "hidden"], L + "intermediate.dense.weight")
    m.lp("up_b", ["ffn"], L + "intermediate.dense.bias")
    m.lp("down_w", ["hidden", "ffn"], L + "output.dense.weight")
    m.lp("down_b", ["hidden"], L + "output.dense.bias")
    m.lp("ln2_g", ["hidden"], L + "output.LayerNorm.weight")
    m.lp("ln2_b", ["hidden"], L + "output.LayerNorm.bias")
    m.body = [
        dict(name="qkv_proj", op="gemm", **{"in": ["x", "qkv_w"]}, trans_b=True, bias="qkv_b", out="qkv"),
        dict(name="attn", op="attention", **{"in": ["qkv"]}, heads="heads", out="ctx"),
        dict(name="o_proj", op="gemm", **{"in": ["ctx", "o_w"]}, trans_b=True, bias="o_b", residual="x", out="a"),
        dict(name="ln1", op="layernorm", **{"in": ["a"]}, gamma="ln1_g", beta="ln1_b", eps=num(eps), out="h1"),
        dict(name="up_proj", op="gemm", **{"in": ["h1", "up_w"]}, trans_b=True, bias="up_b", act=act, out="f"),
        dict(name="down_proj", op="gemm", **{"in": ["f", "down_w"]}, trans_b=True, bias="down_b", residual="h1",
             out="d"),
        dict(name="ln2", op="layernorm", **{"in": ["d"]}, gamma="ln2_g", beta="ln2_b", eps=num(eps), out="y"),
    ]
    m.out = "y"
    m.input_note = "word + position + token type embeddings, then their LayerNorm"
    m.rest_note = "the pooler is not included"
    return m


def build_gpt2(cfg, layers, prefix, generate=False):
    hidden, heads = need(cfg, "n_embd", "n_head")
    ffn = cfg.get("n_inner") or 4 * hidden
    if cfg.get("scale_attn_by_inverse_layer_idx"):
        raise Unsupported("scale_attn_by_inverse_layer_idx (a per-layer attention scale) is not supported")
    if cfg.get("add_cross_attention"):
        raise Unsupported("add_cross_attention (cross-attention layers) is not supported")
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = act_of(cfg, "activation_function", "gelu_new")
    m = Model("gpt2", layers, prefix)
    m.dims = {"seq": None, "hidden": hidden, "heads": heads, "ffn": ffn}
    L = "h.{k}."
    m.lp("ln1_g", ["hidden"], L + "ln_1.weight")
    m.lp("ln1_b", ["hidden"], L + "ln_1.bias")
    # Conv1D stores [in, out]: x @ W as it is. c_attn's columns are q | k | v, which is the
    # packed input of hkc's attention: no split needed.
    m.lp("qkv_w", ["hidden", "3*hidden"], L + "attn.c_attn.weight")
    m.lp("qkv_b", ["3*hidden"], L + "attn.c_attn.bias")
    m.lp("o_w", ["hidden", "hidden"], L + "attn.c_proj.weight")
    m.lp("o_b", ["hidden"], L + "attn.c_proj.bias")
    m.lp("ln2_g", ["hidden"], L + "ln_2.weight")
    m.lp("ln2_b", ["hidden"], L + "ln_2.bias")
    m.lp("up_w", ["hidden", "ffn"], L + "mlp.c_fc.weight")
    m.lp("up_b", ["ffn"], L + "mlp.c_fc.bias")
    m.lp("down_w", ["ffn", "hidden"], L + "mlp.c_proj.weight")
    m.lp("down_b", ["hidden"], L + "mlp.c_proj.bias")
    attn = dict(name="attn", op="attention", **{"in": ["qkv"]}, heads="heads", causal=True, out="ctx")
    if cfg.get("scale_attn_weights", True) is False:
        attn["scale"] = num(1.0)
    m.body = [
        dict(name="ln1", op="layernorm", **{"in": ["x"]}, gamma="ln1_g", beta="ln1_b", eps=num(eps), out="n1"),
        dict(name="qkv_proj", op="gemm", **{"in": ["n1", "qkv_w"]}, bias="qkv_b", out="qkv"),
        attn,
        dict(name="o_proj", op="gemm", **{"in": ["ctx", "o_w"]}, bias="o_b", residual="x", out="a"),
        dict(name="ln2", op="layernorm", **{"in": ["a"]}, gamma="ln2_g", beta="ln2_b", eps=num(eps), out="n2"),
        dict(name="up_proj", op="gemm", **{"in": ["n2", "up_w"]}, bias="up_b", act=act, out="f"),
        dict(name="down_proj", op="gemm", **{"in": ["f", "down_w"]}, bias="down_b", residual="a", out="y"),
    ]
    m.fp("lnf_g", ["hidden"], "ln_f.weight")
    m.fp("lnf_b", ["hidden"], "ln_f.bias")
    m.final = [dict(name="ln_f", op="layernorm", **{"in": ["y"]}, gamma="lnf_g", beta="lnf_b", eps=num(eps),
                    out="z")]
    m.out = "z"
    m.input_note, m.causal = "token + position embeddings, wte + wpe", True
    m.rest_note = "the LM head is not included"
    return m


# The Llama family: model_type -> (num_key_value_heads when config.json has no such key, as the
# transformers config class defaults it; biases of q|k|v, o and the MLP: None = the config's
# attention_bias / mlp_bias, as Llama reads them; Mistral and Qwen2 fix them in their modeling code)
LLAMA_FAMILY = {"llama": (None, None, None, None), "mistral": (8, False, False, False),
                "qwen2": (32, True, False, False)}


def sliding_window(cfg, kind, i):
    """The sliding window of layer i's attention (query i sees keys j with i - w < j <= i), or
    None (full causal). Mistral: `sliding_window` on every layer; Qwen2: only with
    `use_sliding_window`, on layers >= `max_window_layers`; an explicit `layer_types` list
    (newer configs) says which layers are "sliding_attention"."""
    w = cfg.get("sliding_window")
    if kind == "llama" or w is None or (kind == "qwen2" and not cfg.get("use_sliding_window", False)):
        return None
    types = cfg.get("layer_types")
    if isinstance(types, list) and i < len(types):
        return w if types[i] == "sliding_attention" else None
    if kind == "qwen2" and i < cfg.get("max_window_layers", 28):
        return None
    return w


def check_windows(cfg, kind, layers, seq):
    """Refuses a sliding window shorter than seq on an imported layer (hkc's attention has no
    window); a window >= seq masks nothing that the causal mask does not. Returns a note or ""."""
    wins = [(i, sliding_window(cfg, kind, i)) for i in range(layers)]
    short = [(i, w) for i, w in wins if w is not None and w < seq]
    if short:
        raise Unsupported("sliding_window %d is shorter than --seq %d (layer%s %s): hkc's attention has no "
                          "sliding window; import with --seq %d or less"
                          % (short[0][1], seq, "s" if len(short) > 1 else "", ", ".join(str(i) for i, _ in short),
                             min(w for _, w in short)))
    used = sorted({w for _, w in wins if w is not None})
    if not used:
        return ""
    return "sliding_window %s >= --seq %d: the same as full causal attention" % (", ".join(map(str, used)), seq)


def build_llama(cfg, layers, prefix, kind="llama", generate=False):
    hidden, heads, ffn = need(cfg, "hidden_size", "num_attention_heads", "intermediate_size")
    kv_default, qkv_fixed, o_fixed, mlp_fixed = LLAMA_FAMILY[kind]
    kv_heads = cfg.get("num_key_value_heads", kv_default) or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    if heads % kv_heads:
        raise Unsupported("num_key_value_heads %d does not divide num_attention_heads %d" % (kv_heads, heads))
    # rope: `rope_theta` + `rope_scaling` (transformers 4.x) or `rope_parameters` (newer configs:
    # {"rope_type": ..., "rope_theta": ...}); only the default (unscaled) type is computable here
    # (--generate writes llama3 and linear scaling on the rope: gen_rope_scaling)
    rp = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else None
    for key, rs in (("rope_scaling", cfg.get("rope_scaling")), ("rope_parameters", rp)):
        if not generate and rs and rs.get("rope_type", rs.get("type", "default")) != "default":
            raise Unsupported("%s %s is not supported (hkc's rope op computes the plain inv_freq = "
                              "1/theta^(2j/dh))" % (key, json.dumps(rs, sort_keys=True)))
    if head_dim % 2:
        raise Unsupported("head_dim %d is odd (rope rotates pairs j, j + head_dim/2)" % head_dim)
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", (rp or {}).get("rope_theta", 10000.0))
    act = act_of(cfg, "hidden_act", "silu")
    abias = bool(cfg.get("attention_bias"))
    qbias = abias if qkv_fixed is None else qkv_fixed
    obias = abias if o_fixed is None else o_fixed
    mbias = bool(cfg.get("mlp_bias")) if mlp_fixed is None else mlp_fixed
    m = Model(kind, layers, prefix)
    m.dims = {"seq": None, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "ffn": ffn}
    L = "layers.{k}."
    m.lp("attn_g", ["hidden"], L + "input_layernorm.weight")
    # One q|k|v GEMM: q_proj, k_proj and v_proj are the parts of one weight (rows q, then k, then
    # v: nn.Linear's [out, in]) whose output is q | k | v with grouped-query k and v; one rope
    # rotates its q and k heads (the same angles) and passes v on; attention reads it packed.
    qkv = [L + "self_attn.%s_proj" % n for n in "qkv"]
    width = "(heads+2*kv_heads)*head_dim"
    m.lp("qkv_w", [width, "hidden"], [c + ".weight" for c in qkv], linear=True)
    if qbias:
        m.lp("qkv_b", [width], [c + ".bias" for c in qkv])
    m.lp("o_w", ["hidden", "heads*head_dim"], L + "self_attn.o_proj.weight", linear=True)
    if obias:
        m.lp("o_b", ["hidden"], L + "self_attn.o_proj.bias")
    m.lp("ffn_g", ["hidden"], L + "post_attention_layernorm.weight")
    for n, shp in (("gate", ["ffn", "hidden"]), ("up", ["ffn", "hidden"]), ("down", ["hidden", "ffn"])):
        m.lp(n + "_w", shp, L + "mlp.%s_proj.weight" % n, linear=True)
        if mbias:
            m.lp(n + "_b", [shp[0]], L + "mlp.%s_proj.bias" % n)

    def lin(name, a, w, out, bias, **kw):
        node = dict(name=name, op="gemm", **{"in": [a, w + "_w"]}, trans_b=True)
        if bias:
            node["bias"] = w + "_b"
        node.update(kw)
        node["out"] = out
        return node

    m.body = [
        dict(name="attn_norm", op="rmsnorm", **{"in": ["x"]}, gamma="attn_g", eps=num(eps), out="n1"),
        lin("qkv_proj", "n1", "qkv", "qkv", qbias),
        dict(name="qk_rope", op="rope", **{"in": ["qkv"]}, heads="heads", kv_heads="kv_heads", packed=True,
             theta=num(theta), out="qkv_rot"),
        dict(name="attn", op="attention", **{"in": ["qkv_rot"]}, heads="heads", kv_heads="kv_heads", causal=True,
             out="ctx"),
        lin("o_proj", "ctx", "o", "a", obias, residual="x"),
        dict(name="ffn_norm", op="rmsnorm", **{"in": ["a"]}, gamma="ffn_g", eps=num(eps), out="n2"),
        lin("gate_proj", "n2", "gate", "gate", mbias, act=act),
        lin("up_proj", "n2", "up", "up", mbias),
        dict(name="swiglu", op="mul", **{"in": ["gate", "up"]}, out="gu"),
        lin("down_proj", "gu", "down", "y", mbias, residual="a"),
    ]
    m.fp("norm_g", ["hidden"], "norm.weight")
    m.final = [dict(name="final_norm", op="rmsnorm", **{"in": ["y"]}, gamma="norm_g", eps=num(eps), out="z")]
    m.out = "z"
    m.input_note, m.causal = "the token embeddings, embed_tokens", True
    m.rest_note = "the LM head is not included; positions start at 0 (no KV cache)"
    return m


# --generate (docs/GENERATE.md)
GEN_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]  # --token-buckets default: tokens per step
MAX_BUCKETS = 16  # a spec's batch_sizes (HK_MAX_BATCH_BUCKETS)
BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def checkpoint_quantization(cfg):
    """The 8-bit format a config's `quantization_config` declares, as --quantize takes it (int8 or
    fp8_e4m3), None without one; Unsupported, naming what, for the formats hkc cannot express.
    hkc reads compressed-tensors' weight-only view of per-channel 8-bit weights: every Linear's
    `weight` (I8 or F8_E4M3) with `weight_scale` [out, 1]; the activations stay in the spec's
    dtype whatever the config says of them."""
    qc = cfg.get("quantization_config")
    if not qc:
        return None
    if not isinstance(qc, dict):
        raise Unsupported("quantization_config is not an object")
    method = qc.get("quant_method")
    if method != "compressed-tensors":
        raise Unsupported("quantization_config quant_method %r is not supported (hkc reads compressed-tensors "
                          "checkpoints of 8-bit weights with a scale per output channel)" % method)
    groups = qc.get("config_groups") or {}
    if len(groups) != 1:
        raise Unsupported("quantization_config has %d config_groups (hkc reads one, for every Linear)" % len(groups))
    group = next(iter(groups.values()))
    w = group.get("weights") or {}
    kind = (w.get("num_bits"), w.get("type"), w.get("strategy"))
    dtype = {(8, "int", "channel"): "int8", (8, "float", "channel"): "fp8_e4m3"}.get(kind)
    if dtype is None or w.get("symmetric") is False or w.get("dynamic"):
        raise Unsupported("quantization_config weights %s are not supported (hkc reads 8-bit int or float weights, "
                          "symmetric, static, strategy channel: a scale per output channel)"
                          % json.dumps(w, sort_keys=True))
    targets = group.get("targets") or []
    if targets != ["Linear"]:
        raise Unsupported("quantization_config targets %s (hkc reads a group whose targets are [\"Linear\"])"
                          % json.dumps(targets))
    ignore = [i for i in (qc.get("ignore") or []) if i != "lm_head"]
    if ignore:
        raise Unsupported("quantization_config ignores %s (hkc reads checkpoints whose every layer Linear is "
                          "quantized; the LM head may be left out)" % json.dumps(ignore))
    return dtype


def head_quantized(cfg):
    """Whether a quantized checkpoint's LM head is 8-bit too (compressed-tensors quantizes every Linear
    its ignore list leaves, lm_head included); Unsupported for a tied head quantized (there is no
    lm_head.weight to bind)."""
    qc = cfg.get("quantization_config") or {}
    if "lm_head" in (qc.get("ignore") or []):
        return False
    if cfg.get("tie_word_embeddings", False):
        raise Unsupported("quantization_config quantizes the LM head, which is tied to the embeddings "
                          "(tie_word_embeddings): hkc reads an 8-bit lm_head.weight of its own")
    return True


def rope_scaling_of(cfg):
    """The config's rope scaling, (key, dict), from `rope_scaling` (transformers 4.x) or
    `rope_parameters` (newer configs), when its type is not "default"; else (None, None)."""
    for key in ("rope_scaling", "rope_parameters"):
        rs = cfg.get(key)
        if isinstance(rs, dict) and rs.get("rope_type", rs.get("type", "default")) != "default":
            return key, rs
    return None, None


def gen_rope_scaling(cfg, max_seq):
    """The rope node's scaling keys for the config's rope scaling, and a note ("" for none).
    llama3 and linear rewrite the frequencies as transformers does (the rope op's `scaling:`);
    dynamic (NTK) changes theta only for sequences longer than the original positions, so it is
    the plain rope when --max-seq is within them and refused otherwise; other types are refused."""
    key, rs = rope_scaling_of(cfg)
    if rs is None:
        return {}, ""
    kind = rs.get("rope_type", rs.get("type"))
    desc = "%s %s" % (key, json.dumps(rs, sort_keys=True))

    def val(k):
        v = rs.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise Unsupported("%s: rope type '%s' needs a positive '%s'" % (desc, kind, k))
        return v

    if kind == "llama3":
        lo, hi = val("low_freq_factor"), val("high_freq_factor")
        if hi <= lo:
            raise Unsupported("%s: high_freq_factor must be larger than low_freq_factor" % desc)
        keys = dict(scaling="llama3", factor=num(val("factor")), low_freq_factor=num(lo), high_freq_factor=num(hi),
                    original_max=str(int(val("original_max_position_embeddings"))))
        return keys, ("rope scaling llama3 (factor %s, low_freq_factor %s, high_freq_factor %s, original_max %s): "
                      "the rope's scaling" % (keys["factor"], keys["low_freq_factor"], keys["high_freq_factor"],
                                               keys["original_max"]))
    if kind == "linear":
        keys = dict(scaling="linear", factor=num(val("factor")))
        return keys, "rope scaling linear (factor %s): the rope's scaling" % keys["factor"]
    if kind == "dynamic":
        orig = rs.get("original_max_position_embeddings") or cfg.get("max_position_embeddings")
        if not isinstance(orig, int) or orig <= 0:
            raise Unsupported("%s: no original_max_position_embeddings or max_position_embeddings" % desc)
        if max_seq > orig:
            raise Unsupported("%s: dynamic scaling rescales theta for sequences longer than %d positions, which "
                              "--max-seq %d allows (hkc's rope has no dynamic scaling); import with --max-seq %d "
                              "or less" % (desc, orig, max_seq, orig))
        return {}, ("rope scaling dynamic is the identity up to %d positions (>= --max-seq %d): the plain rope"
                    % (orig, max_seq))
    raise Unsupported("%s: rope type '%s' is not supported (hkc's rope scales as llama3 or linear; dynamic only "
                      "when --max-seq is within the original positions)" % (desc, kind))


def gen_window(cfg, kind, layers, max_seq):
    """The kv_attention window of every layer (one value: the repeat's body is the same for all
    layers) or None, and a note. A window >= max_seq sees every key the cache holds: none."""
    wins = [sliding_window(cfg, kind, i) for i in range(layers)]
    short = sorted({w for w in wins if w is not None and w < max_seq})
    used = sorted({w for w in wins if w is not None})
    if not short:
        return None, ("sliding_window %s >= --max-seq %d: the same as full causal attention"
                      % (", ".join(map(str, used)), max_seq) if used else "")
    if len(short) == 1 and all(w == short[0] for w in wins):
        return short[0], "sliding_window %d on every layer: kv_attention's window" % short[0]
    eff = [w if w is not None and w < max_seq else None for w in wins]
    on = [i for i, w in enumerate(eff) if w is not None]
    off = [i for i, w in enumerate(eff) if w is None]
    same = next(i for i, w in enumerate(eff) if w != eff[0])  # the leading layers that agree
    raise Unsupported("sliding_window %s on layer%s %s but not on layer%s %s: the repeat's layers share one body, "
                      "so every layer must have the same window (or none shorter than --max-seq %d); import with "
                      "--max-seq %d or less, or --layers %d"
                      % ("/".join(map(str, short)), "s" if len(on) > 1 else "", ", ".join(map(str, on)),
                         "s" if len(off) > 1 else "", ", ".join(map(str, off)) or "-", max_seq, min(short), same))


def make_generate(m, cfg, kind, a, dtype):
    """Rewrites the layers' model (a builder's) into a generation model over token rows
    (docs/GENERATE.md): embeddings from ids (GPT-2's positions from ctx), each attention as
    kv_append + kv_attention on the state caches, rope at the rows' ctx positions, then
    take_rows, the final norm, the LM head and sample. Returns the notes."""
    vocab = need(cfg, "vocab_size")[0]
    d = m.dims
    del d["seq"]
    if kind == "gpt2":
        if d["hidden"] % d["heads"]:
            raise Unsupported("n_embd %d is not a multiple of n_head %d" % (d["hidden"], d["heads"]))
        d["head_dim"] = d["hidden"] // d["heads"]
        kv = "heads"
        kv_n = d["heads"]
        rope_keys, rope_note, window, win_note = {}, "", None, ""
    else:
        kv = "kv_heads"
        kv_n = d["kv_heads"]
        rope_keys, rope_note = gen_rope_scaling(cfg, a.max_seq)
        window, win_note = gen_window(cfg, kind, m.layers, a.max_seq)
    d.update(vocab=vocab, slots=a.slots, max_seq=a.max_seq)
    width = "%s*head_dim" % kv
    m.state = [(n, ["layers", "slots", "max_seq", width]) for n in ("k_cache", "v_cache")]
    if kind == "gpt2":
        d["max_pos"] = need(cfg, "n_positions")[0]
        m.pp("wte", ["vocab", "hidden"], "wte.weight")
        m.pp("wpe", ["max_pos", "hidden"], "wpe.weight")
        m.pre = [dict(name="emb", op="embedding", **{"in": ["ids", "wte"]}, pos="wpe", ctx="ctx", out="x")]
        table, table_ck = "wte", "wte.weight"
    else:
        m.pp("embed", ["vocab", "hidden"], "embed_tokens.weight")
        m.pre = [dict(name="emb", op="embedding", **{"in": ["ids", "embed"]}, out="x")]
        table, table_ck = "embed", "embed_tokens.weight"
    body = []
    for node in m.body:
        node = dict(node)
        node["in"] = ["ctx_out" if t == "ctx" else t for t in node["in"]]  # attention's output: ctx is an input now
        out = node.pop("out")
        if node["op"] == "rope":
            node["ctx"] = "ctx"
            node.update(rope_keys)
        if node["op"] == "attention":
            cache = dict(heads=node["heads"], kv_heads=node.get("kv_heads", node["heads"]), k_cache="k_cache",
                         v_cache="v_cache", layer='"{i}"', ctx="ctx", slot="slot")
            body.append(dict(name="kv_append", op="kv_append", **{"in": node["in"]}, **cache, out="q"))
            att, node = node, dict(name=node["name"], op="kv_attention", **{"in": ["q"]}, **cache)
            if "scale" in att:  # GPT-2's scale_attn_weights false
                node["scale"] = att["scale"]
            if window is not None:
                node["window"] = str(window)
            out = "ctx_out"
        node["out"] = out
        body.append(node)
    m.body = body
    # After the layers: the last token row of each slot (rows), then the final norm (row-wise:
    # on the slots' rows only), the LM head and the next id (greedy or sampled: the sampling input).
    norm = dict(m.final[0])
    norm["in"], norm["out"] = ["last"], "last_n"
    tied = cfg.get("tie_word_embeddings", kind == "gpt2")  # GPT2Config: True; the Llama family: False
    head = table
    if not tied or m.quantize_head:
        head = "lm_head_w"  # outside the model's prefix; 8-bit: tied too, `hkc quantize` writes it
        m.final_params.append((head, ["vocab", "hidden"], "lm_head.weight"))
        if m.quantize_head:
            m.final_quant[head] = (m.quantize, head + "_s")
            m.final_params.append((head + "_s", ["vocab", "1"], "lm_head.weight_scale"))
            m.final_quant[head + "_s"] = ("f32", None)
    m.final = [dict(name="take_last", op="take_rows", **{"in": ["y", "rows"]}, out="last"), norm,
               dict(name="lm_head", op="gemm", **{"in": ["last_n", head]}, trans_b=True, out="logits"),
               dict(name="next_id", op="sample", **{"in": ["logits", "sampling"]}, out="next")]
    m.out = "next, logits"
    dh = d["head_dim"]
    kv_dtype = a.kv_cache or dtype
    per_slot = m.layers * 2 * a.max_seq * kv_n * dh * (1 if a.kv_cache else BYTES[dtype])
    notes = ["token rows: i32 inputs ids, ctx and slot [batch] (each token of a step: its id, the cache positions "
             "it sees with itself -- 0 marks a padding row -- and its cache slot) and rows [slots] (the token row "
             "each slot's logits come from); batch_sizes are tokens per step (docs/GENERATE.md)",
             "KV caches: state k_cache and v_cache [layers, slots, max_seq, %s] = [%d, %d, %d, %d] (%.2f MiB per "
             "slot in %s)" % (width, m.layers, a.slots, a.max_seq, kv_n * dh, per_slot / 2.0 ** 20, kv_dtype),
             "LM head: %s" % ("lm_head.weight, %s with a scale per row%s" % (
                                  m.quantize, " (the tied table's quantized copy: `hkc quantize` writes it)"
                                  if tied else "") if m.quantize_head
                              else "the token embeddings %s (tie_word_embeddings)" % (m.prefix + table_ck) if tied
                              else "lm_head.weight (tie_word_embeddings false)")]
    notes += [n for n in (rope_note, win_note) if n]
    return notes


# Megatron-style splits: the gemms that read the layer's input split their output columns over the
# ranks, the ones that end a block (o, down) their K rows, summed by an all_reduce (docs/SPEC.md,
# "Tensor parallelism"). The LM head splits the vocabulary.
SHARDS = {"qkv_proj": "column", "gate_proj": "column", "up_proj": "column", "lm_head": "column",
          "o_proj": "row", "down_proj": "row"}


def mark_shards(m):
    for node in m.body + m.final:
        if node.get("op") == "gemm" and node.get("name") in SHARDS:
            out = node.pop("out")
            node["shard"] = SHARDS[node["name"]]
            node["out"] = out


def spec_tail(m, always_params=False):
    """A spec's lines from `params:` on: the params outside the layers (the section only when
    there are some, or always_params: a generation spec's), the graph -- pre, the repeat, final --
    the outputs and the fusion."""
    lines = []
    if always_params or m.pre_params or m.final_params:
        lines.append("params:")
        for n, s, _ in m.pre_params + m.final_params:
            if n in m.final_quant:  # an 8-bit LM head and its scales
                dtype, scale = m.final_quant[n]
                lines.append("  %s: {shape: [%s], dtype: %s%s}" % (n, ", ".join(s), dtype,
                                                                  ", scale: %s" % scale if scale else ""))
            else:
                lines.append("  %s: [%s]" % (n, ", ".join(s)))
    lines.append("graph:")
    lines += ["  - " + flow(n) for n in m.pre]
    lines += repeat_lines(m)
    lines += ["  - " + flow(n) for n in m.final]
    lines += ["outputs: [%s]" % m.out, "fusion: auto"]
    if getattr(m, "tensor_parallel", None):
        lines.append("parallel: {tensor: %d}" % m.tensor_parallel)
    return lines + [""]


def gen_spec_text(m, a, config_path, dtype, notes):
    lines = ["# Written by `hkc import hf %s --generate` from a Hugging Face %s config: %d layer(s)."
             % (os.path.basename(config_path), m.kind, m.layers)]
    lines += ["# Note: " + n for n in notes]
    lines += ["# Weights: bind the checkpoint with its name map (hkc generate PACK --weights F.safetensors "
              "--weights-map MAP --ids PROMPT.npy -n N).", "hkc: 1", "name: %s" % a.name, "dtype: %s" % dtype,
              "batch_sizes: [%s]" % ", ".join(str(b) for b in a.token_buckets)]
    dims = dict(m.dims, layers=m.layers)
    lines.append("dims: {" + ", ".join("%s: %d" % (k, v) for k, v in dims.items()) + "}")
    if a.targets:
        lines.append("targets: [%s]" % ", ".join(a.targets))
    lines += ["inputs:",
              "  ids: {shape: [batch], dtype: i32}    # token id of each row",
              "  ctx: {shape: [batch], dtype: i32}    # cache positions the row sees, its own included (0: padding)",
              "  slot: {shape: [batch], dtype: i32}   # cache slot (sequence) of each row",
              "  rows: {shape: [slots], dtype: i32}   # per slot: the row whose logits and next id it returns",
              "  sampling: {shape: [slots, 4], dtype: i32}  # per slot: seed, top_k, temperature, top_p (f32 bits)",
              "state:"]
    if a.kv_cache:  # each k and v element rounded to e4m3 as kv_append stores it
        lines += ["  %s: {shape: [%s], dtype: %s}" % (n, ", ".join(s), a.kv_cache) for n, s in m.state]
    else:
        lines += ["  %s: [%s]" % (n, ", ".join(s)) for n, s in m.state]
    return "\n".join(lines + spec_tail(m, always_params=True))


BUILDERS = {"bert": (build_bert, "bert."), "gpt2": (build_gpt2, "transformer."), "llama": (build_llama, "model."),
            "mistral": (lambda c, n, p, **kw: build_llama(c, n, p, "mistral", **kw), "model."),
            "qwen2": (lambda c, n, p, **kw: build_llama(c, n, p, "qwen2", **kw), "model.")}
LAYER_KEYS = {"bert": "num_hidden_layers", "gpt2": "n_layer", "llama": "num_hidden_layers",
              "mistral": "num_hidden_layers", "qwen2": "num_hidden_layers"}


def flow(node):
    """One node as a YAML flow map, keys in the order given."""
    parts = []
    for k, v in node.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, list):
            v = "[" + ", ".join(v) + "]"
        parts.append("%s: %s" % (k, v))
    return "{" + ", ".join(parts) + "}"


def spec_text(m, a, config_path, dtype):
    lines = [
             "# Written by `hkc import hf %s` from a Hugging Face %s config: %d layer(s)."
             % (os.path.basename(config_path), m.kind, m.layers)]
    lines += ["# Note: " + n for n in m.notes(a.embeddings, a.padding_mask)]
    lines += ["# Weights: bind the checkpoint with its name map (hkc run --weights F.safetensors "
              "--weights-map MAP).", "hkc: 1", "name: %s" % a.name, "dtype: %s" % dtype,
              "batch_sizes: [%s]" % ", ".join(str(b) for b in a.batch_sizes)]
    dims = dict(m.dims, seq=a.seq, layers=m.layers)
    lines.append("dims: {" + ", ".join("%s: %d" % (k, v) for k, v in dims.items()) + "}")
    if a.targets:
        lines.append("targets: [%s]" % ", ".join(a.targets))
    lines.append("inputs:")
    if m.pre_inputs:
        lines += ["  %s: {shape: [batch, seq], dtype: i32}" % n for n in m.pre_inputs]
    else:
        lines.append("  x: [batch, seq, hidden]")
    if a.padding_mask:
        lines.append("  lengths: {shape: [batch], dtype: i32}")
    return "\n".join(lines + spec_tail(m))


def repeat_lines(m):
    """The graph's `repeat:` entry: the layer's params (checkpoint parts with {i}) and body."""
    lines = ["  - repeat:", "      count: layers", "      in: x", "      out: y", "      params:"]
    for n, s, ck, dtype, scale in m.layer_params_out():
        keys = ["shape: [%s]" % ", ".join(s)]
        if dtype:
            keys.append("dtype: %s" % dtype)
        if scale:
            keys.append("scale: %s" % scale)
        if isinstance(ck, list):  # parts: the layer number is the repeat's {i}
            keys.append("parts: [%s]" % ", ".join('"%s"' % c.format(k="{i}") for c in ck))
        if len(keys) > 1:
            lines.append("        %s: {%s}" % (n, ", ".join(keys)))
        else:
            lines.append("        %s: [%s]" % (n, ", ".join(s)))
    lines.append("      body:")
    lines += ["        - " + flow(n) for n in m.body]
    return lines


def map_text(m, a):
    lines = ["# hkc weights name map (docs/WEIGHTS.md): spec param, checkpoint tensor.",
             "# Written by `hkc import hf` for %s (%d layers)." % (a.name, m.layers)]
    params = m.layer_params_out()
    width = max(len(p[0]) for p in params) + 1 + len(str(m.layers - 1))
    for k in range(m.layers):
        for n, _, ck, _, _ in params:
            if isinstance(ck, list):  # bound from its parts, named in the spec: no entry
                continue
            lines.append("%-*s %s" % (width, "%s_%d" % (n, k), ck.format(k=k)))
    for n, _, ck in m.pre_params + m.final_params:
        lines.append("%-*s %s" % (width, n, ck))
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    """Writes text to path through a temporary file in the same folder and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".hkc-import-", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError("expected a positive integer, got %s" % text)
    return v


def batch_list(text):
    try:
        sizes = [int(b) for b in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected a comma-separated list like 1,8, got %s" % text)
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("batch sizes must be positive, got %s" % text)
    return sizes


def import_hf(argv):
    p = argparse.ArgumentParser(prog=PROG, description="A spec of a Hugging Face model's transformer layers and "
                                "the weights name map of its safetensors checkpoint (BERT, GPT-2, Llama, Mistral, Qwen2).")
    p.add_argument("config", help="the model's config.json")
    p.add_argument("-o", "--output", required=True, help="the spec to write (YAML)")
    p.add_argument("--weights-map-out", help="the name map to write (default: the output with .map for .yaml)")
    p.add_argument("--layers", type=positive, help="build only the first N layers (default: all)")
    p.add_argument("--seq", type=positive, help="sequence length (default 128)")
    p.add_argument("--batch-sizes", type=batch_list, help="batch sizes, e.g. 1,8 (default 1)")
    p.add_argument("--dtype", choices=("f32", "f16", "bf16"), help="default: the config's torch_dtype, else f32")
    p.add_argument("--prefix", help="checkpoint name prefix (default: bert. / transformer. / model.; '' for none)")
    p.add_argument("--name", help="the spec's name (default: the model type)")
    p.add_argument("--targets", help="comma-separated targets for the spec (default: none written: host)")
    p.add_argument("--embeddings", action="store_true",
                   help="start from token ids: the input embeddings as embedding ops (BERT: word + position + "
                        "token type, then LayerNorm; GPT-2: wte + wpe; Llama, Mistral, Qwen2: embed_tokens)")
    p.add_argument("--padding-mask", action="store_true",
                   help="an i32 input lengths [batch]: keys at positions >= lengths[b] are masked (right padding; "
                        "Hugging Face's attention_mask with lengths[b] leading ones)")
    p.add_argument("--quantize", choices=("int8", "fp8_e4m3"),
                   help="the layers' linear weights 8-bit with an f32 scale per output row, bound from the "
                        "checkpoint's <name>_scale tensors (compressed-tensors' weight_scale; `hkc quantize` writes "
                        "them from a float checkpoint); llama, mistral and qwen2 (docs/SPEC.md, \"Quantized params\"). "
                        "The default for a config whose quantization_config declares such weights")
    g = p.add_argument_group("generation (docs/GENERATE.md)")
    g.add_argument("--generate", action="store_true",
                   help="a generation spec (GPT-2, Llama, Mistral, Qwen2): token rows, KV caches as state, the LM "
                        "head and the on-device sampler, for hkc generate; instead of --seq, --batch-sizes, --embeddings and "
                        "--padding-mask")
    g.add_argument("--max-seq", type=positive,
                   help="positions each cache slot holds (default: the model's positions, at most 2048)")
    g.add_argument("--slots", type=positive, help="cache slots: sequences generated at once (default 8)")
    g.add_argument("--kv-cache", choices=("fp8_e4m3",),
                   help="the KV caches in fp8_e4m3 (each k and v element rounded to e4m3 as it is stored: half the "
                        "bytes of bf16; default: the spec's dtype)")
    g.add_argument("--token-buckets", type=batch_list,
                   help="tokens per step that have a graph: the batch sizes (default %s)"
                        % ",".join(map(str, GEN_BUCKETS)))
    p.add_argument("--tensor-parallel", type=positive, metavar="N",
                   help="mark the projections for tensor parallelism (q|k|v, gate, up and the LM head split by "
                        "output column, o and down by row) and write parallel: {tensor: N}; any N builds with "
                        "`hkc build --tensor-parallel`")
    p.add_argument("-q", "--quiet", action="store_true", help="no notes on stderr")
    a = p.parse_args(argv)
    a.seq_given, a.batch_given = a.seq is not None, a.batch_sizes is not None
    gen_only = [o for o, v in (("--max-seq", a.max_seq), ("--slots", a.slots), ("--token-buckets", a.token_buckets),
                               ("--kv-cache", a.kv_cache)) if v is not None]
    if a.generate:
        clash = [o for o, v in (("--seq", a.seq_given), ("--batch-sizes", a.batch_given),
                                ("--embeddings", a.embeddings), ("--padding-mask", a.padding_mask)) if v]
        if clash:
            p.error("%s: not with --generate (its batch counts token rows: --token-buckets, --max-seq)"
                    % ", ".join(clash))
        a.slots = a.slots or 8
        a.token_buckets = sorted(set(a.token_buckets or GEN_BUCKETS))
        if len(a.token_buckets) > MAX_BUCKETS:
            p.error("--token-buckets: %d sizes, a spec has at most %d" % (len(a.token_buckets), MAX_BUCKETS))
    elif gen_only:
        p.error("%s: only with --generate" % ", ".join(gen_only))
    a.seq = a.seq or 128
    a.batch_sizes = a.batch_sizes or [1]
    try:
        with open(a.config) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        print("%s: %s: %s" % (PROG, a.config, e), file=sys.stderr)
        return 1
    if not isinstance(cfg, dict):
        print("%s: %s: not a JSON object" % (PROG, a.config), file=sys.stderr)
        return 1
    kind = cfg.get("model_type")
    if kind not in BUILDERS:
        print("%s: %s: model_type %r is not supported (supported: %s)"
              % (PROG, a.config, kind, ", ".join(sorted(BUILDERS))), file=sys.stderr)
        return 1
    build, prefix = BUILDERS[kind]
    dtype = a.dtype or DTYPES.get(cfg.get("torch_dtype"), "f32")
    try:
        n_layers = need(cfg, LAYER_KEYS[kind])[0]
        if a.layers is not None:
            if a.layers > n_layers:
                raise Unsupported("--layers %d: the model has %d" % (a.layers, n_layers))
            n_layers = a.layers
        max_pos = cfg.get("max_position_embeddings", cfg.get("n_positions"))
        if a.generate:
            if kind == "bert":
                raise Unsupported("--generate needs a decoder (a causal LM: gpt2, llama, mistral, qwen2); BERT is "
                                  "an encoder")
            if a.max_seq is None:
                a.max_seq = min(max_pos, 2048) if max_pos else 2048
            if max_pos and a.max_seq > max_pos:
                raise Unsupported("--max-seq %d is longer than the model's %d positions" % (a.max_seq, max_pos))
        elif max_pos and a.seq > max_pos:
            raise Unsupported("--seq %d is longer than the model's %d positions" % (a.seq, max_pos))
        m = build(cfg, n_layers, prefix if a.prefix is None else a.prefix, generate=a.generate)
        stored = checkpoint_quantization(cfg)
        if stored and a.quantize and a.quantize != stored:
            raise Unsupported("--quantize %s: the checkpoint stores %s weights (quantization_config)"
                              % (a.quantize, stored))
        a.quantize = a.quantize or stored
        if a.quantize and not m.linear:
            raise Unsupported("--quantize: the %s importer has no quantizable linear weights (llama, mistral and "
                              "qwen2 do)" % kind)
        m.quantize = a.quantize
        # the LM head: 8-bit under --quantize (`hkc quantize` writes lm_head.weight, for tied
        # embeddings a copy of the table); a checkpoint's own only where its config quantizes it
        m.quantize_head = bool(a.quantize) and a.generate and (not stored or head_quantized(cfg))
        if a.generate:
            gen_notes = make_generate(m, cfg, kind, a, dtype)
        elif kind in LLAMA_FAMILY:
            note = check_windows(cfg, kind, n_layers, a.seq)
            m.rest_note += ("; " + note) if note else ""
    except Unsupported as e:
        print("%s: %s: %s model: %s" % (PROG, a.config, kind, e), file=sys.stderr)
        return 1
    if a.embeddings:
        add_embeddings(m, cfg, kind)
    if a.padding_mask:
        for node in m.body:
            if node.get("op") == "attention":
                node["lengths"] = "lengths"
    if a.tensor_parallel:
        mark_shards(m)
        m.tensor_parallel = a.tensor_parallel
    a.name = a.name or kind
    a.targets = [t for t in a.targets.split(",") if t] if a.targets else []
    map_path = a.weights_map_out
    if not map_path:
        base = a.output[:-5] if a.output.endswith(".yaml") else a.output
        map_path = base + ".map"
    if a.generate:
        notes = gen_notes
        text = gen_spec_text(m, a, a.config, dtype, notes)
        what = "%s, %d layers, %s, generation: %d slots of %d positions" % (kind, n_layers, dtype, a.slots, a.max_seq)
    else:
        notes = m.notes(a.embeddings, a.padding_mask)
        text = spec_text(m, a, a.config, dtype)
        what = "%s, %d layers, %s" % (kind, n_layers, dtype)
    write_atomic(a.output, text)
    write_atomic(map_path, map_text(m, a))
    if not a.quiet:
        for n in notes:
            print("%s: note: %s" % (PROG, n), file=sys.stderr)
        print("wrote %s (%s) and %s (%d names)"
              % (a.output, what, map_path,
                 n_layers * sum(not isinstance(p[2], list) for p in m.layer_params_out()) + len(m.final_params)
                 + len(m.pre_params)))
    return 0


def main(argv):
    if len(argv) < 1 or argv[0] in ("-h", "--help"):
        print("usage: hkc import hf CONFIG.json -o SPEC.yaml [options]      a Hugging Face config.json\n"
              "       hkc import onnx MODEL.onnx -o SPEC.yaml [options]    an ONNX model\n"
              "(hkc import hf --help, hkc import onnx --help: the options)",
              file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] != "hf":
        print("hkc import: unknown format '%s' (known: hf, a Hugging Face config.json; onnx, an ONNX model)" % argv[0], file=sys.stderr)
        return 2
    return import_hf(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
