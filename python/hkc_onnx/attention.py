# SPDX-License-Identifier: Apache-2.0
"""Attention: Q @ K^T of heads views, scalar scales, a constant (causal) mask or a mask computed
from an input (masks.py), Softmax and @ V become one hkc attention node -- from the 4-D heads of
Hugging Face-style blocks ([b, nh, t, d]) and from the 3-D heads of nn.MultiheadAttention
([b*nh, t, d], the batch and the heads in one axis)."""
import math

import numpy as np

from .values import ROWSLIKE, Const, MaskFn, RopePart, RowSlice, Scores, View, close, lay_shape


class Attention:
    def matmul_views(self, n, x, w):
        """MatMul of heads: Q @ K^T gives scores, P @ V the attention node."""
        if isinstance(x, View) and isinstance(w, View):
            if x.form == "heads" and w.form == "headsT" and x.nh == w.nh and x.d == w.d and x.merged == w.merged:
                return Scores(x, w, x.scale * w.scale)
            self.unsupported("a product of heads views other than Q [heads, seq, head_dim] @ K^T [heads, head_dim, "
                             "seq]")
        if isinstance(x, Scores) and x.probs and isinstance(w, View):
            if x.merged != w.merged:
                self.unsupported("the probabilities and V do not have the same heads layout")
            return self.attention(x, w)
        if isinstance(x, Scores) and not x.probs:
            self.unsupported("the attention scores are multiplied before a Softmax")
        return None

    def op_Softmax(self, n, a, ins):
        x = ins[0]
        axis = a.get("axis", -1)
        if isinstance(x, Scores) and not x.probs:
            if axis not in (-1, 2 if x.merged else 3):
                self.unsupported("a softmax of attention scores over axis %d, not over the keys" % axis)
            return x.like(probs=True)
        if isinstance(x, ROWSLIKE):
            rank = len(lay_shape(x.lay, x.rest, 1))
            if axis not in (-1, rank - 1):
                self.unsupported("a softmax over axis %d: hkc's softmax is over the last axis" % axis)
            xr = self.materialize(x)
            return self.emit("softmax", [xr.name], n.output[0], xr.rest, xr.lay)
        return None

    def view_binary(self, op, x, y, sx, sy):
        if isinstance(x, View) and not isinstance(y, (View, RopePart)):
            v, c, s = x, y, sy
        elif isinstance(y, View) and not isinstance(x, (View, RopePart)) and op == "Mul":
            v, c, s = y, x, sx
        elif isinstance(x, RopePart) or isinstance(y, RopePart) or (isinstance(x, View) and isinstance(y, View)):
            return self.rope_binary(op, x, y)
        else:
            return None
        if s is not None and op in ("Mul", "Div"):
            return v.like(scale=v.scale * (s if op == "Mul" else 1 / s))
        if op == "Mul" and isinstance(c, Const) and c.static() is not None and v.form in ("heads", "split") \
                and not v.merged:
            return RopePart("cos", v, table=c.static())
        return None

    def const_mask(self, s, m):
        """A constant added to (or kept by a Where on) scores s, broadcast to [t, tk]: the same for
        every batch entry and head, or None when it does not broadcast to the scores."""
        t, tk = s.rest[1], s.rest[2]
        rank = 3 if s.merged else 4
        if m.ndim > rank:
            return None
        try:
            full = np.broadcast_to(m, np.broadcast_shapes(m.shape, (1,) * (rank - 2) + (t, tk)))
        except ValueError:
            return None
        full = full.reshape(-1, t, tk)
        if not np.all(full == full[:1]):
            self.unsupported("the attention mask differs between heads or batch entries")
        return full[0]

    def add_mask(self, s, m):
        mm = self.const_mask(s, m)
        if mm is None:
            return None
        t, tk = mm.shape
        if np.all(mm == 0):
            return s
        upper = np.triu(np.ones((t, tk), bool), 1)
        if np.all(mm[~upper] == 0) and np.all(mm[upper] <= -1e4):
            return s.like(causal=True)
        self.unsupported("the attention mask is not causal (hkc attention has causal masking only)")

    def op_Where(self, n, a, ins):
        cond, x, y = ins
        if isinstance(cond, MaskFn) and isinstance(x, Scores) != isinstance(y, Scores) \
                and isinstance(x if isinstance(y, Scores) else y, Const):
            s, fill = (x, self.scalar(y)) if isinstance(x, Scores) else (y, self.scalar(x))
            if s.probs or fill is None or fill > -1e4:
                self.unsupported("the masked fill value is not a large negative number")
            keep_x = isinstance(x, Scores)

            def ev(m, w):
                c = np.asarray(cond.ev(m, w)).astype(bool)
                return np.where(c, 0.0, fill) if keep_x else np.where(c, fill, 0.0)
            return self.add_mask_fn(s, MaskFn(cond.src, ev, node=n, key=(cond.key, keep_x, fill)))
        if not isinstance(cond, Const) or cond.static() is None:
            return None
        cnd = cond.static().astype(bool)
        if isinstance(y, Scores) and not y.probs and isinstance(x, Const):
            keep, s, fill = ~cnd, y, self.scalar(x)
        elif isinstance(x, Scores) and not x.probs and isinstance(y, Const):
            keep, s, fill = cnd, x, self.scalar(y)
        else:
            return None
        if fill is None or fill > -1e4:
            self.unsupported("the masked fill value is not a large negative number")
        k = self.const_mask(s, keep)
        if k is None:
            return None
        if np.all(k):
            return s
        if np.array_equal(k, ~np.triu(np.ones(k.shape, bool), 1)):
            return s.like(causal=True)
        self.unsupported("the attention mask is not causal (hkc attention has causal masking only)")

    def op_Max(self, n, a, ins):
        """max(scores, large negative) (older Hugging Face Llama clamps masked scores so): nothing."""
        if len(ins) == 2:
            s, c = (ins[0], ins[1]) if isinstance(ins[0], Scores) else (ins[1], ins[0])
            v = self.scalar(c)
            if isinstance(s, Scores) and not s.probs and v is not None and v <= -1e4:
                return s
        return None

    def attention(self, p, v):
        q, k = p.q, p.k
        if v.form != "heads" or v.d != q.d or v.nh != q.nh or k.nh != q.nh:
            self.unsupported("Q, K and V heads disagree")
        if v.rep != k.rep or v.scale != 1.0:
            self.unsupported("K and V are repeated differently, or V is scaled")
        if q.rep != 1:
            self.unsupported("Q is repeated")
        heads, kvh, d = q.nh, q.nh // k.rep, q.d
        if k.src.rest[1] != kvh * d or v.src.rest[1] != kvh * d:
            self.unsupported("grouped-query heads do not match the K/V widths")
        scale = p.scale
        keys = {"heads": heads}
        if kvh != heads:
            keys["kv_heads"] = kvh
        if p.causal:
            keys["causal"] = True
        if p.lengths:
            keys["lengths"] = p.lengths
        if p.mask:
            keys["mask"] = p.mask
        if not close(scale, 1 / math.sqrt(d)):
            keys["scale"] = float(scale)
        srcs = [q.src, k.src, v.src]
        if all(isinstance(s, RowSlice) for s in srcs) and srcs[0].base.name == srcs[1].base.name == srcs[2].base.name \
                and (srcs[0].start, srcs[1].start, srcs[2].start) == (0, heads * d, (heads + kvh) * d) \
                and srcs[0].base.rest[-1] == (heads + 2 * kvh) * d:
            ins = [srcs[0].base.name]
        else:
            ins = [self.materialize(s).name for s in srcs]
        rest = (q.src.rest[0], heads * d)
        out = self.emit("attention", ins, self.cur.output[0], rest, "b", **keys)
        return View(out, heads, d, "heads", merged=p.merged)
