# SPDX-License-Identifier: Apache-2.0
"""Shape ops over rows and heads views: Reshape, Transpose, Split, Slice, Concat, Unsqueeze,
Expand. None of them emits anything: they change how the importer sees a value -- an hkc tensor
in another layout (values.py: seq first, rows flattened), its rows split into heads, heads
transposed, K^T, grouped-query repeats, column slices, the halves of rotary."""
import numpy as np

from .fold import norm_axes, reshape_target
from .values import (B0, B1, Const, Expr, RopePart, RowSlice, Rows, Scores, View, lay_desc, onnx_shape,
                     relayout, shape_desc)


def classify(t0, t1):
    """What a Reshape target (at batch B0 and B1) can be: [(kind, rest)], kind "b" [batch, *rest],
    "sf" [rest[0], batch, *rest[1:]], "flat" [batch*rest[0], *rest[1:]], "msplit" [t, batch*nh, d]
    (rest (t, nh, d))."""
    out = []
    n = len(t0)
    if n != len(t1):
        return out
    if n >= 1 and t0[0] == B0 and t1[0] == B1 and t0[1:] == t1[1:]:
        out.append(("b", tuple(t0[1:])))
    if n >= 2 and t0[1] == B0 and t1[1] == B1 and t0[0] == t1[0] and t0[2:] == t1[2:]:
        out.append(("sf", (t0[0],) + tuple(t0[2:])))
    if n >= 1 and t0[0] % B0 == 0 and t1[0] % B1 == 0 and t0[0] // B0 == t1[0] // B1 > 1 and t0[1:] == t1[1:]:
        out.append(("flat", (t0[0] // B0,) + tuple(t0[1:])))
    if n == 3 and t0[0] == t1[0] and t0[1] % B0 == 0 and t1[1] % B1 == 0 and t0[1] // B0 == t1[1] // B1 \
            and t0[2] == t1[2]:
        out.append(("msplit", (t0[0], t0[1] // B0, t0[2])))
    return out


class Layout:
    def op_Reshape(self, n, a, ins):
        x = ins[0]
        if isinstance(x, Expr):
            x = self.materialize(x)
        c = self.vals.get(n.input[1])
        if not isinstance(c, Const):
            self.unsupported("the new shape is computed from a tensor, not from constants and static shapes")
        if isinstance(x, Scores):
            self.unsupported("attention %s are read outside attention (nn.MultiheadAttention's need_weights=True, "
                             "or an output of them): hkc's attention node does not return them" % (
                                 "probabilities" if x.probs else "scores"))
        if not isinstance(x, (Rows, RowSlice, View)):
            return None
        s0, s1 = onnx_shape(x, B0), onnx_shape(x, B1)
        az = a.get("allowzero", 0)
        t0 = reshape_target(s0, c.v0, az)
        t1 = reshape_target(s1, c.v1, az)
        if int(np.prod(t0)) != int(np.prod(s0)):
            self.unsupported("the new shape %s does not fit %s (%d elements at batch %d)" % (
                [int(v) for v in c.v0], shape_desc(x), int(np.prod(s0)), B0))
        if list(t0) == list(s0) and list(t1) == list(s1):
            return x
        kinds = dict(classify(t0, t1))
        if not kinds:
            self.unsupported("the new shape %s does not keep the batch as an axis of its own (or merged with the "
                             "seq, as [batch*seq, ...])" % [int(v) for v in c.v0])
        r = self.reshape_to(x, kinds)
        if r is None:
            self.unsupported("%s reshaped to %s: hkc follows a split of the last axis into heads, and merging or "
                             "unmerging batch and seq, only" % (shape_desc(x), [int(v) for v in c.v0]))
        return r

    def reshape_to(self, x, kinds):
        if isinstance(x, (Rows, RowSlice)):
            lay, rest = x.lay, x.rest
            for kind, new in kinds.items():
                if kind == "b" and lay == "fb" and new == rest:
                    return relayout(x, "b")
                if kind == "sf" and lay == "fs" and new == rest:
                    return relayout(x, "sf")
                if kind == "flat" and lay in ("b", "sf") and new == rest:
                    return relayout(x, "fb" if lay == "b" else "fs")
                if kind == "b" and lay == "b" and len(rest) == 2 and len(new) == 3 and new[0] == rest[0] \
                        and new[1] * new[2] == rest[1]:
                    return View(x, new[1], new[2], "split")
                if kind == "msplit" and lay in ("sf", "fs") and len(rest) == 2 and new[0] == rest[0] \
                        and new[1] * new[2] == rest[1]:
                    return View(x, new[1], new[2], "split", merged=True)
            return None
        # a heads view
        if x.form == "split" and x.scale == 1.0 and x.rep == 1:
            whole = (x.rest[0], x.nh * x.d)
            want = {"sf": "sf", "flat": "fs"} if x.merged else {"b": "b", "flat": "fb"}
            for kind, lay in want.items():
                if kinds.get(kind) == whole:
                    return relayout(x.src, lay)
        if not x.merged and x.form == "expand" and kinds.get("b") == (x.nh, x.rest[2], x.d):
            return x.like(form="heads")
        return None

    def op_Transpose(self, n, a, ins):
        x = ins[0]
        if isinstance(x, Expr):
            x = self.materialize(x)
        if not isinstance(x, (Rows, RowSlice, View)):
            return None
        rank = len(onnx_shape(x, 1))
        perm = [int(p) for p in a.get("perm", list(range(rank))[::-1])]
        if perm == list(range(rank)):
            return x
        if isinstance(x, (Rows, RowSlice)):
            if x.lay in ("b", "sf") and rank >= 3 and perm == [1, 0] + list(range(2, rank)):
                return relayout(x, "sf" if x.lay == "b" else "b")
            self.unsupported("perm %s of %s: hkc keeps each batch entry's rows in order; of the transposes of "
                             "rows only swapping the batch and the seq (perm [1, 0, 2]) is followed" % (
                                 perm, lay_desc(x.lay, x.rest)))
        if x.merged:  # [t, b*nh, d] split, [b*nh, t, d] heads, [b*nh, d, t] headsT
            table = {("split", (1, 0, 2)): "heads", ("split", (1, 2, 0)): "headsT",
                     ("heads", (1, 0, 2)): "split", ("heads", (0, 2, 1)): "headsT",
                     ("headsT", (0, 2, 1)): "heads", ("headsT", (2, 0, 1)): "split"}
            form = table.get((x.form, tuple(perm)))
        else:
            table = {("split", (2, 1, 3)): "heads", ("split", (2, 3, 1)): "headsT",
                     ("heads", (1, 3, 2)): "headsT", ("heads", (2, 1, 3)): "split",
                     ("headsT", (1, 3, 2)): "heads"}
            form = table.get((x.form, tuple(perm[1:]))) if len(perm) == 4 and perm[0] == 0 else None
        if form is None:
            self.unsupported("perm %s of %s: only the transposes between [seq, heads, head_dim], [heads, seq, "
                             "head_dim] and K^T of attention heads are followed" % (perm, x.desc()))
        return x.like(form=form)

    def op_Split(self, n, a, ins):
        x = ins[0]
        if isinstance(x, Expr):
            x = self.materialize(x)
        if not isinstance(x, (Rows, RowSlice)):
            return None
        rank = len(onnx_shape(x, 1))
        if a.get("axis", 0) not in (-1, rank - 1):
            self.unsupported("a split along axis %d: only the last axis (the columns) of rows is split" % (
                a.get("axis", 0)))
        width = x.rest[-1]
        sizes = self.const_in(1) if len(n.input) > 1 else a.get("split")
        if sizes is None:
            sizes = [width // len(n.output)] * len(n.output)
        sizes = [int(s) for s in np.ravel(sizes)]
        if sum(sizes) != width:
            return None
        base, off = (x, 0) if isinstance(x, Rows) else (x.base, x.start)
        res = []
        for s in sizes:
            res.append(RowSlice(base, off, s))
            off += s
        return res

    def op_Slice(self, n, a, ins):
        x = ins[0]
        if isinstance(x, Expr):
            x = self.materialize(x)
        if not isinstance(x, (Rows, RowSlice, View)):
            return None
        starts, ends = self.const_in(1), self.const_in(2)
        axes = self.const_in(3) if len(n.input) > 3 and n.input[3] else None
        steps = self.const_in(4) if len(n.input) > 4 and n.input[4] else None
        if starts is None or ends is None or starts.size != 1:
            self.unsupported("a slice with bounds that are not constants, or over several axes")
        if steps is not None and int(np.ravel(steps)[0]) != 1:
            self.unsupported("a slice with a step")
        rank = len(onnx_shape(x, 1))
        axis = int(np.ravel(axes)[0]) if axes is not None else 0
        axis = axis + rank if axis < 0 else axis
        if axis != rank - 1:
            self.unsupported("a slice along axis %d: only the last axis (the columns) is sliced" % axis)
        width = x.rest[-1]
        s, e = int(np.ravel(starts)[0]), int(np.ravel(ends)[0])
        s = max(0, min(width, s + width if s < 0 else s))
        e = max(0, min(width, e + width if e < 0 else e))
        if isinstance(x, View):
            if x.form in ("heads", "split") and x.d % 2 == 0 and not x.merged:
                if (s, e) == (0, x.d // 2):
                    return RopePart("half", x, 0)
                if (s, e) == (x.d // 2, x.d):
                    return RopePart("half", x, 1)
            self.unsupported("a slice of attention heads other than the halves of rotate-half rotary")
        if e > s:
            base, off = (x, 0) if isinstance(x, Rows) else (x.base, x.start)
            return RowSlice(base, off + s, e - s)
        return None

    def op_Concat(self, n, a, ins):
        if len(ins) == 2 and all(isinstance(v, RopePart) for v in ins):
            p, q = ins
            if p.kind == "neghalf" and q.kind == "half" and q.which == 0 and p.view is q.view \
                    and a.get("axis") in (-1, len(p.view.rest)):
                return RopePart("rot", p.view)
        for v in ins:  # along the sequence of rows or of attention heads
            seq_axis = None
            if isinstance(v, (Rows, RowSlice, Expr)) and v.lay in ("b", "sf") and len(v.rest) >= 2:
                seq_axis = 1 if v.lay == "b" else 0
            elif isinstance(v, View) and v.form in ("heads", "split"):
                seq_axis = {("heads", False): 2, ("heads", True): 1, ("split", False): 1, ("split", True): 0}[
                    (v.form, v.merged)]
            if seq_axis is not None:
                rank = len(onnx_shape(v, 1))
                axis = a.get("axis", 0) + (rank if a.get("axis", 0) < 0 else 0)
                if axis == seq_axis:
                    self.unsupported("it appends rows to the sequence (nn.MultiheadAttention's add_bias_kv or "
                                     "add_zero_attn, a cache): hkc has no concat")
        self.unsupported("hkc has no concat: only cat(-x2, x1) of rotate-half rotary is mapped")

    def op_Unsqueeze(self, n, a, ins):
        x = ins[0]
        axes = self.const_in(1) if len(n.input) > 1 else a.get("axes")
        if isinstance(x, View) and x.form == "heads" and x.rep == 1 and not x.merged and axes is not None \
                and norm_axes([int(v) for v in np.ravel(axes)], 5) == [2]:
            return x.like(form="unsq")
        return None

    def op_Expand(self, n, a, ins):
        x = ins[0]
        c = self.vals.get(n.input[1])
        if isinstance(x, View) and x.form == "unsq" and isinstance(c, Const):
            s0, s1 = [int(v) for v in c.v0], [int(v) for v in c.v1]
            if len(s0) == 5 and s0[0] in (1, B0) and s1[0] in (1, B1) and s0[1:] == s1[1:]:
                kv, rep, t, d = s0[1:]
                if (kv in (1, x.nh)) and t in (1, x.rest[2]) and d in (1, x.d) and rep >= 1:
                    return x.like(form="expand", rep=rep, nh=x.nh * rep)
        return None
