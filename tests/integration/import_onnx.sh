#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ONNX importer (`hkc import onnx`: python/hkc_import_onnx.py and the package python/hkc_onnx/,
# docs/IMPORT.md): small torch modules written here -- a BERT-style post-norm layer (erf gelu), a
# GPT-2-style pre-norm block (fused qkv + Split, causal attention through a masked_fill buffer, tanh
# gelu), a Llama-style block (rmsnorm, rotary, grouped-query causal attention, SwiGLU), a mixed one
# (fused qkv with rotary, pre-scaled Q, hand-written layernorm, nn.GELU("tanh")); the first three again
# called with an int64 attention_mask (Hugging Face's (1 - m) * finfo.min bias; GPT-2's after its
# causal fill; Llama's causal | padding masked_fill and max clamp) mapped onto attention lengths, the
# Llama one with left padding and --padding-mask-as mask; BERT with an additive [batch, 1, t, t]
# mask input (attention's mask); the tanh GELU and Tanh on their own (the gelu_tanh and tanh ops);
# embeddings from input_ids (word + token type + position, LayerNorm); BERT, with and without its
# mask, exported with a dynamic seq axis too and imported with --seq 7 (the exported length), --seq
# 12 and --dim seq=12 (compared at that length); torch's own layers: nn.Linear on 2-D inputs (ONNX
# Gemm), nn.TransformerEncoderLayer batch first and seq first (the default), post-norm (relu) and
# norm_first (gelu), with a bool src_key_padding_mask (lengths), nn.TransformerEncoder (two layers
# and a norm), nn.TransformerDecoderLayer (causal self-attention, cross-attention to a memory),
# nn.MultiheadAttention alone, one encoder layer again in bf16 -- are exported with torch.onnx.export
# (opset 17, dynamic batch axis), imported, built for the host, run at two batch sizes with the
# exported weights and compared with torch's own output (f32: relative norm error 1e-4; bf16: 3e-2).
# So is a Gemm graph written with the onnx package that uses alpha, beta, transB and C (a bias, a
# scalar, a residual), against NumPy. Then the refusals: a node with no mapping (CumSum) is named
# with its inputs, so are a mask read outside attention, a mask over query rows and a Gemm with
# transA; a model with two unmappable nodes (CumSum, a lone Sigmoid: hkc has no sigmoid op) lists
# both, one line each; a file that is not ONNX is a one-line error; so are a symbolic seq left
# unpinned, a pinned name no input has, a pinned length a Reshape frozen at export cannot take, and
# a seq-first model whose batch axis is not named like one (then imported with --seq-first). Skips
# (77) when torch or onnx cannot be imported.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
# Without NumPy (a numpy package that fails to import, first on the path): one line, exit 1, no
# traceback -- checked whether or not torch and onnx are here.
nonp=$(mktemp -d)
mkdir "$nonp/numpy" && echo 'raise ImportError("no numpy here")' > "$nonp/numpy/__init__.py"
set +e
PYTHONPATH=$nonp HKC_PYTHON=$PY "$HKC" import onnx "$nonp/m.onnx" -o "$nonp/m.yaml" --weights-out "$nonp/w.st" \
  > "$nonp/out.txt" 2>&1
rc=$?
set -e
if [ $rc != 1 ] || grep -q Traceback "$nonp/out.txt" || [ "$(wc -l < "$nonp/out.txt")" != 1 ] ||
  ! grep -q "^hkc import onnx: NumPy is needed" "$nonp/out.txt"; then
  echo "FAIL without NumPy: exit $rc: $(cat "$nonp/out.txt")"
  rm -rf "$nonp"
  exit 1
fi
echo "ok   without NumPy: one line, exit 1"
rm -rf "$nonp"
if ! "$PY" -c "import torch, onnx" > /dev/null 2>&1; then
  echo "SKIPPED: $PY cannot import torch and onnx (set HK_PYTHON to a python that can)"
  exit 77
fi
IMPORT="env HKC_PYTHON=$PY $HKC import onnx" # the driver runs python/hkc_import_onnx.py (hkc-import-onnx)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
BATCHES="1 3"

# export the modules, and torch's outputs for random inputs at each batch size
"$PY" - "$work" $BATCHES <<'EOF'
import math, sys, warnings
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F
warnings.filterwarnings("ignore")
work, batches = sys.argv[1], [int(b) for b in sys.argv[2:]]
torch.manual_seed(19)
H, NH = 64, 4
D = H // NH

def heads(x, n):
    b, t, _ = x.shape
    return x.view(b, t, n, D).permute(0, 2, 1, 3)

class Bert(nn.Module):  # post-norm, separate q/k/v, erf gelu
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.o = (nn.Linear(H, H) for _ in range(4))
        s.ln1, s.ln2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        s.f1, s.f2 = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
    def forward(s, x, attention_mask=None, bias=None):
        b, t, _ = x.shape
        q, k, v = heads(s.q(x), NH), heads(s.k(x), NH), heads(s.v(x), NH)
        w = q @ k.transpose(-1, -2) / math.sqrt(D)
        if attention_mask is not None:  # Hugging Face's extended attention mask
            w = w + (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        if bias is not None:  # an additive mask input [batch, 1, t, t]
            w = w + bias
        p = torch.softmax(w, dim=-1)
        c = (p @ v).permute(0, 2, 1, 3).reshape(b, t, H)
        h = s.ln1(x + s.o(c))
        return s.ln2(h + s.f2(F.gelu(s.f1(h))))

class GPT2(nn.Module):  # pre-norm, fused qkv, causal mask buffer, tanh gelu (GPT-2's NewGELU)
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(H), nn.LayerNorm(H)
        s.attn, s.proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
        s.fc, s.out = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
        s.register_buffer("bias", torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32))
    def forward(s, x, attention_mask=None):
        b, t, c = x.shape
        q, k, v = s.attn(s.ln1(x)).split(H, dim=2)
        q, k, v = (z.view(b, t, NH, c // NH).transpose(1, 2) for z in (q, k, v))
        w = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        w = w.masked_fill(s.bias[:, :, :t, :t] == 0, float("-inf"))
        if attention_mask is not None:  # as Hugging Face's GPT-2: an additive bias after the causal fill
            w = w + (1.0 - attention_mask.view(b, -1)[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        y = (F.softmax(w, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + s.proj(y)
        h = s.fc(s.ln2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + s.out(h)

class RMSNorm(nn.Module):
    def __init__(s):
        super().__init__()
        s.weight = nn.Parameter(1 + 0.1 * torch.randn(H))
    def forward(s, x):
        return s.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

class Llama(nn.Module):  # rmsnorm, rope (theta 500000), GQA 4 over 2 kv heads, causal, SwiGLU
    KV, FF = 2, 96
    def __init__(s, theta=500000.0):
        super().__init__()
        s.n1, s.n2 = RMSNorm(), RMSNorm()
        s.q, s.o = nn.Linear(H, H, bias=False), nn.Linear(H, H, bias=False)
        s.k, s.v = nn.Linear(H, s.KV * D, bias=False), nn.Linear(H, s.KV * D, bias=False)
        s.g, s.u = nn.Linear(H, s.FF, bias=False), nn.Linear(H, s.FF, bias=False)
        s.dn = nn.Linear(s.FF, H, bias=False)
        inv = 1.0 / (theta ** (torch.arange(0, D, 2).float() / D))
        f = torch.outer(torch.arange(64).float(), inv)
        e = torch.cat((f, f), dim=-1)
        s.register_buffer("cos", e.cos())
        s.register_buffer("sin", e.sin())
    def forward(s, x, attention_mask=None):
        b, t, _ = x.shape
        h = s.n1(x)
        q, k, v = heads(s.q(h), NH), heads(s.k(h), s.KV), heads(s.v(h), s.KV)
        cos, sin = s.cos[:t][None, None], s.sin[:t][None, None]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = NH // s.KV
        k = k[:, :, None].expand(b, s.KV, rep, t, D).reshape(b, NH, t, D)
        v = v[:, :, None].expand(b, s.KV, rep, t, D).reshape(b, NH, t, D)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(D)
        if attention_mask is None:
            w = w + torch.full((t, t), float("-inf")).triu(1)
        else:  # causal and padding in one boolean mask, masked_fill (Where) with -inf
            bad = torch.ones(t, t, dtype=torch.bool).triu(1)[None, None] | (attention_mask[:, None, None, :] == 0)
            w = w.masked_fill(bad, float("-inf"))
            w = torch.max(w, torch.tensor(torch.finfo(w.dtype).min))  # older Hugging Face Llama's clamp
        w = F.softmax(w.float(), dim=-1).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).reshape(b, t, H)
        x = x + s.o(a)
        n = s.n2(x)
        return x + s.dn(F.silu(s.g(n)) * s.u(n))

class Mixed(nn.Module):  # fused qkv with rotary on q and k (split into three gemms), Q pre-scaled,
    # layernorm written out by hand (ReduceMean, Sub, Pow, Sqrt, Div), nn.GELU("tanh")
    def __init__(s):
        super().__init__()
        s.qkv, s.o, s.f = nn.Linear(H, 3 * H), nn.Linear(H, H), nn.Linear(H, H)
        s.g, s.b = nn.Parameter(1 + 0.1 * torch.randn(H)), nn.Parameter(0.1 * torch.randn(H))
        inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
        e = torch.outer(torch.arange(32).float(), inv)
        e = torch.cat((e, e), -1)
        s.register_buffer("cos", e.cos())
        s.register_buffer("sin", e.sin())
        s.act = nn.GELU(approximate="tanh")
    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = (heads(z, NH) for z in s.qkv(x).chunk(3, dim=-1))
        q = q * s.cos[:t] + rotate_half(q) * s.sin[:t]
        k = k * s.cos[:t] + rotate_half(k) * s.sin[:t]
        y = (F.softmax((q * D ** -0.5) @ k.transpose(-1, -2), dim=-1) @ v).transpose(1, 2).reshape(b, t, H)
        h = x + s.o(y)
        mu = h.mean(-1, keepdim=True)
        h = (h - mu) / torch.sqrt(((h - mu) ** 2).mean(-1, keepdim=True) + 1e-5) * s.g + s.b
        return h + s.act(s.f(h))

class Tanhs(nn.Module):  # F.gelu(approximate="tanh") of a layernorm (the standalone gelu_tanh op) and of a
    # gemm (its epilogue); Tanh of a gemm (a pooler's tanh(dense(h)): the standalone tanh op) and in x * tanh(x)
    def __init__(s):
        super().__init__()
        s.ln, s.f, s.p = nn.LayerNorm(H), nn.Linear(H, H), nn.Linear(H, H)
    def forward(s, x):
        h = F.gelu(s.ln(x), approximate="tanh")
        h = F.gelu(s.f(h), approximate="tanh")
        return x * torch.tanh(x) + torch.tanh(s.p(h))

class BertBias(Bert):  # the additive mask is the input: attention's mask, any pattern
    def forward(s, x, attention_bias):
        return Bert.forward(s, x, None, attention_bias)

class MaskMul(nn.Module):  # a padding mask multiplied into the hidden states: no hkc mapping
    def __init__(s):
        super().__init__()
        s.l = nn.Linear(H, H)
    def forward(s, x, attention_mask):
        return s.l(x * attention_mask[:, :, None])

class QueryMask(nn.Module):  # the mask is over query rows, not keys: neither lengths nor mask
    def __init__(s):
        super().__init__()
        s.q = nn.Linear(H, H)
    def forward(s, x, attention_mask):
        b, t, _ = x.shape
        q = heads(s.q(x), NH)
        w = q @ q.transpose(-1, -2) + (1.0 - attention_mask[:, None, :, None].float()) * -10000.0
        return (w.softmax(-1) @ q).transpose(1, 2).reshape(b, t, H)

class Embed(nn.Module):  # from token ids: word + token type (zeros) + position embeddings, LayerNorm, a gemm
    def __init__(s):
        super().__init__()
        s.word, s.pos, s.tt = nn.Embedding(100, H), nn.Embedding(32, H), nn.Embedding(2, H)
        s.register_buffer("position_ids", torch.arange(32).expand((1, -1)))
        s.ln, s.f = nn.LayerNorm(H, eps=1e-12), nn.Linear(H, H)
    def forward(s, input_ids):
        t = input_ids.shape[1]
        input_ids = input_ids.view(-1, t)  # as Hugging Face's GPT-2: a Reshape that changes nothing
        e = s.word(input_ids) + s.tt(torch.zeros_like(input_ids)) + s.pos(s.position_ids[:, :t])
        return F.gelu(s.f(s.ln(e)))

class Frozen(nn.Module):  # a Reshape to the exported length (a Python 7): --seq 9 cannot fit it
    def __init__(s):
        super().__init__()
        s.l = nn.Linear(H, H)
    def forward(s, x):
        return s.l(x).reshape(x.shape[0], 7, H)

class Cumsum(nn.Module):  # no hkc op: the importer must name the node
    def __init__(s):
        super().__init__()
        s.l = nn.Linear(H, H)
    def forward(s, x):
        return torch.cumsum(s.l(x), dim=1)

class Lin2d(nn.Module):  # nn.Linear on 2-D inputs: ONNX Gemm (transB=1, the bias as C)
    def __init__(s):
        super().__init__()
        s.a, s.b = nn.Linear(H, 96), nn.Linear(96, H)
    def forward(s, x):
        return s.b(F.relu(s.a(x)))

def TEL(**kw):  # torch's encoder layer: nn.MultiheadAttention inside (3-D heads [batch*heads, t, d], seq first)
    return nn.TransformerEncoderLayer(H, NH, 96, dropout=0.0, **kw)

class MHA(nn.Module):  # nn.MultiheadAttention alone, seq first (the default), need_weights left at True
    def __init__(s):
        super().__init__()
        s.m = nn.MultiheadAttention(H, NH)
    def forward(s, x):
        return s.m(x, x, x)[0]

class TELMask(nn.Module):  # src_key_padding_mask: bool [batch, t], True = padding (torch's polarity)
    def __init__(s):
        super().__init__()
        s.m = TEL(batch_first=True)
    def forward(s, x, mask):
        return s.m(x, src_key_padding_mask=mask)

class Dec(nn.Module):  # torch's decoder layer: causal self-attention (tgt_mask, a constant), cross-attention to
    # a memory of another length (q from x, k and v from mem: the kv projection split into two gemms)
    def __init__(s):
        super().__init__()
        s.m = nn.TransformerDecoderLayer(H, NH, 96, dropout=0.0, batch_first=True)
    def forward(s, x, mem):
        return s.m(x, mem, tgt_mask=nn.Transformer.generate_square_subsequent_mask(x.shape[1]))

class TwoBad(nn.Module):  # two nodes hkc cannot map, on two branches: both must be listed
    def __init__(s):
        super().__init__()
        s.a, s.b = nn.Linear(H, H), nn.Linear(H, H)
    def forward(s, x):
        return torch.cumsum(s.a(x), dim=1) + torch.sigmoid(s.b(x))

# kind: "x" hidden states; "mask" hidden states and an int64 attention_mask [batch, t] (right padding: random
# lengths, the first row full, the second half; hkc reads the lengths); "bias" hidden states and an additive
# float mask [batch, 1, t, t] (any pattern); "ids" token ids; "x2d" rows [batch, hidden]; "sf" hidden states seq
# first [t, batch, hidden] (hkc's input and output are the transposes); "kpm" hidden states and a bool
# key_padding_mask [batch, t] (True = padding; hkc reads the lengths: the count of False); "mem" hidden states
# and a memory [batch, t + 2, hidden]
for name, mod, t, kind in [("bert", Bert(), 7, "x"), ("gpt2", GPT2(), 11, "x"), ("llama", Llama(), 13, "x"),
                           ("mixed", Mixed(), 9, "x"), ("tanh", Tanhs(), 6, "x"), ("bert_mask", Bert(), 7, "mask"),
                           ("gpt2_mask", GPT2(), 11, "mask"), ("llama_mask", Llama(), 13, "mask"),
                           ("llama_left", Llama(), 13, "left"),
                           ("bert_bias", BertBias(), 7, "bias"), ("embed", Embed(), 9, "ids"),
                           ("cumsum", Cumsum(), 5, "x"), ("maskmul", MaskMul(), 5, "mask"),
                           ("qmask", QueryMask(), 5, "mask"), ("bert_dyn", Bert(), 7, "x"),
                           ("bert_mask_dyn", Bert(), 7, "mask"), ("frozen", Frozen(), 7, "x"),
                           ("lin2d", Lin2d(), 1, "x2d"), ("tel", TEL(batch_first=True), 7, "x"),
                           ("tel_nf", TEL(batch_first=True, norm_first=True, activation="gelu"), 9, "x"),
                           ("tel_sf", TEL(), 7, "sf"), ("tel_sf_nf", TEL(norm_first=True, activation="gelu"), 6, "sf"),
                           ("mha", MHA(), 5, "sf"), ("tel_kpm", TELMask(), 7, "kpm"), ("dec", Dec(), 5, "mem"),
                           ("enc", nn.TransformerEncoder(TEL(batch_first=True, activation="gelu"), 2,
                                                         norm=nn.LayerNorm(H)), 6, "x"),
                           ("twobad", TwoBad(), 5, "x")]:
    mod.eval()
    with torch.no_grad():
        for p in mod.parameters():  # non-trivial norm weights and biases (every weight: the encoder's copied layers)
            if p.dim() == 1 or name == "enc":
                p.add_(0.1 * torch.randn_like(p))
        names = {"x": ["x"], "mask": ["x", "attention_mask"], "left": ["x", "attention_mask"], "ids": ["input_ids"],
                 "bias": ["x", "attention_bias"], "x2d": ["x"], "sf": ["x"], "kpm": ["x", "mask"], "mem": ["x", "mem"]}[kind]
        def inputs(b, t=t):
            if kind == "ids":
                return (torch.randint(0, 100, (b, t)),)
            if kind == "x2d":
                return (torch.randn(b, H),)
            if kind == "sf":
                return (torch.randn(t, b, H),)
            if kind == "mem":
                return (torch.randn(b, t, H), torch.randn(b, t + 2, H))
            if kind == "kpm":  # right padding: the first row full, the second half, then random lengths
                lens = torch.cat([torch.tensor([t, max(1, t // 2)]), torch.randint(1, t + 1, (max(0, b - 2),))])[:b]
                return (torch.randn(b, t, H), torch.arange(t)[None] >= lens[:, None])
            if kind == "bias":  # holes anywhere but key 0, large negative and -inf, small values too
                r = torch.rand(b, 1, t, t)
                bias = torch.where(r < 0.2, -1e9, torch.where(r < 0.3, float("-inf"), 0.1 * torch.randn(b, 1, t, t)))
                bias[..., 0] = 0.0
                return (torch.randn(b, t, H), bias)
            lens = torch.cat([torch.tensor([t, max(1, t // 2)]), torch.randint(1, t + 1, (max(0, b - 2),))])[:b]
            m = (torch.arange(t)[None] < lens[:, None]).long()
            if kind == "left":  # left padding: the zeros first
                m = m.flip(1)
            return (torch.randn(b, t, H),) + ((m,) if kind in ("mask", "left") else ())
        dyn = name in ("bert_dyn", "bert_mask_dyn", "frozen")  # a dynamic seq axis too: hkc pins it (--seq)
        axes = {0: "batch", 1: "seq"} if dyn else {1: "batch"} if kind == "sf" else {0: "batch"}
        with torch.enable_grad():  # under no_grad torch's encoder layer takes its fused fast path, which has no ONNX export
            torch.onnx.export(mod, inputs(2), "%s/%s.onnx" % (work, name), input_names=names, output_names=["y"],
                              dynamic_axes=dict({k: axes for k in names}, y=axes), opset_version=17)
        if name == "twobad":
            continue
        if name == "mha":  # again with the batch axis named 'n': not found without --seq-first
            with torch.enable_grad():
                torch.onnx.export(mod, inputs(2), "%s/mha_n.onnx" % work, input_names=names, output_names=["y"],
                                  dynamic_axes={"x": {1: "n"}, "y": {1: "n"}}, opset_version=17)
        # the dynamic ones: torch's outputs at the exported length and at another (bert_dyn12, bert_mask_dyn12)
        for name, t, b in [(name, t, b) for b in batches] + ([(name + "12", 12, 3)] if dyn and name != "frozen" else []):
            ins = inputs(b, t)
            args, rows = [], np.ones((b,) if kind == "x2d" else (b, t), bool)
            for k, v in zip(names, ins):
                if kind == "sf":  # hkc's input is [batch, t, hidden]
                    v = v.transpose(0, 1).contiguous()
                if kind == "kpm":  # hkc's input: the lengths; only the unpadded rows are compared
                    if k == "mask":
                        k, v, rows = "mask_lengths", (~v).sum(1).int(), (~v).numpy()
                elif k == "attention_mask" and kind == "left":  # --padding-mask-as mask: the additive mask, compared
                    # on the unpadded rows (a padded row before every unpadded key masks all its keys: hkc
                    # writes zeros there, torch a softmax over finfo.min)
                    rows = v.numpy() == 1
                    k, v = "attention_mask_bias", torch.where(v[:, None, None, :] == 0, float("-inf"), 0.0).expand(b, 1, t, t)
                elif k == "attention_mask":  # hkc's input: the lengths. BERT: only the unpadded rows are compared.
                    # Causal: all rows -- in the unpadded ones (i < len) the causal mask already hides every
                    # padded key (j > i), so only the padded rows show the lengths (keys j < len on both sides)
                    k, v, rows = "attention_mask_lengths", v.sum(1).int(), (v.numpy() == 1) | (not name.startswith("bert_mask"))
                np.save("%s/%s_%s%d.npy" % (work, name, k, b), v.numpy())
                args.append("--input %s=%s/%s_%s%d.npy" % (k, work, name, k, b))
            open("%s/%s_args%d" % (work, name, b), "w").write(" ".join(args))
            np.save("%s/%s_rows%d.npy" % (work, name, b), rows)
            ref = mod(*ins)
            np.save("%s/%s_ref%d.npy" % (work, name, b), (ref.transpose(0, 1) if kind == "sf" else ref).numpy())

# ONNX Gemm written by hand, every attribute: g1 = 0.5 * x @ W1 + 2 * c1 (W1 [in, out], c1 [out]); g2 = x @ W2^T
# + c2 (transB, a scalar C); y = 0.75 * g1 @ W3^T + 0.5 * g2 (C a tensor: the gemm's residual, scaled). And
# transA = 1, which hkc cannot express (the batch would be the contraction axis): refused with the reason.
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(19)
W1, c1 = rng.standard_normal((H, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
W2, c2 = rng.standard_normal((32, H)).astype(np.float32), np.array([0.25], np.float32)
W3 = rng.standard_normal((32, 32)).astype(np.float32)
def gemm_model(path, trans_a=0):
    inits = [numpy_helper.from_array(v, k) for k, v in (("W1", W1), ("c1", c1), ("W2", W2), ("c2", c2), ("W3", W3))]
    nodes = [helper.make_node("Gemm", ["x", "W1", "c1"], ["g1"], name="g1", alpha=0.5, beta=2.0, transA=trans_a),
             helper.make_node("Gemm", ["x", "W2", "c2"], ["g2"], name="g2", transB=1),
             helper.make_node("Gemm", ["g1", "W3", "g2"], ["y"], name="g3", alpha=0.75, beta=0.5, transB=1)]
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", H])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
gemm_model("%s/gemm.onnx" % work)
gemm_model("%s/gemm_ta.onnx" % work, trans_a=1)
for b in batches:
    x = rng.standard_normal((b, H)).astype(np.float32)
    g1 = 0.5 * x.astype(np.float64) @ W1 + 2.0 * c1
    g2 = x.astype(np.float64) @ W2.T + c2
    np.save("%s/gemm_x%d.npy" % (work, b), x)
    np.save("%s/gemm_ref%d.npy" % (work, b), 0.75 * g1 @ W3.T + 0.5 * g2)
    np.save("%s/gemm_rows%d.npy" % (work, b), np.ones(b, bool))
    open("%s/gemm_args%d" % (work, b), "w").write("--input x=%s/gemm_x%d.npy" % (work, b))
EOF

for m in bert gpt2 llama mixed tanh bert_mask gpt2_mask llama_mask llama_left bert_bias embed bert_dyn bert_dyn12 \
    bert_mask_dyn12 lin2d gemm tel tel_nf tel_sf tel_sf_nf mha tel_kpm enc dec tel_bf16; do
  opts=""; batches=$BATCHES; src=${m%12}; data=$m; bound=1e-4
  case $m in
    llama_left) opts="--padding-mask-as mask" ;;
    bert_dyn) opts="--seq 7" ;; # exported with a dynamic seq axis at 7: pinned to 7, then to 12 (batch 3 only)
    bert_dyn12) opts="--seq 12"; batches=3 ;;
    bert_mask_dyn12) opts="--dim seq=12"; batches=3 ;;
    tel_bf16) opts="--dtype bf16"; src=tel; data=tel; bound=3e-2 ;; # the same layer in bf16 (weights rounded too)
  esac
  if ! msg=$($IMPORT "$work/$src.onnx" -o "$work/$m.yaml" --weights-out "$work/$m.safetensors" --batch-sizes 1,3 $opts 2>&1); then
    bad "$m: import: $msg"; continue
  fi
  ok "$m: import: $msg"
  echo "     ops: $(grep -o 'op: [a-z_]*' "$work/$m.yaml" | cut -d' ' -f2 | sort | uniq -c | tr -s ' \n' ' ')"
  if ! "$HKC" build "$work/$m.yaml" --target host -o "$work/$m.hkpack" -q > "$work/$m.build" 2>&1; then
    bad "$m: hkc build"; cat "$work/$m.build"; continue
  fi
  for b in $batches; do
    if ! "$HKC" run --allow-unsigned-native "$work/$m.hkpack" --batch "$b" --runs 1 --warmup 0 \
        --weights "$work/$m.safetensors" $(cat "$work/${data}_args$b") --save-outputs "$work/out_${m}_$b" \
        > "$work/$m.run$b" 2>&1; then
      bad "$m batch $b: hkc run"; cat "$work/$m.run$b"; continue
    fi
    if res=$("$PY" - "$work/out_${m}_$b/y.npy" "$work/${data}_ref$b.npy" "$work/${data}_rows$b.npy" $bound <<'EOF'
import sys
import numpy as np
out, ref = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
if out.shape != ref.shape:
    print("shape %s, torch %s" % (out.shape, ref.shape)); sys.exit(1)
rows = np.load(sys.argv[3])  # the unpadded rows (all but the padded positions of a masked input)
out, ref = out[rows], ref[rows]
rel, bound = np.linalg.norm(out - ref) / np.linalg.norm(ref), float(sys.argv[4])
print("rel-norm err %.3g vs torch (bound %g), max abs err %.3g" % (rel, bound, np.max(np.abs(out - ref))))
sys.exit(0 if np.all(np.isfinite(out)) and rel <= bound else 1)
EOF
    ); then ok "$m batch $b: $res"; else bad "$m batch $b: $res"; fi
  done
done
# the three patterns that must have become single hkc ops
grep -q "op: gelu," "$work/bert.yaml" && grep -q "op: layernorm" "$work/bert.yaml" || bad "bert: no gelu/layernorm node"
grep -q "act: gelu_tanh" "$work/gpt2.yaml" && grep -q "causal: true" "$work/gpt2.yaml" || bad "gpt2: no gelu_tanh epilogue / causal attention"
grep -q "op: rope.*theta: 500000.0" "$work/llama.yaml" && grep -q "kv_heads: 2, causal: true" "$work/llama.yaml" \
  && grep -q "op: rmsnorm" "$work/llama.yaml" || bad "llama: no rope theta 500000 / GQA causal attention / rmsnorm"
[ "$(grep -c "op: rope" "$work/mixed.yaml")" = 2 ] && grep -q "op: layernorm" "$work/mixed.yaml" \
  && grep -q "act: gelu_tanh" "$work/mixed.yaml" || bad "mixed: no 2 rope / layernorm / gelu_tanh epilogue"
grep -q "op: gelu_tanh, in: \[ln" "$work/tanh.yaml" && grep -q "act: gelu_tanh" "$work/tanh.yaml" \
  && [ "$(grep -c "op: tanh," "$work/tanh.yaml")" = 2 ] || bad "tanh: no standalone gelu_tanh / epilogue / 2 tanh"
# the padding masks became lengths (an i32 input replacing attention_mask), with the causal masking where
# the model has it; the additive mask input attention's mask; the ids an embedding with the position table
lin="attention_mask_lengths: {shape: \[batch\], dtype: i32}"
grep -q "$lin" "$work/bert_mask.yaml" && grep -q "heads: 4, lengths: attention_mask_lengths" "$work/bert_mask.yaml" \
  || bad "bert_mask: no lengths input / attention lengths"
for m in gpt2_mask llama_mask; do
  grep -q "$lin" "$work/$m.yaml" && grep -q "causal: true, lengths: attention_mask_lengths" "$work/$m.yaml" \
    || bad "$m: no lengths input / causal attention with lengths"
done
grep -q "attention_mask_bias: \[batch, 1, 13, 13\]" "$work/llama_left.yaml" \
  && grep -q "causal: true, mask: attention_mask_bias" "$work/llama_left.yaml" || bad "llama_left: no additive mask input"
grep -q "attention_bias: \[batch, 1, 7, 7\]" "$work/bert_bias.yaml" && grep -q "mask: attention_bias" "$work/bert_bias.yaml" \
  || bad "bert_bias: no [batch, 1, 7, 7] input / attention mask"
grep -q "input_ids: {shape: \[batch, 9\], dtype: i32}" "$work/embed.yaml" \
  && grep -q "op: embedding, in: \[input_ids, word_weight\], pos: " "$work/embed.yaml" \
  || bad "embed: no i32 input_ids / embedding with pos"
# torch's own layers: nn.Linear on 2-D inputs one gemm with the weight as stored (trans_b), the hand-written
# Gemms' alpha / beta / transB / C (a bias, a scalar, a residual), nn.MultiheadAttention one attention on the
# packed in_proj output and a gemm with trans_b (out_proj), the seq-first inputs and outputs transposed, the
# bool key_padding_mask the lengths
grep -q "op: gemm, in: \[x, a_weight\], trans_b: true, bias: a_bias" "$work/lin2d.yaml" && grep -q "^  x: \[batch, 64\]" "$work/lin2d.yaml" \
  || bad "lin2d: no gemm with trans_b over the Linear's weight / no [batch, 64] input"
[ "$(grep -c "op: gemm" "$work/gemm.yaml")" = 3 ] && grep -q "trans_b: true, residual: " "$work/gemm.yaml" \
  && grep -q "# 0.5 \* W1" "$work/gemm.yaml" || bad "gemm: no 3 gemms / residual / alpha-scaled weight"
for m in tel tel_nf tel_sf tel_sf_nf mha tel_kpm; do
  [ "$(grep -c "op: attention, in: \[[a-zA-Z0-9_]*\], heads: 4" "$work/$m.yaml")" = 1 ] \
    && grep -q "op: gemm, in: \[[a-zA-Z0-9_]*, [a-z_]*out_proj_weight\], trans_b: true, bias: " "$work/$m.yaml" \
    || bad "$m: no attention on the packed in_proj output / out_proj gemm"
done
for m in tel tel_nf tel_sf tel_sf_nf tel_kpm; do
  [ "$(grep -c "op: layernorm" "$work/$m.yaml")" = 2 ] || bad "$m: not 2 layernorms"
done
grep -q "op: gelu," "$work/tel_nf.yaml" && grep -q "op: relu," "$work/tel.yaml" || bad "tel / tel_nf: no relu / gelu"
for m in tel_sf tel_sf_nf mha; do
  grep -q "^  x: \[batch, [0-9]*, 64\]  # the ONNX input \[[0-9]*, batch, 64\] (seq first) transposed" "$work/$m.yaml" \
    && grep -q "^# output y: ONNX output 'y' \[[0-9]*, batch, 64\] (seq first) transposed" "$work/$m.yaml" \
    || bad "$m: the seq-first input / output not noted as transposed"
done
grep -q "mask_lengths: {shape: \[batch\], dtype: i32}  # .*key_padding_mask" "$work/tel_kpm.yaml" \
  && grep -q "heads: 4, lengths: mask_lengths" "$work/tel_kpm.yaml" || bad "tel_kpm: no lengths input / attention lengths"
[ "$(grep -c "op: attention" "$work/enc.yaml")" = 2 ] && [ "$(grep -c "op: layernorm" "$work/enc.yaml")" = 5 ] \
  || bad "enc: not 2 attention / 5 layernorm nodes"
grep -q "^dtype: bf16" "$work/tel_bf16.yaml" || bad "tel_bf16: not a bf16 spec"
grep -q "op: attention, in: \[[a-zA-Z0-9_]*\], heads: 4, causal: true" "$work/dec.yaml" \
  && grep -q "op: attention, in: \[[a-zA-Z0-9_]*, [a-zA-Z0-9_]*_c0, [a-zA-Z0-9_]*_c64\], heads: 4, out" "$work/dec.yaml" \
  && grep -q "^  mem: \[batch, 7, 64\]" "$work/dec.yaml" || bad "dec: no causal self-attention / cross-attention on mem"
grep -q "^  x: \[batch, 12, 64\]" "$work/bert_dyn12.yaml" && grep -q "^  x: \[batch, 12, 64\]" "$work/bert_mask_dyn12.yaml" \
  && grep -q "$lin" "$work/bert_mask_dyn12.yaml" || bad "bert_dyn12 / bert_mask_dyn12: seq not pinned to 12"

# refusals: exit 1, one line "error: ..." naming the node
expect_fail() {
  local name=$1 want=$2; shift 2
  set +e; msg=$("$@" 2>&1); rc=$?; set -e
  if [ $rc -ne 1 ]; then bad "$name: exit status $rc: $msg"
  elif [ "$(wc -l <<<"$msg")" -ne 1 ] || ! grep -Eq "^error: .*$want" <<<"$msg"; then bad "$name: not one line matching '$want': $msg"
  else ok "$name: $msg"; fi
}
expect_fail "unsupported node named" "unsupported node CumSum '/CumSum' \(inputs: '/l/Add_output_0'" \
  $IMPORT "$work/cumsum.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors"
expect_fail "mask read outside attention" "unsupported node Mul '/Mul' \(inputs: 'x' \(tensor \[batch, 5, 64\]\), '/Cast_output_0' \(value computed from input 'attention_mask'\)\)" \
  $IMPORT "$work/maskmul.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors"
expect_fail "query mask refused" "unsupported node Add '/Add' \(inputs: '/MatMul_output_0' \(attention scores\), '/Mul_output_0' \(value computed from input 'attention_mask'\)\): .* is not a key padding mask" \
  $IMPORT "$work/qmask.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors"
expect_fail "symbolic seq left" "input 'x' has a symbolic dim 'seq' \(axis 1\): .*pin it with --seq N or --dim seq=N" \
  $IMPORT "$work/bert_dyn.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors"
expect_fail "pinned name no input has" "--dim sequence=12: no input has a dim named 'sequence' \(.*'seq'\)" \
  $IMPORT "$work/bert_dyn.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors" --dim sequence=12
expect_fail "pinned seq the graph cannot take" "unsupported node Reshape '/Reshape' .*does not fit \[batch, 9, 64\].*\(with seq=9 pinned\)" \
  $IMPORT "$work/frozen.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors" --seq 9
# a seq-first model whose batch axis is not named like one: refused with the hint, imported with --seq-first
expect_fail "seq first unnamed" "input 'x' has a symbolic dim 'n' \(axis 1\): .*import with --seq-first" \
  $IMPORT "$work/mha_n.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors"
if msg=$($IMPORT "$work/mha_n.onnx" -o "$work/mha_n.yaml" --weights-out "$work/mha_n.safetensors" --batch-sizes 1,3 \
    --name mha --seq-first 2>&1) && cmp -s "$work/mha.yaml" "$work/mha_n.yaml"; then
  ok "--seq-first: the spec of the model whose batch axis is named 'batch'"
else
  bad "--seq-first: $msg"; diff "$work/mha.yaml" "$work/mha_n.yaml" || true
fi
expect_fail "Gemm transA refused" "unsupported node Gemm 'g1' \(inputs: 'x' \(tensor \[batch, 64\]\), .*\): transA=1: A would be \[K, M\] with the batch on the contraction axis" \
  $IMPORT "$work/gemm_ta.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors"
# two nodes hkc cannot map (CumSum, a lone Sigmoid -- hkc has no sigmoid op): both listed, one line each, in graph order
set +e; msg=$($IMPORT "$work/twobad.onnx" -o "$work/c.yaml" --weights-out "$work/c.safetensors" 2>&1); rc=$?; set -e
if [ $rc -eq 1 ] && [ "$(wc -l <<<"$msg")" -eq 2 ] \
    && sed -n 1p <<<"$msg" | grep -q "^error: unsupported node CumSum '/CumSum' (inputs: .*): no mapping for this op" \
    && sed -n 2p <<<"$msg" | grep -q "^error: unsupported node Sigmoid '/Sigmoid' (inputs: .*): hkc has no sigmoid op"; then
  ok "every unsupported node listed: $(tr '\n' '|' <<<"$msg")"
else
  bad "two unsupported nodes: exit $rc: $msg"
fi
head -c 300 "$HKC" > "$work/junk.onnx"
expect_fail "not an ONNX file" "junk.onnx: not an ONNX model" \
  $IMPORT "$work/junk.onnx" -o "$work/j.yaml" --weights-out "$work/j.safetensors"
expect_fail "missing file" "nope.onnx: No such file" \
  $IMPORT "$work/nope.onnx" -o "$work/j.yaml" --weights-out "$work/j.safetensors"
[ ! -e "$work/c.yaml" ] && [ ! -e "$work/j.yaml" ] && ok "nothing written on error" || bad "a spec was written on error"
[ $fail -eq 0 ] && echo "import_onnx: all passed" || echo "import_onnx: FAILED"
exit $fail
