# SPDX-License-Identifier: Apache-2.0
"""Linear layers: MatMul of rows by a constant weight and ONNX Gemm (torch's nn.Linear on 2-D
inputs, nn.MultiheadAttention's out_proj) become hkc gemm nodes; a gemm's output read in column
slices (a fused projection split into q, k, v) becomes one gemm per slice."""
import numpy as np

from .values import ROWSLIKE, Const, Expr, fail, lay_shape


class Linear:
    def op_MatMul(self, n, a, ins):
        x, w = ins
        if isinstance(x, ROWSLIKE) and isinstance(w, Const):
            wv = w.static()
            if wv is None:
                self.unsupported("the weight depends on the batch size")
            if wv.ndim != 2 or wv.shape[0] != x.rest[-1]:
                self.unsupported("the weight %s is not [%d, N] (hkc's gemm multiplies rows by a 2-D weight)" % (
                    list(wv.shape), x.rest[-1]))
            xr = self.materialize(x)
            p = self.param(w, n.name + "_weight")
            return self.emit("gemm", [xr.name, p], n.output[0], xr.rest[:-1] + (wv.shape[1],), xr.lay)
        if isinstance(x, ROWSLIKE) and isinstance(w, ROWSLIKE):
            self.unsupported("a product of two tensors (hkc's gemm multiplies rows by a constant weight; "
                             "only Q @ K^T and P @ V of attention heads are mapped)")
        return self.matmul_views(n, x, w)

    def op_Gemm(self, n, a, ins):
        """Y = alpha * A' @ B' + beta * C (A' = A^T with transA, B' = B^T with transB): rows A
        [batch, K] (or [batch*seq, K]) by a constant B; C a constant broadcast to [N] (the
        bias) or a tensor of Y's shape (the residual)."""
        A, B = ins[0], ins[1]
        C = ins[2] if len(ins) > 2 else None
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        trans_a, trans_b = int(a.get("transA", 0)), int(a.get("transB", 0))
        if not isinstance(A, ROWSLIKE):
            if isinstance(A, Const) and isinstance(B, ROWSLIKE):
                self.unsupported("the tensor is B and the constant A (hkc's gemm multiplies rows by a weight: "
                                 "A must be the rows)")
            return None
        if trans_a:
            self.unsupported("transA=1: A would be [K, M] with the batch on the contraction axis (hkc's gemm reads "
                             "rows [M, K]; export x @ W, not x.T @ W)")
        if not isinstance(B, Const):
            self.unsupported("B is not a constant (hkc's gemm multiplies rows by a constant weight)")
        wv = B.static()
        if wv is None:
            self.unsupported("B depends on the batch size")
        k = A.rest[-1]
        if wv.ndim != 2 or (wv.shape[1] if trans_b else wv.shape[0]) != k:
            want = "[N, %d] (transB=1)" % k if trans_b else "[%d, N]" % k
            self.unsupported("B %s is not %s" % (list(wv.shape), want))
        nout = wv.shape[0] if trans_b else wv.shape[1]
        if alpha == 1.0:
            wp = self.param(B, n.name + "_weight")
        else:  # alpha folded into the weight: a param of its own
            scaled = wv.astype(np.float64) * alpha
            wp = self.param(Const(scaled, scaled, "%s_alpha" % (B.origin or n.name + "_weight")),
                            n.name + "_weight", scaled)
            self.param_origin[wp] = "%r * %s" % (alpha, B.origin or "constant")
        rest = A.rest[:-1] + (nout,)
        keys = {"trans_b": True} if trans_b else {}
        if C is not None and beta != 0.0:
            if isinstance(C, Const):
                cv = C.static()
                if cv is None:
                    self.unsupported("C depends on the batch size (only a bias [N] or a tensor of the output's shape "
                                     "maps onto hkc's gemm)")
                if cv.size != 1 and (cv.shape[-1] != nout or cv.size != nout):
                    self.unsupported("C %s is neither a scalar nor [%d] (hkc's gemm adds a bias [N] or a tensor of "
                                     "the output's shape)" % (list(cv.shape), nout))
                bias = np.broadcast_to(cv.astype(np.float64).reshape(-1) * beta, (nout,))
                if beta == 1.0 and cv.shape == (nout,):
                    keys["bias"] = self.param(C, n.name + "_bias")
                else:
                    keys["bias"] = self.param(Const(bias, bias), n.name + "_bias", bias)
            elif isinstance(C, ROWSLIKE):
                if C.lay != A.lay or tuple(C.rest) != tuple(rest):
                    self.unsupported("C (%s) does not have the output's shape %s: hkc's gemm adds a residual of "
                                     "that shape only" % (C.desc(), list(lay_shape(A.lay, rest, 1))))
                if beta != 1.0:
                    C = Expr("Mul", [C, Const(np.float32(beta), np.float32(beta))], C.rest, n, C.lay)
                keys["residual"] = self.materialize(C).name
            else:
                self.unsupported("C is a %s (hkc's gemm adds a bias [N] or a residual tensor)" % C.desc())
        xr = self.materialize(A)
        return self.emit("gemm", [xr.name, wp], n.output[0], rest, xr.lay, **keys)

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
        return self.emit(op, ins, node["out"] + "_" + "_".join(keys), r.rest, r.lay, **new)

    def slice_rows(self, v):
        """Columns of a gemm's output read on their own: a gemm over those columns of the weight
        (rows with trans_b) and of the bias."""
        base = v.base
        node = self.producer.get(base.name)
        if not node or node["op"] != "gemm" or node.get("act") or node.get("residual") or node.get("mul"):
            fail("columns %d..%d of '%s' are read on their own, and only the output of a gemm without "
                 "epilogue can be split (into gemms over the weight's columns)" % (
                     v.start, v.start + v.length, base.name))
        w = self.params[node["in"][1]]
        cols = slice(v.start, v.start + v.length)
        keys = {}
        wname = self.fresh("%s_c%d_%d" % (node["in"][1], v.start, v.start + v.length))
        origin = self.param_origin[node["in"][1]]
        if node.get("trans_b"):
            self.params[wname] = np.ascontiguousarray(w[cols, :])
            self.param_origin[wname] = "%s[%d:%d, :]" % (origin, v.start, v.start + v.length)
            keys["trans_b"] = True
        else:
            self.params[wname] = np.ascontiguousarray(w[:, cols])
            self.param_origin[wname] = "%s[:, %d:%d]" % (origin, v.start, v.start + v.length)
        if node.get("bias"):
            bname = self.fresh("%s_c%d_%d" % (node["bias"], v.start, v.start + v.length))
            self.params[bname] = np.ascontiguousarray(self.params[node["bias"]][cols])
            self.param_origin[bname] = "%s[%d:%d]" % (self.param_origin[node["bias"]], v.start, v.start + v.length)
            keys["bias"] = bname
        return self.emit("gemm", [node["in"][0], wname], "%s_c%d" % (base.name, v.start), base.rest[:-1] + (v.length,),
                         base.lay, **keys)
