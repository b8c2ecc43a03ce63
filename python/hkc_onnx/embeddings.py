# SPDX-License-Identifier: Apache-2.0
"""Embeddings: Gather(table, ids) of a [vocab, hidden] initializer by an integer [batch, seq]
input becomes an hkc embedding node (the ids an i32 input); constant [seq, hidden] rows added to
its output (a position table's first rows, token type rows of zeros_like(ids)) become its pos
table."""
import numpy as np

from .values import Const, MaskFn


class Embeddings:
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
        return self.emit("embedding", [src.ids, p], n.output[0], src.rest + (tv.shape[1],), "b")

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
        rows[at] = self.emit("embedding", node["in"], node["out"] + "_pos", rows[at].rest, "b", **keys)
        return left

