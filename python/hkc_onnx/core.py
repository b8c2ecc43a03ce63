# SPDX-License-Identifier: Apache-2.0
"""The walk over the graph: every node's inputs looked up, constants folded, the other nodes
handed to the op_<OpType> method of the pattern families (the mixins of importer.Importer), hkc
nodes emitted, values materialized on demand. A node that cannot be mapped is recorded with its
reason and its outputs marked refused, so that the walk goes on and every such node is listed."""
import hashlib

import numpy as np

from .fold import fold, onnx_np_dtype
from .spec import sanitize
from .values import (B0, B1, BAD, ROWSLIKE, Bad, Const, Expr, ImportError_, MaskFn, Refused, RowSlice, Rows,
                     Source, fail, lay_desc, onnx_shape)


class Core:
    def __init__(self, model, padding_mask="lengths", baxes=None, rows2d=()):
        self.model = model
        self.padding_mask = padding_mask  # what a [batch, seq] padding mask becomes: "lengths" or "mask"
        self.baxes = baxes or {}  # ONNX input -> its batch axis (1: seq first)
        self.rows2d = set(rows2d)  # float [batch, n] inputs read as rows, not masks
        self.g = model.graph
        self.vals = {}
        self.nodes = []  # hkc node dicts, in order
        self.params = {}  # hkc name -> np array (f32)
        self.param_origin = {}  # hkc name -> ONNX name
        self.inputs = {}  # hkc name -> rest
        self.input_dtype = {}  # hkc name -> "i32" for the integer inputs
        self.input_note = {}  # hkc name -> a comment for the spec
        self.output_note = {}  # hkc name -> a comment for the spec
        self.sources = []  # the Source inputs (ids, masks)
        self.used_names = set()
        self.producer = {}  # hkc tensor -> node dict
        self.memo = {}
        self.cur = None
        self.errors = []  # one line per node that cannot be mapped, in graph order
        self.outputs = []

    # names
    def fresh(self, base):
        base = sanitize(base)
        name, i = base, 1
        while name in self.used_names:
            i += 1
            name = "%s_%d" % (base, i)
        self.used_names.add(name)
        return name

    def emit(self, op, ins, out_base, rest, lay, **keys):
        """An hkc node; its output, [batch, *rest], is seen by the ONNX graph in layout lay."""
        node = {"name": self.fresh("n_" + out_base), "op": op, "in": list(ins)}
        node.update(keys)
        out = self.fresh(out_base)
        node["out"] = out
        self.nodes.append(node)
        self.producer[out] = node
        return Rows(out, rest, lay)

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

    def record(self, msg):
        if msg not in self.errors:
            self.errors.append(msg)

    def refuse(self, n, msg):
        """Node n cannot be mapped: msg is listed, and its outputs are refused values."""
        self.record(msg)
        for o in n.output:
            self.vals[o] = BAD

    def try_materialize(self, v):
        try:
            return self.materialize(v)
        except ImportError_ as e:
            self.record(str(e))
        return None

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

    def attrs(self, n):
        import onnx

        out = {}
        for at in n.attribute:
            v = onnx.helper.get_attribute_value(at)
            if at.type == onnx.AttributeProto.TENSOR:
                v = onnx.numpy_helper.to_array(v)
            out[at.name] = v
        return out

    # ------------------------------------------------------------------ run
    def read_inputs(self):
        import onnx

        g = self.g
        for init in g.initializer:
            arr = onnx.numpy_helper.to_array(init)
            self.vals[init.name] = Const(arr, arr, origin=init.name)
        inits = set(self.vals)

        def batch_dim(inp):
            ds = inp.type.tensor_type.shape.dim
            ax = self.baxes.get(inp.name, 0)
            return ds[ax] if ax < len(ds) else None
        dynamic = [i.name for i in g.input if i.name not in inits and batch_dim(i) is not None
                   and not batch_dim(i).HasField("dim_value")]
        for inp in g.input:
            if inp.name in inits:
                continue
            tt = inp.type.tensor_type
            bd = batch_dim(inp)
            if dynamic and (bd is None or bd.HasField("dim_value")):
                fail("input '%s' %s has no batch axis (input '%s' has a symbolic one; hkc's inputs all vary with the "
                     "batch): a mask without a batch axis (nn.Transformer's [seq, seq] src_mask / attn_mask) must be "
                     "built in the model, as a constant" % (
                         inp.name, [x.dim_value if x.HasField("dim_value") else x.dim_param for x in tt.shape.dim],
                         dynamic[0]))
            dt = onnx_np_dtype(tt.elem_type)
            dims = list(tt.shape.dim)
            bax = self.baxes.get(inp.name, 0)
            got = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
            other = [d for i, d in enumerate(dims) if i != bax]
            static = len(dims) >= 2 and all(d.HasField("dim_value") for d in other)
            rest = tuple(d.dim_value for d in other)
            if dt.kind in "iub":  # token ids or a padding mask [batch, seq]
                if len(dims) != 2 or not static or dt.kind == "u" and dt.itemsize > 4:
                    fail("input '%s' (%s %s): an integer input must be [batch, seq] with a static seq (token ids "
                         "or a padding mask)" % (inp.name, onnx.TensorProto.DataType.Name(tt.elem_type), got))
            elif dt.kind != "f":
                fail("input '%s' has element type %s: only float and integer inputs are mapped" % (
                    inp.name, onnx.TensorProto.DataType.Name(tt.elem_type)))
            elif bax == 1:
                if not static:
                    fail("input '%s' must be [seq, batch, hidden] (seq first) with static seq and hidden (got %s)" % (
                        inp.name, got))
                name = self.fresh(inp.name)
                self.inputs[name] = rest
                self.input_note[name] = ("the ONNX input %s (seq first) transposed: pass %s.transpose(0, 1)" % (
                    lay_desc("sf", rest), inp.name))
                self.vals[inp.name] = Rows(name, rest, "sf")
                continue
            elif len(dims) == 2 and inp.name in self.rows2d and static:  # rows [batch, features] (nn.Linear on 2-D)
                name = self.fresh(inp.name)
                self.inputs[name] = rest
                self.vals[inp.name] = Rows(name, rest)
                continue
            elif len(dims) in (2, 4) and static:  # a float padding mask [batch, seq] or additive mask
                pass
            elif len(dims) != 3 or not static:
                fail("input '%s' must be [batch, seq, hidden] with static seq and hidden (or [batch, features] read by "
                     "a Gemm or MatMul, a mask [batch, seq] / [batch, heads, seq, seq], int token ids [batch, seq], or "
                     "[seq, batch, hidden] with --seq-first; got %s)" % (inp.name, got))
            if len(dims) != 3:
                src = Source(inp.name, dt, rest)
                self.sources.append(src)
                self.vals[inp.name] = MaskFn(src, lambda m, w: m, raw=True)
                continue
            name = self.fresh(inp.name)
            self.inputs[name] = rest
            self.vals[inp.name] = Rows(name, rest)

    def run(self):
        g = self.g
        self.read_inputs()
        for o in g.output:
            self.used_names.add(sanitize(o.name))
        for n in g.node:
            self.cur = n
            try:
                self.step(n)
            except ImportError_ as e:
                self.refuse(n, str(e))
            except Exception as e:  # noqa: BLE001 - a malformed model must not end in a traceback
                self.refuse(n, "cannot map node %s '%s' (%s: %s)" % (
                    n.op_type, n.name or "?", type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        outs = []
        self.cur = None
        for o in g.output:
            v = self.vals.get(o.name)
            if isinstance(v, Bad):
                continue  # its node is listed
            if isinstance(v, Const):
                self.record("output '%s' is a constant" % o.name)
                continue
            if not isinstance(v, ROWSLIKE):
                self.record("output '%s' is a %s, not a [batch, seq, width] tensor" % (
                    o.name, v.desc() if v is not None else "value no node produces"))
                continue
            r = self.try_materialize(v)
            if r is None:
                continue
            if r.name in self.inputs:
                self.record("output '%s' is the input itself" % o.name)
                continue
            if r.lay == "fs":
                self.record("output '%s' is %s: rows in (seq, batch) order, where hkc's outputs are [batch, ...] "
                            "(reshape it to [seq, batch, ...] in the model)" % (o.name, lay_desc(r.lay, r.rest)))
                continue
            outs.append((o.name, r))
        if self.errors:
            raise Refused(self.errors)
        self.dce([r.name for _, r in outs])
        # rename the output tensors after the ONNX outputs
        for onnx_name, r in outs:
            hk = r.name
            want = sanitize(onnx_name)
            if want != hk and want not in [x.name for _, x in outs]:
                self.rename(hk, want)
                hk = want
            self.outputs.append(hk)
            if r.lay == "sf":
                self.output_note[hk] = "ONNX output '%s' %s (seq first) transposed" % (
                    onnx_name, lay_desc("sf", r.rest))
            elif r.lay == "fb":
                self.output_note[hk] = "ONNX output '%s' %s: the same rows as [batch, %s]" % (
                    onnx_name, lay_desc("fb", r.rest), ", ".join(map(str, r.rest)))
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
        if any(isinstance(v, Bad) for v in present):
            # downstream of a refused node: not mapped; the pending expressions it reads are
            # checked on their own, so that a refusal among them is listed too
            for v in present:
                if isinstance(v, Expr):
                    self.try_materialize(v)
            for o in n.output:
                self.vals[o] = BAD
            return
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
            s0 = np.array(onnx_shape(ins[0], B0), np.int64)
            s1 = np.array(onnx_shape(ins[0], B1), np.int64)
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
            if srcs:
                self.unsupported("input %s is read here; hkc reads an integer or mask input only as embedding ids "
                                 "or as attention's key lengths / additive mask" % ", ".join("'%s'" % x for x in srcs))
            self.unsupported("no hkc op or pattern takes %s of %s" % (
                op, " and ".join(v.desc() for v in present if not isinstance(v, Const)) or "these inputs"))
        if not isinstance(res, (list, tuple)):
            res = [res]
        for o, v in zip(n.output, res):
            self.vals[o] = v

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
