#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hkc import onnx: an ONNX model (as torch.onnx.export writes BERT-, GPT-2- and Llama-style
blocks) -> an hkc spec (YAML) and a safetensors file with the params it needs.

usage: hkc_import_onnx.py MODEL.onnx -o SPEC.yaml --weights-out W.safetensors
                          [--name N] [--batch-sizes 1,8] [--dtype f32|f16|bf16]
                          [--padding-mask-as lengths|mask] [--seq N] [--dim NAME=N ...]

Exit 0 on success; 1 with one line `error: ...` (naming the first ONNX node that cannot be
mapped, its op type and its inputs) otherwise. docs/IMPORT.md says what is mapped.

How it works: the nodes are walked in graph order. Every node whose inputs are all known
constants is evaluated with NumPy (shape arithmetic, masks, rotary tables), twice: with the
batch dim set to 2 and to 3, so that values depending on the batch size (Reshape targets
built from Shape(x)) are told apart from real constants. Every other value carries a layout:
rows [batch, seq, width] (an hkc tensor, or a lazy element-wise expression over hkc tensors,
recognised as gelu / gelu_tanh / tanh / layernorm / rmsnorm / silu / add / mul when something
needs it), a view of rows as heads ([b, t, nh, d], transposed, K transposed, repeated for
grouped-query attention, scaled), attention scores and probabilities. Q @ K^T, scale, mask, Softmax and
@ V become one hkc attention node; rotate-half rotary becomes rope. Integer (and mask)
inputs [batch, seq] are Sources: a Gather of a table by one is an embedding; values computed
from one are NumPy functions of it (MaskFn), probed where they meet the attention scores and
mapped onto attention's lengths (right padding assumed) or mask.
"""
import argparse
import hashlib
import json
import math
import os
import re
import struct
import sys

try:
    import numpy as np
except ImportError:  # one line, as every other error (docs/IMPORT.md), not a traceback
    sys.stderr.write("hkc import onnx: NumPy is needed and %s cannot import it (Debian: apt install "
                     "python3-numpy; or set HKC_PYTHON to an interpreter that has it)\n" % sys.executable)
    sys.exit(1)

B0, B1 = 2, 3  # the two batch sizes the constant folding runs with
MASK_PROBE_ALL = 64  # up to this seq a padding mask is probed with every length; beyond, 16 of them


class ImportError_(Exception):
    pass


def fail(msg):
    raise ImportError_(msg)


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
    """An hkc tensor [batch, *rest]."""

    def __init__(self, name, rest):
        self.name, self.rest = name, tuple(rest)

    def desc(self):
        return "tensor [batch, %s]" % ", ".join(map(str, self.rest))


class RowSlice:
    """Columns [start, start+length) of the last axis of an hkc tensor (Split / Slice)."""

    def __init__(self, base, start, length):
        self.base, self.start, self.length = base, start, length
        self.rest = base.rest[:-1] + (length,)

    def desc(self):
        return "columns %d..%d of %s" % (self.start, self.start + self.length, self.base.name)


class Expr:
    """A lazy element-wise expression over rows values and constants."""

    def __init__(self, op, args, rest, node):
        self.op, self.args, self.rest, self.node = op, args, tuple(rest), node

    def desc(self):
        return "element-wise %s expression" % self.op


class View:
    """Rows src [b, t, nh*d] seen as heads. form: split [t, nh, d], heads [nh, t, d],
    headsT [nh, d, t], unsq [nh, 1, t, d], expand [nh, rep, t, d]. scale: a pending
    scalar factor; rep: grouped-query repeat (nh counts the repeated heads)."""

    def __init__(self, src, nh, d, form, scale=1.0, rep=1):
        self.src, self.nh, self.d, self.form, self.scale, self.rep = src, nh, d, form, scale, rep
        t = src.rest[0]
        kv = nh // rep
        self.rest = {"split": (t, nh, d), "heads": (nh, t, d), "headsT": (nh, d, t),
                     "unsq": (kv, 1, t, d), "expand": (kv, rep, t, d)}[form]

    def like(self, **kw):
        a = dict(src=self.src, nh=self.nh, d=self.d, form=self.form, scale=self.scale, rep=self.rep)
        a.update(kw)
        return View(**a)

    def desc(self):
        return "heads view (%s) of %s" % (self.form, getattr(self.src, "name", self.src.desc()))


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
        self.rest = (q.nh, q.rest[1], k.rest[2])

    def like(self, **kw):
        a = dict(q=self.q, k=self.k, scale=self.scale, causal=self.causal, probs=self.probs,
                 lengths=self.lengths, mask=self.mask)
        a.update(kw)
        return Scores(**a)

    def desc(self):
        return "attention %s" % ("probabilities" if self.probs else "scores")


ROWSLIKE = (Rows, RowSlice, Expr)

# ----------------------------------------------------------------------------- folding


def onnx_np_dtype(code):
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code))
    except AttributeError:
        return np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[code])


def norm_axes(axes, rank):
    return sorted(a + rank if a < 0 else a for a in axes)


def np_slice(x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    sl = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + x.ndim if a < 0 else a
        n = x.shape[a]
        s, e = int(s), int(e)
        if st > 0:
            s = max(0, min(n, s + n if s < 0 else s))
            e = max(0, min(n, e + n if e < 0 else e))
        else:
            s = max(-1, min(n - 1, s + n if s < 0 else s))
            e = max(-1, min(n - 1, e + n if e < 0 else e))
            if e < 0:
                e = None
        sl[a] = slice(s, e, st)
    return x[tuple(sl)]


def reshape_target(shape, target, allowzero=0):
    out = [int(v) for v in target]
    for i, v in enumerate(out):
        if v == 0 and not allowzero:
            out[i] = shape[i]
    if -1 in out:
        known = int(np.prod([v for v in out if v != -1]))
        out[out.index(-1)] = int(np.prod(shape)) // max(known, 1)
    return out


def fold(op, attrs, ins, n_out):
    """NumPy evaluation of one node on constant inputs; None when the op is not foldable."""
    a = attrs
    x = ins[0] if ins else None
    if op == "Identity":
        return [x]
    if op == "Cast":
        return [x.astype(onnx_np_dtype(a["to"]))]
    if op == "Shape":
        s = np.array(x.shape, dtype=np.int64)
        return [s[a.get("start", 0):a.get("end", len(s))]]
    if op == "Gather":
        return [np.take(x, ins[1].astype(np.int64), axis=a.get("axis", 0))]
    if op == "Unsqueeze":
        axes = ins[1] if len(ins) > 1 else a["axes"]
        axes = norm_axes([int(v) for v in np.ravel(axes)], x.ndim + len(np.ravel(axes)))
        for ax in axes:
            x = np.expand_dims(x, ax)
        return [x]
    if op == "Squeeze":
        axes = ins[1] if len(ins) > 1 else a.get("axes")
        if axes is None:
            return [np.squeeze(x)]
        return [np.squeeze(x, axis=tuple(norm_axes([int(v) for v in np.ravel(axes)], x.ndim)))]
    if op == "Concat":
        return [np.concatenate(ins, axis=a["axis"])]
    if op == "Reshape":
        return [x.reshape(reshape_target(x.shape, ins[1], a.get("allowzero", 0)))]
    if op == "Transpose":
        return [np.transpose(x, a.get("perm"))]
    if op == "Expand":
        shape = np.broadcast_shapes(x.shape, tuple(int(v) for v in ins[1]))
        return [np.broadcast_to(x, shape).copy()]
    if op == "ConstantOfShape":
        v = a.get("value", np.zeros(1, np.float32))
        return [np.full(tuple(int(s) for s in ins[0]), v.ravel()[0], dtype=v.dtype)]
    if op == "Slice":
        return [np_slice(x, ins[1], ins[2], ins[3] if len(ins) > 3 else None, ins[4] if len(ins) > 4 else None)]
    if op == "Range":
        return [np.arange(ins[0], ins[1], ins[2]).astype(ins[0].dtype)]
    if op == "Trilu":
        k = int(ins[1]) if len(ins) > 1 else 0
        return [np.triu(x, k) if a.get("upper", 1) else np.tril(x, k)]
    if op == "Split":
        axis = a.get("axis", 0)
        sizes = ins[1] if len(ins) > 1 else a.get("split")
        if sizes is None:
            return list(np.split(x, n_out, axis=axis))
        return list(np.split(x, np.cumsum([int(s) for s in sizes])[:-1], axis=axis))
    if op == "Where":
        return [np.where(ins[0], ins[1], ins[2])]
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power,
              "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
              "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
              "Max": np.maximum, "Min": np.minimum, "MatMul": np.matmul}
    if op in binary:
        r = binary[op](ins[0], ins[1])
        if op == "Pow":
            r = r.astype(ins[0].dtype)
        return [np.asarray(r)]
    if op == "Div":
        if ins[0].dtype.kind in "iu":
            return [np.trunc(ins[0] / ins[1]).astype(ins[0].dtype)]
        return [np.asarray(ins[0] / ins[1]).astype(ins[0].dtype)]
    unary = {"Neg": np.negative, "Sqrt": np.sqrt, "Cos": np.cos, "Sin": np.sin, "Exp": np.exp,
             "Not": np.logical_not, "Abs": np.abs, "Tanh": np.tanh, "Floor": np.floor, "Ceil": np.ceil,
             "Reciprocal": lambda v: 1 / v, "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
             "Erf": np.vectorize(math.erf)}
    if op in unary:
        return [np.asarray(unary[op](x)).astype(x.dtype)]
    if op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"):
        axes = a.get("axes", ins[1] if len(ins) > 1 else None)
        axes = None if axes is None else tuple(int(v) for v in np.ravel(axes))
        f = {"ReduceMean": np.mean, "ReduceSum": np.sum, "ReduceMax": np.max, "ReduceMin": np.min,
             "ReduceProd": np.prod}[op]
        return [np.asarray(f(x, axis=axes, keepdims=bool(a.get("keepdims", 1)))).astype(x.dtype)]
    if op == "Einsum":
        return [np.einsum(a["equation"].decode() if isinstance(a["equation"], bytes) else a["equation"], *ins)]
    return None


# ----------------------------------------------------------------------------- the importer


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    s = re.sub(r"_+", "_", s)
    if not s or not re.match(r"[A-Za-z_]", s[0]):
        s = "t_" + s
    if s == "batch":
        s = "batch_"
    return s[:200]


def close(a, b, tol=1e-5):
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-30)


class Importer:
    def __init__(self, model, padding_mask="lengths"):
        self.model = model
        self.padding_mask = padding_mask  # what a [batch, seq] padding mask becomes: "lengths" or "mask"
        self.g = model.graph
        self.vals = {}
        self.nodes = []  # hkc node dicts, in order
        self.params = {}  # hkc name -> np array (f32)
        self.param_origin = {}  # hkc name -> ONNX name
        self.inputs = {}  # hkc name -> rest
        self.input_dtype = {}  # hkc name -> "i32" for the integer inputs
        self.input_note = {}  # hkc name -> a comment for the spec
        self.sources = []  # the Source inputs (ids, masks)
        self.used_names = set()
        self.producer = {}  # hkc tensor -> node dict
        self.memo = {}
        self.cur = None

    # names
    def fresh(self, base):
        base = sanitize(base)
        name, i = base, 1
        while name in self.used_names:
            i += 1
            name = "%s_%d" % (base, i)
        self.used_names.add(name)
        return name

    def emit(self, op, ins, out_base, rest, **keys):
        node = {"name": self.fresh("n_" + out_base), "op": op, "in": list(ins)}
        node.update(keys)
        out = self.fresh(out_base)
        node["out"] = out
        self.nodes.append(node)
        self.producer[out] = node
        return Rows(out, rest)

    def param(self, const, base, value=None):
        value = const.static() if value is None else value
        if value is None:
            fail("a weight depends on the batch size")
        origin = const.origin or base
        value = np.ascontiguousarray(value, dtype=np.float32)
        key = ("param", origin, value.shape, hashlib.sha1(memoryview(value).cast("B")).hexdigest())
        if key in self.memo:
            return self.memo[key]
        name = self.fresh(origin)
        self.params[name] = value
        self.param_origin[name] = origin
        self.memo[key] = name
        return name

    # errors
    def unsupported(self, why=""):
        n = self.cur
        ins = []
        for i in n.input:
            v = self.vals.get(i)
            ins.append("'%s' (%s)" % (i, v.desc() if v is not None else "absent" if not i else "unknown"))
        msg = "unsupported node %s '%s' (inputs: %s)" % (n.op_type, n.name or "?", ", ".join(ins) or "none")
        fail(msg + (": " + why if why else ""))

    def const_in(self, i, allow_batch=False):
        v = self.vals.get(self.cur.input[i]) if i < len(self.cur.input) else None
        if not isinstance(v, Const):
            return None
        s = v.static()
        if s is None and not allow_batch:
            return None
        return s

    def scalar(self, v):
        if isinstance(v, Const):
            s = v.static()
            if s is not None and s.size == 1 and s.dtype.kind in "fiu":
                return float(s.ravel()[0])
        return None

    # ------------------------------------------------------------------ run
    def run(self):
        import onnx

        g = self.g
        for init in g.initializer:
            arr = onnx.numpy_helper.to_array(init)
            self.vals[init.name] = Const(arr, arr, origin=init.name)
        inits = set(self.vals)
        for inp in g.input:
            if inp.name in inits:
                continue
            tt = inp.type.tensor_type
            dt = onnx_np_dtype(tt.elem_type)
            dims = list(tt.shape.dim)
            got = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
            static = len(dims) >= 2 and all(d.HasField("dim_value") for d in dims[1:])
            if dt.kind in "iub":  # token ids or a padding mask [batch, seq]
                if len(dims) != 2 or not static or dt.kind == "u" and dt.itemsize > 4:
                    fail("input '%s' (%s %s): an integer input must be [batch, seq] with a static seq (token ids "
                         "or a padding mask)" % (inp.name, onnx.TensorProto.DataType.Name(tt.elem_type), got))
            elif dt.kind != "f":
                fail("input '%s' has element type %s: only float and integer inputs are mapped" % (
                    inp.name, onnx.TensorProto.DataType.Name(tt.elem_type)))
            elif len(dims) in (2, 4) and static:  # a float padding mask [batch, seq] or additive mask
                pass
            elif len(dims) != 3 or not static:
                fail("input '%s' must be [batch, seq, hidden] with static seq and hidden (or a mask [batch, seq] / "
                     "[batch, heads, seq, seq], or int token ids [batch, seq]; got %s)" % (inp.name, got))
            rest = tuple(d.dim_value for d in dims[1:])
            if len(dims) != 3:
                src = Source(inp.name, dt, rest)
                self.sources.append(src)
                self.vals[inp.name] = MaskFn(src, lambda m, w: m, raw=True)
                continue
            name = self.fresh(inp.name)
            self.inputs[name] = rest
            self.vals[inp.name] = Rows(name, rest)
        for o in g.output:
            self.used_names.add(sanitize(o.name))
        for n in g.node:
            self.cur = n
            self.step(n)
        outs = []
        for o in g.output:
            v = self.vals.get(o.name)
            self.cur = None
            if isinstance(v, Const):
                fail("output '%s' is a constant" % o.name)
            if not isinstance(v, ROWSLIKE):
                fail("output '%s' is a %s, not a [batch, seq, width] tensor" % (o.name, v.desc()))
            r = self.materialize(v)
            if r.name in self.inputs:
                fail("output '%s' is the input itself" % o.name)
            outs.append((o.name, r.name))
        self.dce([r for _, r in outs])
        # rename the output tensors after the ONNX outputs
        for onnx_name, hk in outs:
            want = sanitize(onnx_name)
            if want != hk and want not in [h for _, h in outs]:
                self.rename(hk, want)
                hk = want
            self.outputs.append(hk)
        return self

    def rename(self, old, new):
        for node in self.nodes:
            for k, v in list(node.items()):
                if k == "in":
                    node["in"] = [new if t == old else t for t in v]
                elif k in ("out", "bias", "mul", "residual") and v == old:
                    node[k] = new

    def dce(self, outs):
        live = set(outs)
        keep = []
        for node in reversed(self.nodes):
            if node["out"] in live:
                keep.append(node)
                for k in ("in", "bias", "gamma", "beta", "mul", "residual", "lengths", "mask", "pos"):
                    v = node.get(k)
                    for t in (v if isinstance(v, list) else [v] if v else []):
                        live.add(t)
        self.nodes = list(reversed(keep))
        self.params = {k: v for k, v in self.params.items() if k in live}
        unused = [k for k in self.inputs if k not in live]
        unused += ["%s (read by no embedding or attention mask)" % s.onnx_name for s in self.sources
                   if not (s.ids or s.lengths or s.mask)]
        if unused:
            fail("input(s) %s are not used by the outputs" % ", ".join(unused))
        self.outputs = []

    # ------------------------------------------------------------------ one node
    def attrs(self, n):
        import onnx

        out = {}
        for at in n.attribute:
            v = onnx.helper.get_attribute_value(at)
            if at.type == onnx.AttributeProto.TENSOR:
                v = onnx.numpy_helper.to_array(v)
            out[at.name] = v
        return out

    def step(self, n):
        op = n.op_type
        if n.domain not in ("", "ai.onnx"):
            self.unsupported("custom domain '%s'" % n.domain)
        a = self.attrs(n)
        if op == "Constant":
            v = a.get("value")
            if v is None:
                for k in ("value_float", "value_int", "value_floats", "value_ints"):
                    if k in a:
                        v = np.array(a[k], dtype=np.float32 if "float" in k else np.int64)
            if v is None:
                self.unsupported("constant kind")
            self.vals[n.output[0]] = Const(v, v)
            return
        ins = [self.vals.get(i) if i else None for i in n.input]
        for i, v in zip(n.input, ins):
            if i and v is None:
                self.unsupported("input '%s' is not produced before this node" % i)
        present = [v for v in ins if v is not None]
        if op == "Shape" and isinstance(ins[0], MaskFn):
            s0, s1 = (np.array(self.probe_eval(ins[0], w).shape, np.int64) for w in (0, 1))
            st, en = a.get("start", 0), a.get("end", len(s0))
            self.vals[n.output[0]] = Const(s0[st:en], s1[st:en])
            return
        if any(isinstance(v, MaskFn) for v in present) and all(isinstance(v, (Const, MaskFn)) for v in present) \
                and not (op == "Gather" and isinstance(ins[0], Const) and isinstance(ins[1], MaskFn)):
            self.mask_fn(n, op, a, ins)
            return
        if op == "Shape" and not isinstance(ins[0], Const):
            v = ins[0]
            s0 = np.array((B0,) + tuple(v.rest), np.int64)
            s1 = np.array((B1,) + tuple(v.rest), np.int64)
            st, en = a.get("start", 0), a.get("end", len(s0))
            self.vals[n.output[0]] = Const(s0[st:en], s1[st:en])
            return
        if all(isinstance(v, Const) for v in present) and present:
            try:
                r0 = fold(op, a, [None if v is None else v.v0 for v in ins], len(n.output))
                r1 = fold(op, a, [None if v is None else v.v1 for v in ins], len(n.output)) if r0 is not None else None
            except Exception as e:  # noqa: BLE001 - reported with the node
                self.unsupported("evaluating it on constants failed: %s" % e)
            if r0 is None:
                self.unsupported("no mapping for this op")
            origin = present[0].origin if op == "Identity" else None
            table = None
            if op == "Gather" and present[0].origin and a.get("axis", 0) == 0 and ins[0].v0.ndim == 2 \
                    and ins[1].static_b() is not None:
                idx = ins[1].static_b().reshape(-1)
                origin = "%s[%s]" % (present[0].origin, "%d:%d" % (idx[0], idx[-1] + 1) if idx.size and np.array_equal(
                    idx, np.arange(idx[0], idx[0] + idx.size)) else "...")
                if idx.size and np.array_equal(idx, np.arange(idx.size)):
                    table = ins[0]  # the first rows of an initializer: a position embedding table
            for o, x0, x1 in zip(n.output, r0, r1):
                self.vals[o] = Const(x0, x1, origin)
                self.vals[o].table = table
            return
        h = getattr(self, "op_" + op, None)
        if h is None:
            self.unsupported("no mapping for this op")
        res = h(n, a, ins)
        if res is None:
            srcs = sorted({v.src.onnx_name for v in present if isinstance(v, MaskFn)})
            self.unsupported("input %s is read here; hkc reads an integer or mask input only as embedding ids "
                             "or as attention's key lengths / additive mask" % ", ".join(
                                 "'%s'" % x for x in srcs) if srcs else "")
        if not isinstance(res, (list, tuple)):
            res = [res]
        for o, v in zip(n.output, res):
            self.vals[o] = v

    # ------------------------------------------------------------------ masks and ids
    def probe(self, src, w, lengths=None):
        """A value of src with batch B0 (w = 0) or B1: leading ones (lengths[b] of them; all when
        None; lengths may also be the rows of 0/1 themselves) for a [batch, seq] mask, zeros for an
        additive mask."""
        b = B0 if w == 0 else B1
        if len(src.rest) != 1:
            return np.zeros((b,) + src.rest, src.dtype)
        seq = src.rest[0]
        lengths = [seq] * b if lengths is None else lengths
        if np.ndim(lengths) == 2:
            return np.asarray(lengths).astype(src.dtype)
        m = (np.arange(seq)[None, :] < np.array(lengths)[:, None])
        return m.astype(src.dtype)

    def probe_eval(self, f, w, lengths=None):
        return np.asarray(f.ev(self.probe(f.src, w, lengths), w))

    def mask_fn(self, n, op, a, ins):
        """A node over a Source-derived value and constants: another MaskFn (one Source only)."""
        srcs = {id(v.src): v.src for v in ins if isinstance(v, MaskFn)}
        if len(srcs) != 1:
            self.unsupported("it combines values computed from two inputs")

        def make(k):
            def ev(m, w):
                vals = [None if v is None else v.ev(m, w) if isinstance(v, MaskFn) else (v.v0 if w == 0 else v.v1)
                        for v in ins]
                r = fold(op, a, vals, len(n.output))
                if r is None:
                    raise ValueError("no NumPy form")
                return r[k]
            return ev

        src = next(iter(srcs.values()))
        for k, o in enumerate(n.output):
            f = MaskFn(src, make(k), node=n)
            try:
                self.probe_eval(f, 0)
                self.probe_eval(f, 1)
            except Exception as e:  # noqa: BLE001 - reported with the node
                self.unsupported("no mapping for this op on a value computed from input '%s' (%s)" % (
                    src.onnx_name, str(e).splitlines()[0] if str(e) else type(e).__name__))
            self.vals[o] = f

    def is_source(self, f):
        """f is its source unchanged (up to Reshape to the same shape, Identity, Cast between
        integer types): checked on random integer probes at both batch sizes."""
        if f.raw:
            return True
        rng = np.random.default_rng(19)
        for w, b in ((0, B0), (1, B1)):
            m = rng.integers(0, 1 << 20, (b,) + f.src.rest).astype(f.src.dtype)
            try:
                r = np.asarray(f.ev(m, w))
            except Exception:  # noqa: BLE001 - not the identity
                return False
            if r.shape != m.shape or not np.array_equal(r, m):
                return False
        return True

    def op_Gather(self, n, a, ins):
        """Gather(table, ids) of an initializer [vocab, hidden] by an integer input: embedding."""
        t, ids = ins
        tv = t.static() if isinstance(t, Const) else None
        if not isinstance(ids, MaskFn) or tv is None or tv.ndim != 2 or a.get("axis", 0) != 0:
            return None
        src = ids.src
        if src.dtype.kind not in "iu" or len(src.rest) != 1:
            self.unsupported("embedding ids must be an integer input [batch, seq]")
        if not self.is_source(ids):
            self.unsupported("the ids are computed from input '%s', not the input itself (hkc's embedding reads an "
                             "input's ids as they are)" % src.onnx_name)
        if src.ids is None:
            src.ids = self.fresh(src.onnx_name)
            self.inputs[src.ids] = src.rest
            self.input_dtype[src.ids] = "i32"
            if src.dtype != np.int32:
                self.input_note[src.ids] = "%s in the ONNX model: token ids as int32" % src.dtype
        p = self.param(t, n.name + "_weight")
        return self.emit("embedding", [src.ids, p], n.output[0], src.rest + (tv.shape[1],))

    def add_mask_fn(self, s, f):
        """scores + f(source): attention's mask (f is an additive mask input as it is) or lengths
        (f turns a [batch, seq] padding mask of leading ones into 0 / large negative biases)."""
        src, (nh, t, tk) = f.src, s.rest
        if s.lengths is not None or s.mask is not None:
            self.unsupported("a second mask on the same attention scores")
        if len(src.rest) == 3:
            if not f.raw or src.dtype.kind != "f":
                self.unsupported("the additive mask input '%s' is changed before it is added to the scores (only "
                                 "the input itself maps onto attention's mask)" % src.onnx_name)
            if src.rest[0] not in (1, nh) or src.rest[1:] != (t, tk):
                self.unsupported("the additive mask input '%s' is not [batch, 1 or %d, %d, %d]" % (
                    src.onnx_name, nh, t, tk))
            if src.mask is None:
                src.mask = self.fresh(src.onnx_name)
                self.inputs[src.mask] = src.rest
            return s.like(mask=src.mask)
        seq = src.rest[0]
        what = "the mask computed from input '%s'" % src.onnx_name
        if seq != tk:
            self.unsupported("%s has %d keys, the scores %d" % (what, seq, tk))
        ckey = ("maskfn", f.key, nh, t, tk)
        if ckey not in self.memo:  # every layer adds the same mask: probed once
            self.memo[ckey] = (f, self.probe_mask_fn(f, s, what))
        causal = self.memo[ckey][1]
        if self.padding_mask == "mask":
            if src.mask is None:
                src.mask = self.fresh(src.onnx_name + "_bias")
                self.inputs[src.mask] = (1, t, tk)
                self.input_note[src.mask] = (
                    "replaces ONNX input '%s' [batch, %d]: added to the scaled scores, [b, 0, i, j] = 0 where "
                    "%s[b, j] is 1, -inf where it is 0, the same for every query row i%s" % (
                        src.onnx_name, seq, src.onnx_name, " (the causal masking is the node's causal: true)"
                        if causal or s.causal else ""))
            return s.like(mask=src.mask, causal=s.causal or causal)
        if src.lengths is None:
            src.lengths = self.fresh(src.onnx_name + "_lengths")
            self.inputs[src.lengths] = ()
            self.input_dtype[src.lengths] = "i32"
            self.input_note[src.lengths] = ("replaces ONNX input '%s' [batch, %d]: the number of leading ones of each "
                                            "row (right padding assumed: 1 for j < len, 0 after)" % (
                                                src.onnx_name, seq))
        return s.like(lengths=src.lengths, causal=s.causal or causal)

    def probe_mask_fn(self, f, s, what):
        """Checks on probe masks that f is a key padding mask: 0 / <= -1e4 only; with all ones,
        nothing or the causal triangle masked; with the first L entries of a row set, exactly the
        keys j >= L (and the causal ones); with --padding-mask-as mask, on random rows of ones and
        zeros, exactly the keys whose entry is 0. Returns whether it masks the causal triangle."""
        (nh, t, tk), seq = s.rest, f.src.rest[0]
        upper = np.triu(np.ones((t, tk), bool), 1)

        def masked(w, lengths):
            b = B0 if w == 0 else B1
            v = self.probe_eval(f, w, lengths)
            try:
                full = np.broadcast_to(v, np.broadcast_shapes(v.shape, (b, 1, t, tk)))
            except ValueError:
                self.unsupported("%s (%s) does not broadcast to the scores [batch, %d, %d, %d]" % (
                    what, list(v.shape), nh, t, tk))
            if full.ndim != 4 or full.shape[1] not in (1, nh):
                self.unsupported("%s (%s) does not broadcast to the scores" % (what, list(v.shape)))
            if not np.all((full == 0) | (full <= -1e4)):
                self.unsupported("%s is not 0 (keep) / <= -1e4 (masked) for a mask of ones and zeros" % what)
            return full <= -1e4

        ones = masked(0, None)
        causal = bool(np.any(ones))
        if causal and not np.array_equal(ones, np.broadcast_to(upper, ones.shape)):
            self.unsupported("%s masks keys of a mask of all ones, and not in the causal pattern" % what)
        lens = list(range(0, seq + 1))
        if seq > MASK_PROBE_ALL:
            lens = sorted({0, 1, 2, 3, seq // 2, seq - 2, seq - 1, seq} |
                          {int(v) for v in np.random.default_rng(19).integers(0, seq + 1, 8)})
        probes = [(0, [la, lb]) for la, lb in zip(lens, lens[::-1])] + [(1, [seq, 1, max(1, seq // 2)])]
        for w, lengths in probes:
            want = np.arange(tk)[None, None, None, :] >= np.array(lengths)[:, None, None, None]
            want = want | upper[None, None] if causal else want
            got = masked(w, lengths)
            if not np.array_equal(got, np.broadcast_to(want, got.shape)):
                self.unsupported("%s is not a key padding mask: with the first L entries of a row set, it does not "
                                 "mask exactly the keys j >= L%s" % (what, " (and the causal ones)" if causal else ""))
        if self.padding_mask == "mask":
            rng = np.random.default_rng(19)
            for _ in range(8):
                rows = rng.integers(0, 2, (B0, seq))
                want = (rows == 0)[:, None, None, :]
                want = want | upper[None, None] if causal else want
                got = masked(0, rows)
                if not np.array_equal(got, np.broadcast_to(want, got.shape)):
                    self.unsupported("%s does not mask exactly the keys whose entry is 0 for masks of ones and zeros "
                                     "that are not leading ones (--padding-mask-as lengths maps right padding)" % what)
        return causal

    # ------------------------------------------------------------------ element-wise
    def ew(self, op, ins, n):
        args, rest = [], None
        for v in ins:
            if isinstance(v, ROWSLIKE):
                args.append(v)
                rest = v.rest if rest is None else np.broadcast_shapes(rest, v.rest)
        for i, v in enumerate(ins):
            if isinstance(v, Const):
                s = v.static_b()
                if s is None:
                    return None
                c = Const(s, s, v.origin)
                c.table = v.table
                args.insert(i, c)
            elif not isinstance(v, ROWSLIKE):
                return None
        full = (1,) + tuple(rest)
        for v in args:
            if isinstance(v, Const):
                try:
                    if np.broadcast_shapes(full, v.v0.shape) != full:
                        return None
                except ValueError:
                    return None
        return Expr(op, args, tuple(rest), n)

    def binary(self, n, a, ins, op):
        x, y = ins
        sx, sy = self.scalar(x), self.scalar(y)
        # attention scores: scale and mask
        if isinstance(x, Scores) and not x.probs and op in ("Mul", "Div") and sy is not None:
            return x.like(scale=x.scale * (sy if op == "Mul" else 1 / sy))
        if isinstance(y, Scores) and not y.probs and op == "Mul" and sx is not None:
            return y.like(scale=y.scale * sx)
        if op == "Add" and (isinstance(x, Scores) or isinstance(y, Scores)):
            s, m = (x, y) if isinstance(x, Scores) else (y, x)
            if not s.probs and isinstance(m, MaskFn):
                return self.add_mask_fn(s, m)
            if s.probs or not isinstance(m, Const) or m.static() is None:
                return None
            return self.add_mask(s, m.static())
        # heads views: a scale, rotary
        if isinstance(x, View) or isinstance(y, View) or isinstance(x, RopePart) or isinstance(y, RopePart):
            return self.view_binary(op, x, y, sx, sy)
        if op in ("Add", "Sub", "Mul", "Div", "Pow"):
            return self.ew(op, ins, n)
        return None

    def op_Add(self, n, a, ins):
        return self.binary(n, a, ins, "Add")

    def op_Sub(self, n, a, ins):
        return self.binary(n, a, ins, "Sub")

    def op_Mul(self, n, a, ins):
        return self.binary(n, a, ins, "Mul")

    def op_Div(self, n, a, ins):
        return self.binary(n, a, ins, "Div")

    def op_Pow(self, n, a, ins):
        if isinstance(ins[0], ROWSLIKE) and self.scalar(ins[1]) is not None:
            return self.ew("Pow", ins, n)
        return None

    def unary(self, n, ins, op):
        if isinstance(ins[0], ROWSLIKE):
            return Expr(op, [ins[0]], ins[0].rest, n)
        return None

    def op_Sqrt(self, n, a, ins):
        return self.unary(n, ins, "Sqrt")

    def op_Reciprocal(self, n, a, ins):
        return self.unary(n, ins, "Reciprocal")

    def op_Erf(self, n, a, ins):
        return self.unary(n, ins, "Erf")

    def op_Tanh(self, n, a, ins):
        return self.unary(n, ins, "Tanh")

    def op_Sigmoid(self, n, a, ins):
        return self.unary(n, ins, "Sigmoid")

    def op_Relu(self, n, a, ins):
        return self.unary(n, ins, "Relu")

    def op_Neg(self, n, a, ins):
        x = ins[0]
        if isinstance(x, RopePart) and x.kind == "half" and x.which == 1:
            return RopePart("neghalf", x.view, 1)
        return self.unary(n, ins, "Neg")

    def op_ReduceMean(self, n, a, ins):
        x = ins[0]
        axes = a.get("axes")
        if axes is None and len(n.input) > 1:
            axes = self.const_in(1)
        if not isinstance(x, ROWSLIKE) or axes is None or a.get("keepdims", 1) != 1:
            return None
        rank = len(x.rest) + 1
        if norm_axes([int(v) for v in np.ravel(axes)], rank) != [rank - 1]:
            return None
        return Expr("Mean", [x], x.rest[:-1] + (1,), n)

    def op_Max(self, n, a, ins):
        """max(scores, large negative) (older Hugging Face Llama clamps masked scores so): nothing."""
        if len(ins) == 2:
            s, c = (ins[0], ins[1]) if isinstance(ins[0], Scores) else (ins[1], ins[0])
            v = self.scalar(c)
            if isinstance(s, Scores) and not s.probs and v is not None and v <= -1e4:
                return s
        return None

    def op_Identity(self, n, a, ins):
        return ins[0]

    def op_Cast(self, n, a, ins):
        if onnx_np_dtype(a["to"]).kind != "f":
            return None
        return ins[0]  # float -> float: the spec's dtype decides

    def op_Dropout(self, n, a, ins):
        return [ins[0]]

    # ------------------------------------------------------------------ layers
    def op_MatMul(self, n, a, ins):
        x, w = ins
        if isinstance(x, ROWSLIKE) and isinstance(w, Const):
            wv = w.static()
            if wv is None or wv.ndim != 2 or wv.shape[0] != x.rest[-1]:
                return None
            xr = self.materialize(x)
            p = self.param(w, n.name + "_weight")
            return self.emit("gemm", [xr.name, p], n.output[0], xr.rest[:-1] + (wv.shape[1],))
        if isinstance(x, View) and isinstance(w, View):
            if x.form == "heads" and w.form == "headsT" and x.nh == w.nh and x.d == w.d:
                return Scores(x, w, x.scale * w.scale)
            return None
        if isinstance(x, Scores) and x.probs and isinstance(w, View):
            return self.attention(x, w)
        return None

    def op_Gemm(self, n, a, ins):
        return None

    def op_LayerNormalization(self, n, a, ins):
        x = ins[0]
        if not isinstance(x, ROWSLIKE) or a.get("axis", -1) not in (-1, len(x.rest)) or len(n.output) > 1 and any(n.output[1:]):
            return None
        c = x.rest[-1]
        g = self.const_in(1)
        b = self.const_in(2) if len(n.input) > 2 and n.input[2] else np.zeros(c, np.float32)
        if g is None or b is None or g.size != c or b.size != c:
            return None
        xr = self.materialize(x)
        gp = self.param(ins[1], n.name + "_gamma", g.reshape(c))
        bp = self.param(ins[2] if len(n.input) > 2 and n.input[2] else Const(b, b), n.name + "_beta", b.reshape(c))
        return self.emit("layernorm", [xr.name], n.output[0], xr.rest, gamma=gp, beta=bp,
                         eps=float(a.get("epsilon", 1e-5)))

    def op_Softmax(self, n, a, ins):
        x = ins[0]
        axis = a.get("axis", -1)
        if isinstance(x, Scores) and not x.probs and axis in (-1, 3):
            return x.like(probs=True)
        if isinstance(x, ROWSLIKE) and axis in (-1, len(x.rest)):
            xr = self.materialize(x)
            return self.emit("softmax", [xr.name], n.output[0], xr.rest)
        return None

    def op_Split(self, n, a, ins):
        x = ins[0]
        if isinstance(x, Expr):
            x = self.materialize(x)
        if not isinstance(x, (Rows, RowSlice)) or a.get("axis", 0) not in (-1, len(x.rest)):
            return None
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
        starts, ends = self.const_in(1), self.const_in(2)
        axes = self.const_in(3) if len(n.input) > 3 and n.input[3] else None
        steps = self.const_in(4) if len(n.input) > 4 and n.input[4] else None
        if starts is None or ends is None or starts.size != 1:
            return None
        if steps is not None and int(np.ravel(steps)[0]) != 1:
            return None
        rank = len(x.rest) + 1 if hasattr(x, "rest") else 0
        axis = int(np.ravel(axes)[0]) if axes is not None else 0
        axis = axis + rank if axis < 0 else axis
        if axis != rank - 1:
            return None
        width = x.rest[-1]
        s, e = int(np.ravel(starts)[0]), int(np.ravel(ends)[0])
        s = max(0, min(width, s + width if s < 0 else s))
        e = max(0, min(width, e + width if e < 0 else e))
        if isinstance(x, View) and x.form in ("heads", "split") and x.d % 2 == 0:
            if (s, e) == (0, x.d // 2):
                return RopePart("half", x, 0)
            if (s, e) == (x.d // 2, x.d):
                return RopePart("half", x, 1)
            return None
        if isinstance(x, (Rows, RowSlice)) and e > s:
            base, off = (x, 0) if isinstance(x, Rows) else (x.base, x.start)
            return RowSlice(base, off + s, e - s)
        return None

    def op_Concat(self, n, a, ins):
        if len(ins) == 2 and all(isinstance(v, RopePart) for v in ins):
            p, q = ins
            if p.kind == "neghalf" and q.kind == "half" and q.which == 0 and p.view is q.view \
                    and a.get("axis") in (-1, len(p.view.rest)):
                return RopePart("rot", p.view)
        return None

    # ------------------------------------------------------------------ views
    def op_Reshape(self, n, a, ins):
        x = ins[0]
        if isinstance(x, Expr):
            x = self.materialize(x)
        if not isinstance(self.vals.get(n.input[1]), Const):
            return None
        c = self.vals[n.input[1]]
        t0 = reshape_target((B0,) + tuple(x.rest), c.v0, a.get("allowzero", 0)) if hasattr(x, "rest") else None
        t1 = reshape_target((B1,) + tuple(x.rest), c.v1, a.get("allowzero", 0)) if hasattr(x, "rest") else None
        if t0 is not None and int(np.prod(t0)) != B0 * int(np.prod(x.rest)):
            self.unsupported("the new shape %s does not fit [batch, %s] (%d elements at batch %d)" % (
                [int(v) for v in c.v0], ", ".join(map(str, x.rest)), B0 * int(np.prod(x.rest)), B0))
        if t0 is None or t0[0] != B0 or t1[0] != B1 or t0[1:] != t1[1:]:
            self.unsupported("the new shape does not keep the batch as its leading dim")
        new = tuple(t0[1:])
        if isinstance(x, (Rows, RowSlice)) and len(new) == 3 and new[0] == x.rest[0] and new[1] * new[2] == x.rest[1]:
            return View(x, new[1], new[2], "split")
        if isinstance(x, View):
            if x.form == "split" and new == (x.rest[0], x.nh * x.d) and x.scale == 1.0 and x.rep == 1:
                return x.src
            if x.form == "expand" and new == (x.nh, x.rest[2], x.d):
                return x.like(form="heads")
        if isinstance(x, ROWSLIKE) and new == x.rest:
            return x
        return None

    def op_Transpose(self, n, a, ins):
        x = ins[0]
        perm = list(a.get("perm", []))
        if not isinstance(x, View) or len(perm) != 4 or perm[0] != 0:
            return None
        p = tuple(perm[1:])
        table = {("split", (2, 1, 3)): "heads", ("split", (2, 3, 1)): "headsT",
                 ("heads", (1, 3, 2)): "headsT", ("heads", (2, 1, 3)): "split",
                 ("headsT", (1, 3, 2)): "heads"}
        form = table.get((x.form, p))
        if form is None:
            return None
        return x.like(form=form)

    def op_Unsqueeze(self, n, a, ins):
        x = ins[0]
        axes = self.const_in(1) if len(n.input) > 1 else a.get("axes")
        if isinstance(x, View) and x.form == "heads" and x.rep == 1 and axes is not None \
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
        if op == "Mul" and isinstance(c, Const) and c.static() is not None and v.form in ("heads", "split"):
            return RopePart("cos", v, table=c.static())
        return None

    def rope_binary(self, op, x, y):
        if op == "Mul":
            r, c = (x, y) if isinstance(x, RopePart) else (y, x)
            if isinstance(r, RopePart) and r.kind == "rot" and isinstance(c, Const) and c.static() is not None:
                return RopePart("sin", r.view, table=c.static())
            return None
        if op == "Add" and isinstance(x, RopePart) and isinstance(y, RopePart):
            kinds = {x.kind: x, y.kind: y}
            if set(kinds) == {"cos", "sin"} and kinds["cos"].view is kinds["sin"].view:
                return self.rope(kinds["cos"].view, kinds["cos"].table, kinds["sin"].table)
        return None

    def table2d(self, v, table):
        """A rotary table broadcast against the view, as [t, d] (the same for every head)."""
        full = np.broadcast_to(table, np.broadcast_shapes(table.shape, (1,) + v.rest))
        full = full.reshape((-1,) + v.rest)
        if not np.all(full == full[:1]):
            return None
        full = full[0]
        if v.form == "heads":
            tab = full[0]
            if not np.allclose(full, tab[None]):
                return None
        else:  # split [t, nh, d]
            tab = full[:, 0]
            if not np.allclose(full, tab[:, None]):
                return None
        return tab.astype(np.float64)

    def rope(self, v, cos_t, sin_t):
        if v.scale != 1.0 or v.rep != 1:
            self.unsupported("rotary on a scaled or repeated heads view")
        c, s = self.table2d(v, cos_t), self.table2d(v, sin_t)
        if c is None or s is None:
            self.unsupported("the rotary tables differ between heads or batch entries")
        t, d = c.shape
        h = d // 2
        if t < 2 or not (np.allclose(c[:, :h], c[:, h:]) and np.allclose(s[:, :h], s[:, h:])):
            self.unsupported("the rotary tables are not rotate-half cos/sin tables")
        # position 1's angles are the inverse frequencies; theta from the first non-trivial one
        ang = np.arctan2(s[1, :h], c[1, :h])
        if h < 2 or not (0 < ang[1] < math.pi):
            self.unsupported("cannot recover the rotary base from the tables")
        raw = float(ang[1]) ** (-d / 2.0)

        def table_err(theta):
            inv = np.float32(1) / np.float32(theta) ** (np.arange(0, d, 2).astype(np.float32) / np.float32(d))
            angle = (np.arange(t).astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)
            want_c = np.concatenate([np.cos(angle)] * 2, axis=1)
            want_s = np.concatenate([np.sin(angle)] * 2, axis=1)
            return max(np.max(np.abs(want_c - c)), np.max(np.abs(want_s - s)))

        # the base as written in the model is usually round: the shortest that fits the tables
        cands = [float("%.*g" % (digits, raw)) for digits in range(1, 8)] + [raw]
        errs = [table_err(th) for th in cands]
        best = min(errs)
        theta = next(th for th, e in zip(cands, errs) if e <= max(2 * best, 1e-6))
        err = table_err(theta)
        if err > 1e-4:
            self.unsupported("the rotary tables do not match hkc rope (theta %.6g, positions from 0): "
                             "max difference %.3g" % (theta, err))
        src = self.materialize(v.src)
        out = self.emit("rope", [src.name], src.name + "_rope", src.rest, heads=v.nh, theta=theta)
        return v.like(src=out)

    def add_mask(self, s, m):
        t, tk = s.rest[1], s.rest[2]
        try:
            full = np.broadcast_to(m, np.broadcast_shapes(m.shape, (1, 1, t, tk)))
        except ValueError:
            return None
        full = full.reshape(-1, t, tk)
        if not np.all(full == full[:1]):
            self.unsupported("the attention mask differs between heads or batch entries")
        mm = full[0]
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
        t, tk = s.rest[1], s.rest[2]
        full = np.broadcast_to(keep, np.broadcast_shapes(keep.shape, (1, 1, t, tk))).reshape(-1, t, tk)
        if not np.all(full == full[:1]):
            self.unsupported("the attention mask differs between heads or batch entries")
        k = full[0]
        if np.all(k):
            return s
        if np.array_equal(k, ~np.triu(np.ones((t, tk), bool), 1)):
            return s.like(causal=True)
        self.unsupported("the attention mask is not causal (hkc attention has causal masking only)")

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
        if all(isinstance(s, RowSlice) for s in srcs) and srcs[0].base is srcs[1].base is srcs[2].base \
                and (srcs[0].start, srcs[1].start, srcs[2].start) == (0, heads * d, (heads + kvh) * d) \
                and srcs[0].base.rest[-1] == (heads + 2 * kvh) * d:
            ins = [srcs[0].base.name]
        else:
            ins = [self.materialize(s).name for s in srcs]
        rest = (q.src.rest[0], heads * d)
        out = self.emit("attention", ins, self.cur.output[0], rest, **keys)
        return View(out, heads, d, "heads")

    # ------------------------------------------------------------------ materialization
    def materialize(self, v):
        if isinstance(v, Rows):
            return v
        key = id(v)
        if key in self.memo:
            return self.memo[key][1]
        if isinstance(v, RowSlice):
            r = self.slice_rows(v)
        elif isinstance(v, Expr):
            r = self.expr_rows(v)
        else:
            fail("internal: cannot materialize %s" % v.desc())
        self.memo[key] = (v, r)  # keep v alive so that its id stays unique
        return r

    def slice_rows(self, v):
        base = v.base
        node = self.producer.get(base.name)
        if not node or node["op"] != "gemm" or node.get("act") or node.get("trans_b"):
            fail("columns %d..%d of '%s' are read on their own, and only a gemm output can be split "
                 "(into gemms over the weight's columns)" % (v.start, v.start + v.length, base.name))
        w = self.params[node["in"][1]]
        cols = slice(v.start, v.start + v.length)
        keys = {}
        wname = self.fresh("%s_c%d_%d" % (node["in"][1], v.start, v.start + v.length))
        self.params[wname] = np.ascontiguousarray(w[:, cols])
        self.param_origin[wname] = "%s[:, %d:%d]" % (self.param_origin[node["in"][1]], v.start, v.start + v.length)
        if node.get("bias"):
            bname = self.fresh("%s_c%d_%d" % (node["bias"], v.start, v.start + v.length))
            self.params[bname] = np.ascontiguousarray(self.params[node["bias"]][cols])
            self.param_origin[bname] = "%s[%d:%d]" % (self.param_origin[node["bias"]], v.start, v.start + v.length)
            keys["bias"] = bname
        return self.emit("gemm", [node["in"][0], wname], "%s_c%d" % (base.name, v.start), base.rest[:-1] + (v.length,),
                         **keys)

    # canonical forms
    def is_leaf(self, x, leaves):
        """x is treated as a whole: already materialized (an hkc tensor), or one of leaves."""
        return id(x) in self.memo or any(self.same(x, y) for y in leaves)

    def prod_form(self, e, leaves=()):
        """e as coef * prod(consts) * prod(factors) / prod(invs)."""
        coef, consts, factors, invs = 1.0, [], [], []

        def walk(x, inv):
            nonlocal coef
            if x is not e and self.is_leaf(x, leaves):
                (invs if inv else factors).append(x)
            elif isinstance(x, Const):
                s = x.static()
                if s.size == 1:
                    coef = coef / float(s.ravel()[0]) if inv else coef * float(s.ravel()[0])
                else:
                    consts.append((1 / s.astype(np.float64) if inv else s, x))
            elif isinstance(x, Expr) and x.op == "Mul":
                walk(x.args[0], inv)
                walk(x.args[1], inv)
            elif isinstance(x, Expr) and x.op == "Div":
                walk(x.args[0], inv)
                walk(x.args[1], not inv)
            elif isinstance(x, Expr) and x.op == "Neg":
                coef = -coef
                walk(x.args[0], inv)
            elif isinstance(x, Expr) and x.op == "Reciprocal":
                walk(x.args[0], not inv)
            else:
                (invs if inv else factors).append(x)

        walk(e, False)
        return coef, consts, factors, invs

    def sum_form(self, e, leaves=()):
        """e as a list of (sign, term) and a constant part."""
        terms, consts = [], []

        def walk(x, sign):
            if x is not e and self.is_leaf(x, leaves):
                terms.append((sign, x))
            elif isinstance(x, Expr) and x.op in ("Add", "Sub"):
                walk(x.args[0], sign)
                walk(x.args[1], sign if x.op == "Add" else -sign)
            elif isinstance(x, Expr) and x.op == "Neg":
                walk(x.args[0], -sign)
            elif isinstance(x, Const):
                consts.append((sign, x))
            else:
                terms.append((sign, x))

        walk(e, 1)
        return terms, consts

    def same(self, a, b):
        if a is b:
            return True
        if isinstance(a, Rows) and isinstance(b, Rows):
            return a.name == b.name
        if isinstance(a, RowSlice) and isinstance(b, RowSlice):
            return a.base.name == b.base.name and a.start == b.start and a.length == b.length
        if isinstance(a, Expr) and isinstance(b, Expr) and a.op == b.op and len(a.args) == len(b.args):
            for x, y in zip(a.args, b.args):
                if isinstance(x, Const) and isinstance(y, Const):
                    if not np.array_equal(x.static(), y.static()):
                        return False
                elif not self.same(x, y):
                    return False
            return True
        return False

    def scalar_sum(self, consts):
        total = 0.0
        for sign, c in consts:
            s = c.static()
            if s.size != 1:
                return None
            total += sign * float(s.ravel()[0])
        return total

    def match_cube(self, e, x):
        """e == x**3 (Pow 3 or x*x*x) with a coefficient: returns the coefficient."""
        coef, consts, factors, invs = self.prod_form(e, [x])
        if consts or invs:
            return None
        if len(factors) == 1 and isinstance(factors[0], Expr) and factors[0].op == "Pow" \
                and self.same(factors[0].args[0], x) and close(self.scalar(factors[0].args[1]) or 0, 3.0):
            return coef
        if len(factors) == 3 and all(self.same(f, x) for f in factors):
            return coef
        if len(factors) == 2:
            for f, g in (factors, factors[::-1]):
                if self.same(f, x) and isinstance(g, Expr) and g.op == "Pow" and self.same(g.args[0], x) \
                        and close(self.scalar(g.args[1]) or 0, 2.0):
                    return coef
        return None

    def match_gelu(self, e):
        """0.5 * x * (1 + erf(x / sqrt 2)) -> ('gelu', x); the tanh form -> ('gelu_tanh', x)."""
        coef, consts, factors, invs = self.prod_form(e)
        if consts or invs or len(factors) != 2 or not close(coef, 0.5, 1e-4):
            return None
        for x, s in (factors, factors[::-1]):
            if not isinstance(s, Expr) or s.op not in ("Add", "Sub"):
                continue
            terms, cs = self.sum_form(s)
            if len(terms) != 1 or terms[0][0] != 1 or not close(self.scalar_sum(cs) or 0, 1.0, 1e-6):
                continue
            f = terms[0][1]
            if not isinstance(f, Expr) or f.op not in ("Erf", "Tanh"):
                continue
            c2, k2, f2, i2 = self.prod_form(f.args[0], [x])
            if k2 or i2 or len(f2) != 1:
                continue
            if f.op == "Erf" and self.same(f2[0], x) and close(c2, 1 / math.sqrt(2), 1e-4):
                return "gelu", x
            if f.op == "Tanh" and close(c2, math.sqrt(2 / math.pi), 1e-4):
                inner, ic = self.sum_form(f2[0], [x])
                if ic or len(inner) != 2:
                    continue
                for (s1, t1), (s2, t2) in (inner, inner[::-1]):
                    if s1 == 1 and s2 == 1 and self.same(t1, x) and close(self.match_cube(t2, x) or 0, 0.044715, 1e-4):
                        return "gelu_tanh", x
        return None

    def match_inv_rms(self, d, x, centered):
        """d == sqrt(mean(x^2) + eps): returns eps (x the centered value for layernorm)."""
        if not isinstance(d, Expr) or d.op != "Sqrt":
            return None
        terms, cs = self.sum_form(d.args[0])
        eps = self.scalar_sum(cs) if cs else 0.0
        if eps is None or len(terms) != 1 or terms[0][0] != 1:
            return None
        m = terms[0][1]
        if not isinstance(m, Expr) or m.op != "Mean":
            return None
        sq = m.args[0]
        if isinstance(sq, Expr) and sq.op == "Pow" and self.same(sq.args[0], x) and close(self.scalar(sq.args[1]) or 0, 2.0):
            return eps
        if isinstance(sq, Expr) and sq.op == "Mul" and self.same(sq.args[0], x) and self.same(sq.args[1], x):
            return eps
        return None

    def match_norm(self, e):
        """rmsnorm: x / sqrt(mean(x^2) + eps) * g; layernorm: (x - mean x) / sqrt(...) * g + b."""
        terms, cs = self.sum_form(e)
        beta = None
        if len(terms) == 1 and terms[0][0] == 1 and len(cs) == 1 and cs[0][0] == 1:
            beta = cs[0][1]
            e = terms[0][1]
        elif cs or len(terms) != 1:
            return None
        coef, consts, factors, invs = self.prod_form(e)
        if len(factors) != 1 or len(invs) != 1 or len(consts) > 1:
            return None
        x = factors[0]
        eps = self.match_inv_rms(invs[0], x, False)
        if eps is None:
            return None
        c = x.rest[-1] if hasattr(x, "rest") else None
        gamma = np.full(c, coef, np.float64)
        if consts:
            gv = consts[0][0]
            if gv.size != c or gv.reshape(-1).shape[0] != c or (gv.ndim > 1 and gv.shape[-1] != c):
                return None
            gamma = gamma * gv.reshape(c)
        gconst = consts[0][1] if consts else None
        # centered: x = a - mean(a)
        if isinstance(x, Expr) and x.op == "Sub":
            t1, t2 = x.args
            if isinstance(t2, Expr) and t2.op == "Mean" and self.same(t2.args[0], t1):
                b = np.zeros(c) if beta is None else beta.static().astype(np.float64)
                if b.size != c:
                    return None
                return "layernorm", t1, eps, gamma, gconst, b.reshape(c), beta
        if beta is not None:
            return None
        return "rmsnorm", x, eps, gamma, gconst, None, None

    def gemm_fold(self, r, **keys):
        """A copy of the gemm that produced r with more epilogue keys, or None."""
        node = self.producer.get(r.name)
        if not node or node["op"] != "gemm":
            return None
        if node.get("act", "none") != "none" or node.get("mul") or node.get("residual"):
            return None
        if any(k in node for k in keys):
            return None
        new = {k: v for k, v in node.items() if k not in ("name", "out")}
        new.update(keys)
        op = new.pop("op")
        ins = new.pop("in")
        return self.emit(op, ins, node["out"] + "_" + "_".join(keys), r.rest, **new)

    def expr_rows(self, e):
        n = e.node
        g = self.match_gelu(e)
        if g:
            kind, x = g
            xr = self.materialize(x)
            if kind == "gelu":
                return self.emit("gelu", [xr.name], n.output[0], xr.rest)
            # the epilogue of the gemm that produced x when it has none; else the standalone op
            r = self.gemm_fold(xr, act="gelu_tanh")
            return r if r is not None else self.emit("gelu_tanh", [xr.name], n.output[0], xr.rest)
        m = self.match_norm(e)
        if m:
            kind, x, eps, gamma, gconst, beta, bconst = m
            xr = self.materialize(x)
            gname = self.param(gconst if gconst is not None and np.allclose(gamma, gconst.static().reshape(-1))
                               else Const(gamma, gamma), n.name + "_gamma", gamma.astype(np.float32))
            keys = {"gamma": gname, "eps": float(eps)}
            if kind == "layernorm":
                keys["beta"] = self.param(bconst if bconst is not None else Const(beta, beta), n.name + "_beta",
                                          beta.astype(np.float32))
            return self.emit(kind, [xr.name], n.output[0], xr.rest, **keys)
        if e.op in ("Add", "Sub"):
            terms, cs = self.sum_form(e)
            return self.sum_rows(e, terms, cs)
        if e.op in ("Mul", "Div", "Neg", "Reciprocal"):
            return self.prod_rows(e)
        if e.op in ("Relu", "Tanh"):  # tanh has no gemm epilogue: always the standalone op
            xr = self.materialize(e.args[0])
            return self.emit(e.op.lower(), [xr.name], n.output[0], xr.rest)
        self.cur = n
        self.unsupported("this %s is not part of a pattern hkc maps (gelu, gelu_tanh, tanh, layernorm, rmsnorm, "
                         "silu)" % e.op)

    def const_operand(self, c, rest, base, scale=1.0):
        s = c.static().astype(np.float64) * scale
        while s.ndim > 1 and s.shape[0] == 1:
            s = s.reshape(s.shape[1:])
        if s.size == 1:
            s = np.full(rest[-1], float(s.ravel()[0]))
        if tuple(s.shape) != tuple(rest[-s.ndim:]):
            s = np.broadcast_to(s, rest[-s.ndim:] if s.ndim <= len(rest) else s.shape)
        return self.param(c if scale == 1.0 else Const(s, s), base, np.ascontiguousarray(s, np.float32))

    def sum_rows(self, e, terms, cs):
        n = e.node
        rows = []
        for sign, t in terms:
            if sign != 1:
                self.cur = n
                self.unsupported("a subtraction of tensors (hkc has add, and mul by constants)")
            rows.append(self.materialize(t))
        cs = self.embedding_pos(n, rows, cs)
        left = []
        for sign, c in cs:
            cv = c.static()
            done = False
            if sign == 1 and cv.size == rows[0].rest[-1] and (cv.ndim <= 1 or np.prod(cv.shape[:-1]) == 1):
                for i, r in enumerate(rows):
                    f = self.gemm_fold(r, bias=self.param(c, n.name + "_bias", cv.reshape(-1).astype(np.float32)))
                    if f is not None:
                        rows[i], done = f, True
                        break
            if not done:
                left.append((sign, c))
        cur = rows[0]
        for tr in rows[1:]:
            cur = self.emit("add", [cur.name, tr.name], n.output[0], np.broadcast_shapes(cur.rest, tr.rest))
        for sign, c in left:
            r = None
            if r is None:
                p = self.const_operand(c, cur.rest, n.name + "_const", float(sign))
                r = self.emit("add", [cur.name, p], n.output[0], cur.rest)
            cur = r
        return cur

    def embedding_pos(self, n, rows, cs):
        """Constants [seq, hidden] added to an embedding's output (position embeddings, with
        constant token type rows) become its pos table: the initializer itself when it is one
        table's first rows, else their sum. Returns the constants left."""
        node = None
        for i, r in enumerate(rows):
            p = self.producer.get(r.name)
            if p and p["op"] == "embedding" and "pos" not in p:
                node, at = p, i
                break
        if node is None:
            return cs
        t, h = rows[at].rest
        pos, left = [], []
        for sign, c in cs:
            v = c.static()
            while v is not None and v.ndim > 2 and v.shape[0] == 1:
                v = v[0]
            if v is not None and v.shape in ((t, h), (1, h), (h,)):
                pos.append((sign, c, v))
            else:
                left.append((sign, c))
        if not any(v.shape == (t, h) for _, _, v in pos):
            return cs
        if len(pos) == 1 and pos[0][0] == 1 and pos[0][1].table is not None:
            table = pos[0][1].table
            name = self.param(table, n.name + "_pos")
        else:
            total = sum(sign * np.broadcast_to(v.astype(np.float64), (t, h)) for sign, _, v in pos)
            name = self.fresh(node["out"] + "_pos")
            self.params[name] = np.ascontiguousarray(total, np.float32)
            self.param_origin[name] = " + ".join(("" if sign == 1 else "-") + (c.origin or "constant")
                                                 for sign, c, _ in pos)
        keys = {k: v for k, v in node.items() if k not in ("name", "op", "in", "out")}
        keys["pos"] = name
        rows[at] = self.emit("embedding", node["in"], node["out"] + "_pos", rows[at].rest, **keys)
        return left

    def prod_rows(self, e):
        n = e.node
        coef, consts, factors, invs = self.prod_form(e)
        if invs:
            self.cur = n
            self.unsupported("a division by a tensor that is not part of a norm pattern")
        # silu pairs: x * sigmoid(x)
        parts = []
        rest_f = list(factors)
        while rest_f:
            f = rest_f.pop(0)
            pair = None
            for g in rest_f:
                if isinstance(g, Expr) and g.op == "Sigmoid" and self.same(g.args[0], f):
                    pair = g
                elif isinstance(f, Expr) and f.op == "Sigmoid" and self.same(f.args[0], g):
                    pair = g
                if pair is not None:
                    break
            if pair is not None:
                rest_f.remove(pair)
                x = f if not (isinstance(f, Expr) and f.op == "Sigmoid") else pair
                xr = self.materialize(x)
                r = self.gemm_fold(xr, act="silu")
                parts.append(r if r is not None else self.emit("silu", [xr.name], n.output[0], xr.rest))
            else:
                if isinstance(f, Expr) and f.op in ("Sigmoid", "Erf", "Sqrt", "Mean", "Pow"):
                    self.cur = f.node
                    self.unsupported("this %s is not part of a pattern hkc maps (gelu, gelu_tanh, tanh, layernorm, "
                                     "rmsnorm, silu)" % f.op)
                parts.append(self.materialize(f))
        cur = parts[0]
        for p in parts[1:]:
            cur = self.emit("mul", [cur.name, p.name], n.output[0], np.broadcast_shapes(cur.rest, p.rest))
        if consts or coef != 1.0:
            total = np.full(cur.rest[-1], coef)
            for v, c in consts:
                total = total * v
            origin = consts[0][1] if len(consts) == 1 and coef == 1.0 else Const(total, total)
            p = self.param(origin, n.name + "_const", np.ascontiguousarray(
                np.broadcast_to(total, np.broadcast_shapes(total.shape, (cur.rest[-1],))), np.float32))
            cur = self.emit("mul", [cur.name, p], n.output[0], cur.rest)
        return cur

    # ------------------------------------------------------------------ output
    def spec_yaml(self, name, batch_sizes, dtype):
        def shape(r):
            return "[" + ", ".join(["batch"] + [str(d) for d in r]) + "]"

        def val(v):
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, float):
                return repr(v) if "e" in repr(v) or "." in repr(v) else repr(v) + ".0"
            if isinstance(v, list):
                return "[" + ", ".join(v) + "]"
            return str(v)

        lines = ["# Imported from ONNX by hkc import onnx (python/hkc_import_onnx.py; docs/IMPORT.md).",
                 "# Params are the ONNX initializers (names sanitized; the weights file's",
                 "# __metadata__ maps each to its ONNX name).",
                 "hkc: 1", "name: %s" % name, "dtype: %s" % dtype,
                 "batch_sizes: [%s]" % ", ".join(map(str, batch_sizes)), "targets: [host]", "inputs:"]
        for k, r in self.inputs.items():
            note = "  # " + self.input_note[k] if k in self.input_note else ""
            if k in self.input_dtype:
                lines.append("  %s: {shape: %s, dtype: %s}%s" % (k, shape(r), self.input_dtype[k], note))
            else:
                lines.append("  %s: %s%s" % (k, shape(r), note))
        if self.params:
            lines.append("params:")
            for k, v in self.params.items():
                lines.append("  %s: [%s]%s" % (k, ", ".join(map(str, v.shape)),
                                                "  # " + self.param_origin[k] if self.param_origin[k] != k else ""))
        lines.append("graph:")
        order = ["name", "op", "in", "bias", "act", "mul", "residual", "gamma", "beta", "eps", "heads", "kv_heads",
                 "causal", "scale", "lengths", "mask", "theta", "pos", "out"]
        for node in self.nodes:
            items = ["%s: %s" % (k, val(node[k])) for k in order if k in node]
            lines.append("  - {%s}" % ", ".join(items))
        lines.append("outputs: [%s]" % ", ".join(self.outputs))
        lines.append("fusion: auto")
        return "\n".join(lines) + "\n"


def to_dtype_bytes(arr, dtype):
    a = np.ascontiguousarray(arr, np.float32)
    if dtype == "f32":
        return "F32", a.astype("<f4").tobytes()
    if dtype == "f16":
        return "F16", a.astype("<f2").tobytes()
    u = a.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    return "BF16", u.tobytes()


def write_safetensors(path, params, origins, dtype):
    header, blobs, at = {}, [], 0
    for name, arr in params.items():
        st, raw = to_dtype_bytes(arr, dtype)
        header[name] = {"dtype": st, "shape": list(arr.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header["__metadata__"] = {"format": "hkc", "source": "onnx",
                              "onnx_names": json.dumps({k: origins[k] for k in params})}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def seq_axes(rank):
    """The axes of an input of this rank that are its sequence: [batch, seq(, hidden)], [batch, h, seq, seq]."""
    return (2, 3) if rank == 4 else (1,) if rank >= 2 else ()


def pin_dims(model, seq, dims):
    """Replace the symbolic dims of the graph inputs (dynamic_axes other than the batch, axis 0) by
    values: every seq axis by --seq, every dim named NAME by --dim NAME=N. Returns "seq=8, ..." (the
    pins applied) or ""; fails on a pin no input has, on a pinned batch, and on a symbolic dim left."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    batch_names, where = set(), {}  # where: dim name -> (input, axis) of its first use past the batch
    for inp in inputs:
        for ax, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.HasField("dim_param") and d.dim_param:
                if ax == 0:
                    batch_names.add(d.dim_param)
                else:
                    where.setdefault(d.dim_param, (inp.name, ax))
    pins = dict(dims)
    for k in pins:
        if k in batch_names:
            fail("--dim %s=%d: '%s' is the batch axis (axis 0), whose sizes are --batch-sizes" % (k, pins[k], k))
        if k not in where:
            fail("--dim %s=%d: no input has a dim named '%s' (the inputs' symbolic dims past the batch: %s)" % (
                k, pins[k], k, ", ".join("'%s'" % n for n in where) or "none"))
    applied = []
    if seq is not None:
        found = False
        for inp in inputs:
            ds = inp.type.tensor_type.shape.dim
            for ax in seq_axes(len(ds)):
                d = ds[ax]
                if d.HasField("dim_value"):
                    continue
                found = True
                if d.dim_param:
                    if pins.get(d.dim_param, seq) != seq:
                        fail("--seq %d and --dim %s=%d pin the same dim (axis %d of input '%s') to two values" % (
                            seq, d.dim_param, pins[d.dim_param], ax, inp.name))
                    pins[d.dim_param] = seq
                else:
                    d.dim_value = seq
        if not found:
            static = sorted({ds[ax].dim_value for inp in inputs for ds in [inp.type.tensor_type.shape.dim]
                             for ax in seq_axes(len(ds))})
            if static != [seq]:
                fail("--seq %d: no input has a symbolic seq dim (the model's seq is static: %s)" % (
                    seq, ", ".join(map(str, static)) or "none"))
        applied.append("seq=%d" % seq)
    for inp in inputs:
        for ax, d in enumerate(inp.type.tensor_type.shape.dim):
            if ax > 0 and d.HasField("dim_param") and d.dim_param in pins:
                d.dim_value = pins[d.dim_param]  # a oneof: clears dim_param
    applied += ["%s=%d" % (k, v) for k, v in dims.items()]
    for inp in inputs:
        for ax, d in enumerate(inp.type.tensor_type.shape.dim):
            if ax > 0 and not d.HasField("dim_value"):
                nm = d.dim_param
                how = "--seq N" if ax in seq_axes(len(inp.type.tensor_type.shape.dim)) else ""
                how += (" or " if how else "") + ("--dim %s=N" % nm if nm else "")
                fail("input '%s' has a symbolic dim %s (axis %d): hkc's dims vary with the batch only; pin it with %s" % (
                    inp.name, "'%s'" % nm if nm else "without a name", ax, how or "--seq N"))
    return ", ".join(dict.fromkeys(applied))


class ArgParser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit status 2, a usage error (docs/CLI.md), as hf's
        print("%s: error: %s (see --help)" % (self.prog, message), file=sys.stderr)
        sys.exit(2)


def main(argv):
    ap = ArgParser(prog="hkc import onnx", description="Import an ONNX model (torch.onnx.export of a "
                   "BERT-, GPT-2- or Llama-style block) as an hkc spec and a safetensors file of its params "
                   "(docs/IMPORT.md).")
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True, help="the spec to write (YAML)")
    ap.add_argument("--weights-out", required=True, help="the safetensors file to write")
    ap.add_argument("--name", help="the spec's name (default: the model file's stem)")
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--padding-mask-as", default="lengths", choices=["lengths", "mask"],
                    help="a [batch, seq] attention mask input becomes an i32 [batch] lengths input (right padding "
                         "assumed) or a [batch, 1, seq, seq] additive mask input (any pattern)")
    ap.add_argument("--seq", metavar="N", help="pin the inputs' symbolic seq dims (dynamic_axes {1: 'seq'}) to N")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                    help="pin the inputs' symbolic dim NAME to N (repeatable)")
    args = ap.parse_args(argv)
    np.seterr(all="ignore")  # folding finfo.min + finfo.min overflows to -inf, as the model does
    try:
        try:
            batch_sizes = sorted({int(b) for b in args.batch_sizes.split(",")})
            if not batch_sizes or batch_sizes[0] < 1:
                raise ValueError
        except ValueError:
            fail("--batch-sizes must be a comma-separated list of positive integers, not '%s'" % args.batch_sizes)
        seq, dims = None, {}
        if args.seq is not None:
            if not re.fullmatch(r"[0-9]+", args.seq) or int(args.seq) < 1:
                fail("--seq must be a positive integer, not '%s'" % args.seq)
            seq = int(args.seq)
        for d in args.dim:
            m = re.fullmatch(r"([^=]+)=([0-9]+)", d)
            if not m or int(m.group(2)) < 1:
                fail("--dim must be NAME=N with N a positive integer, not '%s'" % d)
            if dims.get(m.group(1), int(m.group(2))) != int(m.group(2)):
                fail("--dim %s given twice with different values" % m.group(1))
            dims[m.group(1)] = int(m.group(2))
        name = args.name or sanitize(os.path.splitext(os.path.basename(args.model))[0])
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,255}", name):
            fail("--name '%s': letters, digits, '_', '-', '.' only" % name)
        try:
            import onnx
            import onnx.helper
            import onnx.numpy_helper
        except ImportError as e:
            fail("the onnx Python package is needed (%s)" % e)
        try:
            with open(args.model, "rb") as f:
                data = f.read()
        except OSError as e:
            fail("%s: %s" % (args.model, e.strerror))
        try:
            model = onnx.ModelProto()
            model.ParseFromString(data)
        except Exception as e:  # noqa: BLE001 - protobuf raises its own DecodeError
            fail("%s: not an ONNX model (%s)" % (args.model, str(e).splitlines()[0] if str(e) else type(e).__name__))
        if not model.graph.node:
            fail("%s: not an ONNX model (no graph nodes)" % args.model)
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
            import onnx.external_data_helper

            try:
                onnx.external_data_helper.load_external_data_for_model(
                    model, os.path.dirname(os.path.abspath(args.model)))
            except Exception as e:  # noqa: BLE001
                fail("%s: cannot read the external weights (%s)" % (args.model, e))
        pinned = pin_dims(model, seq, dims)
        imp = Importer(model, args.padding_mask_as)
        try:
            imp.run()
        except ImportError_ as e:
            if pinned:  # a graph that needs another size (a Reshape to a size frozen by the export, ...)
                fail("%s (with %s pinned)" % (e, pinned))
            raise
        except Exception as e:  # noqa: BLE001 - a malformed model must not end in a traceback
            n = imp.cur
            where = "node %s '%s'" % (n.op_type, n.name or "?") if n is not None else "the graph"
            fail("cannot map %s (%s: %s)%s" % (where, type(e).__name__, str(e).splitlines()[0] if str(e) else "",
                                               " (with %s pinned)" % pinned if pinned else ""))
        spec = imp.spec_yaml(name, batch_sizes, args.dtype)
        write_safetensors(args.weights_out, imp.params, imp.param_origin, args.dtype)
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(spec)
        os.replace(tmp, args.output)
    except ImportError_ as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    print("%s: %d nodes, %d params -> %s, %s" % (args.model, len(imp.nodes), len(imp.params), args.output,
                                                 args.weights_out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
