"""FAKE torch.nn.functional on NumPy (bench/peers_selftest.py only)."""
import math

import numpy as np

from .. import Tensor


def _t(a, like):
    return Tensor(a, like.dtype, like.device)


def linear(x, w, b=None):
    y = x.a @ w.a.T
    if b is not None:
        y = y + b.a
    return _t(y, x)


def layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
    a = x.a.astype(np.float64)
    mu = a.mean(-1, keepdims=True)
    var = ((a - mu) ** 2).mean(-1, keepdims=True)
    y = (a - mu) / np.sqrt(var + eps)
    if weight is not None:
        y = y * weight.a
    if bias is not None:
        y = y + bias.a
    return _t(y, x)


def rms_norm(x, shape, weight=None, eps=1e-5):
    a = x.a.astype(np.float64)
    y = a / np.sqrt((a ** 2).mean(-1, keepdims=True) + eps)
    if weight is not None:
        y = y * weight.a
    return _t(y, x)


_erf = np.vectorize(math.erf)


def gelu(x, approximate="none"):
    a = x.a.astype(np.float64)
    if approximate == "tanh":
        return _t(0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))), x)
    return _t(0.5 * a * (1 + _erf(a / math.sqrt(2))), x)


def relu(x):
    return _t(np.maximum(x.a, 0), x)


def silu(x):
    a = x.a.astype(np.float64)
    return _t(a / (1 + np.exp(-a)), x)


def softmax(x, dim=-1):
    a = x.a.astype(np.float64)
    e = np.exp(a - a.max(dim, keepdims=True))
    return _t(e / e.sum(dim, keepdims=True), x)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    qa, ka, va = (t.a.astype(np.float64) for t in (q, k, v))
    hq, hk = qa.shape[1], ka.shape[1]
    if hq != hk:
        assert enable_gqa, "GQA needs enable_gqa=True"
        ka = np.repeat(ka, hq // hk, axis=1)
        va = np.repeat(va, hq // hk, axis=1)
    s = (qa @ np.swapaxes(ka, -1, -2)) * (scale if scale is not None else 1 / math.sqrt(qa.shape[-1]))
    if is_causal:
        L, S = s.shape[-2], s.shape[-1]
        s = np.where(np.triu(np.ones((L, S), dtype=bool), 1), -np.inf, s)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    return _t(p @ va, q)
