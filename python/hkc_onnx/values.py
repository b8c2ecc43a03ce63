# SPDX-License-Identifier: Apache-2.0
"""What the importer knows of each ONNX value: a constant, an hkc tensor (rows), a lazy
element-wise expression, a heads view of rows, attention scores, a value computed from a mask or
ids input, ... -- and the errors it raises.

Layouts. An hkc tensor is [batch, *rest]; the ONNX graph may see the same data in another
shape, which `lay` names (torch's nn.MultiheadAttention works seq-first inside, and flattens the
rows for its out_proj Gemm):
  "b"   [batch, *rest]                    hkc's own layout
  "sf"  [rest[0], batch, *rest[1:]]       seq first (x.transpose(0, 1); batch_first=False inputs)
  "fb"  [batch*rest[0], *rest[1:]]        rows flattened batch-major (x.reshape(-1, hidden))
  "fs"  [rest[0]*batch, *rest[1:]]        rows flattened seq-major (seq-first rows made 2-D)
Row-wise ops (gemm, norms, element-wise ops with per-column constants) do not care which rows
come first, so a value in any layout maps onto the same hkc op; only the shape ops (Reshape,
Transpose, Shape) read the layout.
"""
import numpy as np

B0, B1 = 2, 3  # the two batch sizes the constant folding runs with


class ImportError_(Exception):
    pass


class Refused(ImportError_):
    """One or more errors, one line each (every node that cannot be mapped)."""

    def __init__(self, msgs):
        super().__init__("\n".join(msgs))
        self.msgs = list(msgs)


def fail(msg):
    raise ImportError_(msg)


def close(a, b, tol=1e-5):
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-30)


def lay_shape(lay, rest, b):
    """The ONNX shape of an hkc tensor [b, *rest] seen in layout lay."""
    rest = tuple(rest)
    if lay == "b":
        return (b,) + rest
    if lay == "sf":
        return (rest[0], b) + rest[1:]
    if lay in ("fb", "fs"):
        return (b * rest[0],) + rest[1:]
    raise ValueError("layout %r" % lay)


def lay_desc(lay, rest):
    rest = [str(d) for d in rest]
    if lay == "b":
        dims = ["batch"] + rest
    elif lay == "sf":
        dims = [rest[0], "batch"] + rest[1:]
    elif lay == "fb":
        dims = ["batch*%s" % rest[0]] + rest[1:]
    else:
        dims = ["%s*batch" % rest[0]] + rest[1:]
    return "[%s]" % ", ".join(dims)


# ----------------------------------------------------------------------------- values


class Const:
    """A constant: its value with batch = B0 and with batch = B1 (equal when independent
    of the batch), and the initializer it comes from (for param names), if any. table: the
    initializer when the value is its first rows (a Gather of positions 0..n-1)."""

    table = None

    def __init__(self, v0, v1, origin=None):
        self.v0, self.v1, self.origin = np.asarray(v0), np.asarray(v1), origin

    def static(self):
        if self.v0.shape == self.v1.shape and np.array_equal(self.v0, self.v1, equal_nan=self.v0.dtype.kind == "f"):
            return self.v0
        return None

    def static_b(self):
        """static(), or for a constant that only repeats one value along the batch dim (e.g.
        token type embeddings of zeros_like(input_ids)), that value with a leading dim of 1."""
        s = self.static()
        if s is not None:
            return s
        a, b = self.v0, self.v1
        if a.ndim == b.ndim >= 1 and a.shape[0] == B0 and b.shape[0] == B1 and a.shape[1:] == b.shape[1:] \
                and np.all(a == a[:1]) and np.all(b == b[:1]) and np.array_equal(a[:1], b[:1]):
            return a[:1]
        return None

    def desc(self):
        return "constant %s" % (list(self.v0.shape),)


class Rows:
    """An hkc tensor [batch, *rest], seen by the ONNX graph in layout lay."""

    def __init__(self, name, rest, lay="b"):
        self.name, self.rest, self.lay = name, tuple(rest), lay

    def desc(self):
        return "tensor %s" % lay_desc(self.lay, self.rest)


class RowSlice:
    """Columns [start, start+length) of the last axis of an hkc tensor (Split / Slice)."""

    def __init__(self, base, start, length):
        self.base, self.start, self.length = base, start, length
        self.rest = base.rest[:-1] + (length,)
        self.lay = base.lay

    def desc(self):
        return "columns %d..%d of %s" % (self.start, self.start + self.length, self.base.name)


class Expr:
    """A lazy element-wise expression over rows values (all in one layout) and constants."""

    def __init__(self, op, args, rest, node, lay="b"):
        self.op, self.args, self.rest, self.node, self.lay = op, args, tuple(rest), node, lay

    def desc(self):
        return "element-wise %s expression" % self.op


def relayout(v, lay):
    """The same hkc tensor (or columns of one) seen in another layout."""
    if isinstance(v, Rows):
        return Rows(v.name, v.rest, lay)
    return RowSlice(relayout(v.base, lay), v.start, v.length)


class View:
    """Rows src [b, t, nh*d] seen as heads. form: split [t, nh, d], heads [nh, t, d],
    headsT [nh, d, t], unsq [nh, 1, t, d], expand [nh, rep, t, d]. scale: a pending
    scalar factor; rep: grouped-query repeat (nh counts the repeated heads). merged: the
    ONNX tensors are 3-D with the batch and the heads in one axis, as nn.MultiheadAttention
    has them: split [t, b*nh, d], heads [b*nh, t, d], headsT [b*nh, d, t]."""

    def __init__(self, src, nh, d, form, scale=1.0, rep=1, merged=False):
        self.src, self.nh, self.d, self.form, self.scale, self.rep = src, nh, d, form, scale, rep
        self.merged = merged
        t = src.rest[0]
        kv = nh // rep
        self.rest = {"split": (t, nh, d), "heads": (nh, t, d), "headsT": (nh, d, t),
                     "unsq": (kv, 1, t, d), "expand": (kv, rep, t, d)}[form]

    def like(self, **kw):
        a = dict(src=self.src, nh=self.nh, d=self.d, form=self.form, scale=self.scale, rep=self.rep,
                 merged=self.merged)
        a.update(kw)
        return View(**a)

    def desc(self):
        return "heads view (%s%s) of %s" % ("batch and heads merged, " if self.merged else "", self.form,
                                            getattr(self.src, "name", None) or self.src.desc())


class RopePart:
    """Pieces of rotate-half rotary on a heads view: half (x1 or x2), neghalf (-x2),
    rot (cat(-x2, x1)), cos (x * table), sin (rot(x) * table)."""

    def __init__(self, kind, view, which=0, table=None):
        self.kind, self.view, self.which, self.table = kind, view, which, table
        r = view.rest
        self.rest = r[:-1] + (r[-1] // 2,) if kind in ("half", "neghalf") else r

    def desc(self):
        return "rotary part (%s)" % self.kind


class Source:
    """A model input that is not rows [batch, seq, hidden]: integer token ids or a padding
    mask [batch, seq], or an additive float mask [batch, h, q, k]. What it becomes in the spec
    depends on its use: embedding ids (an i32 input), attention lengths (an i32 [batch] input
    derived from it) or attention's mask (the input as it is)."""

    def __init__(self, onnx_name, np_dtype, rest):
        self.onnx_name, self.dtype, self.rest = onnx_name, np_dtype, tuple(rest)
        self.ids = None  # hkc name when read as embedding ids
        self.lengths = None  # hkc name of the lengths input derived from it
        self.mask = None  # hkc name when read as attention's additive mask
        self.invert = None  # the padding mask's polarity: False 1 = keep (Hugging Face), True 1 = pad (torch)


class MaskFn:
    """A value computed from one Source (and constants) by nodes hkc has no op for (Unsqueeze,
    Cast, Sub, Mul, Where, Expand, ...): kept as a NumPy function of the source's value, which
    is evaluated on probe values where it meets attention scores. ev(m, w): m the source's value
    with batch B0 (w = 0) or B1 (w = 1); raw: the source itself, unchanged."""

    def __init__(self, src, ev, raw=False, node=None, key=None):
        self.src, self.ev, self.raw, self.node = src, ev, raw, node
        self.key = ("fn", id(self)) if key is None else key  # the same key: the same function

    def desc(self):
        if self.raw:
            return "input [batch, %s] of %s" % (", ".join(map(str, self.src.rest)), self.src.dtype)
        return "value computed from input '%s'" % self.src.onnx_name


class Scores:
    def __init__(self, q, k, scale, causal=False, probs=False, lengths=None, mask=None):
        self.q, self.k, self.scale, self.causal, self.probs = q, k, scale, causal, probs
        self.lengths, self.mask = lengths, mask
        self.merged = q.merged
        self.rest = (q.nh, q.rest[1], k.rest[2])

    def like(self, **kw):
        a = dict(q=self.q, k=self.k, scale=self.scale, causal=self.causal, probs=self.probs,
                 lengths=self.lengths, mask=self.mask)
        a.update(kw)
        return Scores(**a)

    def desc(self):
        return "attention %s" % ("probabilities" if self.probs else "scores")


class Bad:
    """The output of a node that was refused: the nodes that read it are not mapped (nor
    reported: the refusal upstream is)."""

    def desc(self):
        return "output of a refused node"


BAD = Bad()
ROWSLIKE = (Rows, RowSlice, Expr)


def onnx_shape(v, b):
    """The ONNX shape of a non-constant value at batch b."""
    if isinstance(v, ROWSLIKE):
        return lay_shape(v.lay, v.rest, b)
    if isinstance(v, View):
        if not v.merged:
            return (b,) + tuple(v.rest)
        nh, r = v.nh, v.rest
        return {"split": (r[0], b * nh, r[2]), "heads": (b * nh, r[1], r[2]), "headsT": (b * nh, r[1], r[2])}[v.form]
    if isinstance(v, Scores):
        return (b * v.rest[0],) + v.rest[1:] if v.merged else (b,) + tuple(v.rest)
    if isinstance(v, RopePart):
        s = onnx_shape(v.view, b)
        return s[:-1] + (v.rest[-1],)
    raise ValueError("no shape for %s" % v.desc())


def shape_desc(v):
    """The symbolic ONNX shape of a value, for messages: [batch, 7, 64], [batch*4, 7, 16], ..."""
    if isinstance(v, ROWSLIKE):
        return lay_desc(v.lay, v.rest)
    s2, s3 = onnx_shape(v, 2), onnx_shape(v, 3)
    dims = []
    for x, y in zip(s2, s3):
        dims.append(str(x) if x == y else "batch" if y - x == 1 else "batch*%d" % (y - x))
    return "[%s]" % ", ".join(dims)
