# SPDX-License-Identifier: Apache-2.0
"""Loading the ONNX model and reading its inputs: which axis of each is the batch (seq-first
models), which 2-D float inputs are rows rather than masks, and the pinning of symbolic dims
(--seq, --dim) before anything is folded. The importer infers every other shape itself, by
folding (fold.py) at two batch sizes."""
import os

from .values import fail


def load_model(path):
    """The model, its external weights read; one-line errors for a missing file or a file that
    is not ONNX."""
    try:
        import onnx
        import onnx.helper
        import onnx.numpy_helper
    except ImportError as e:
        fail("the onnx Python package is needed (%s)" % e)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf raises its own DecodeError
        fail("%s: not an ONNX model (%s)" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
    if not model.graph.node:
        fail("%s: not an ONNX model (no graph nodes)" % path)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        import onnx.external_data_helper

        try:
            onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001
            fail("%s: cannot read the external weights (%s)" % (path, e))
    return model


def graph_inputs(model):
    """The graph inputs that are not initializers."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def is_float(inp):
    import onnx

    return inp.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                                              onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16)


def batch_axes(model, seq_first):
    """The batch axis of each input: 0, or 1 for the [seq, batch, hidden] float inputs of a
    seq-first model (nn.Transformer's and nn.MultiheadAttention's default batch_first=False):
    every 3-D float input with --seq-first, else one whose axis 1 is a symbolic dim named like
    the batch ('batch', 'batch_size', ...) while axis 0 is not."""
    out = {}
    for inp in graph_inputs(model):
        ds = inp.type.tensor_type.shape.dim
        ax = 0
        if len(ds) == 3 and is_float(inp):
            def batchy(d):
                return d.HasField("dim_param") and "batch" in d.dim_param.lower()
            if seq_first or (batchy(ds[1]) and not batchy(ds[0])):
                ax = 1
        out[inp.name] = ax
    return out


def seq_axes(rank, bax=0):
    """The axes of an input of this rank that are its sequence: [batch, seq(, hidden)], [batch, h, seq, seq];
    [seq, batch, hidden] when its batch axis is 1."""
    if bax == 1:
        return (0,)
    return (2, 3) if rank == 4 else (1,) if rank >= 2 else ()


def pin_dims(model, seq, dims, baxes):
    """Replace the symbolic dims of the graph inputs (dynamic_axes other than the batch axis) by
    values: every seq axis by --seq, every dim named NAME by --dim NAME=N. Returns "seq=8, ..." (the
    pins applied) or ""; fails on a pin no input has, on a pinned batch, and on a symbolic dim left."""
    inputs = graph_inputs(model)
    batch_names, where = set(), {}  # where: dim name -> (input, axis) of its first use past the batch
    for inp in inputs:
        for ax, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.HasField("dim_param") and d.dim_param:
                if ax == baxes[inp.name]:
                    batch_names.add(d.dim_param)
                else:
                    where.setdefault(d.dim_param, (inp.name, ax))
    pins = dict(dims)
    for k in pins:
        if k in batch_names:
            fail("--dim %s=%d: '%s' is the batch axis, whose sizes are --batch-sizes" % (k, pins[k], k))
        if k not in where:
            fail("--dim %s=%d: no input has a dim named '%s' (the inputs' symbolic dims past the batch: %s)" % (
                k, pins[k], k, ", ".join("'%s'" % n for n in where) or "none"))
    applied = []
    if seq is not None:
        found = False
        for inp in inputs:
            ds = inp.type.tensor_type.shape.dim
            for ax in seq_axes(len(ds), baxes[inp.name]):
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
                             for ax in seq_axes(len(ds), baxes[inp.name])})
            if static != [seq]:
                fail("--seq %d: no input has a symbolic seq dim (the model's seq is static: %s)" % (
                    seq, ", ".join(map(str, static)) or "none"))
        applied.append("seq=%d" % seq)
    for inp in inputs:
        for ax, d in enumerate(inp.type.tensor_type.shape.dim):
            if ax != baxes[inp.name] and d.HasField("dim_param") and d.dim_param in pins:
                d.dim_value = pins[d.dim_param]  # a oneof: clears dim_param
    applied += ["%s=%d" % (k, v) for k, v in dims.items()]
    for inp in inputs:
        ds = inp.type.tensor_type.shape.dim
        bax = baxes[inp.name]
        for ax, d in enumerate(ds):
            if ax != bax and not d.HasField("dim_value"):
                nm = d.dim_param
                how = "--seq N" if ax in seq_axes(len(ds), bax) else ""
                how += (" or " if how else "") + ("--dim %s=N" % nm if nm else "")
                hint = ""
                if ax == 1 and len(ds) == 3 and bax == 0 and is_float(inp) and ds[0].HasField("dim_value"):
                    hint = (" (if axis 1 is the batch -- nn.Transformer's default batch_first=False -- import with "
                            "--seq-first)")
                fail("input '%s' has a symbolic dim %s (axis %d): hkc's dims vary with the batch only; pin it with "
                     "%s%s" % (
                    inp.name, "'%s'" % nm if nm else "without a name", ax, how or "--seq N", hint))
    return ", ".join(dict.fromkeys(applied))


def rows_2d_inputs(model):
    """The float [batch, n] inputs that are rows (what nn.Linear on 2-D inputs reads) rather than
    a padding mask: read directly by a Gemm or a MatMul (as the data, A), a LayerNormalization, or
    an activation."""
    inits = {t.name for t in model.graph.initializer}
    out = set()
    for inp in graph_inputs(model):
        if len(inp.type.tensor_type.shape.dim) != 2 or not is_float(inp):
            continue
        for n in model.graph.node:
            ins = list(n.input)
            if not ins or ins[0] != inp.name:
                continue
            if n.op_type == "Gemm" or n.op_type == "MatMul" and len(ins) > 1 and ins[1] in inits \
                    or n.op_type in ("LayerNormalization", "Relu", "Gelu", "Tanh", "Sigmoid", "Erf", "Softmax"):
                out.add(inp.name)
    return out
