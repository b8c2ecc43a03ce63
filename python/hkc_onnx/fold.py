# SPDX-License-Identifier: Apache-2.0
"""NumPy evaluation of ONNX nodes on constant inputs (constant folding; the probes of values
computed from mask inputs run through it too)."""
import math

import numpy as np


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
    if op == "Tile":
        return [np.tile(x, [int(r) for r in ins[1]])]
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
