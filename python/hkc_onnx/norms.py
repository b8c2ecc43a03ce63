# SPDX-License-Identifier: Apache-2.0
"""Norms: ONNX LayerNormalization (opset 17), and layernorm / rmsnorm written out element-wise
(ReduceMean, Sub, Pow or x*x, Add eps, Sqrt, Div or Reciprocal, Mul gamma, Add beta)."""
import numpy as np

from .fold import norm_axes
from .values import ROWSLIKE, Const, Expr, close, lay_shape


class Norms:
    def op_LayerNormalization(self, n, a, ins):
        x = ins[0]
        if not isinstance(x, ROWSLIKE):
            return None
        rank = len(lay_shape(x.lay, x.rest, 1))
        if a.get("axis", -1) not in (-1, rank - 1):
            self.unsupported("axis %d: hkc's layernorm normalizes the last axis only" % a.get("axis"))
        if len(n.output) > 1 and any(n.output[1:]):
            self.unsupported("its mean / inverse std outputs are read (hkc's layernorm has one output)")
        c = x.rest[-1]
        g = self.const_in(1)
        b = self.const_in(2) if len(n.input) > 2 and n.input[2] else np.zeros(c, np.float32)
        if g is None or b is None or g.size != c or b.size != c:
            self.unsupported("the scale and bias must be constants of the last axis' size %d" % c)
        xr = self.materialize(x)
        gp = self.param(ins[1], n.name + "_gamma", g.reshape(c))
        bp = self.param(ins[2] if len(n.input) > 2 and n.input[2] else Const(b, b), n.name + "_beta", b.reshape(c))
        return self.emit("layernorm", [xr.name], n.output[0], xr.rest, xr.lay, gamma=gp, beta=bp,
                         eps=float(a.get("epsilon", 1e-5)))

    def op_ReduceMean(self, n, a, ins):
        x = ins[0]
        axes = a.get("axes")
        if axes is None and len(n.input) > 1:
            axes = self.const_in(1)
        if not isinstance(x, ROWSLIKE) or axes is None or a.get("keepdims", 1) != 1:
            return None
        rank = len(lay_shape(x.lay, x.rest, 1))
        if norm_axes([int(v) for v in np.ravel(axes)], rank) != [rank - 1]:
            self.unsupported("a mean over axes %s: only the mean over the last axis of a norm is mapped" % (
                [int(v) for v in np.ravel(axes)],))
        return Expr("Mean", [x], x.rest[:-1] + (1,), n, x.lay)

    def norm_rows(self, e):
        """e as a layernorm / rmsnorm node, or None."""
        n = e.node
        m = self.match_norm(e)
        if not m:
            return None
        kind, x, eps, gamma, gconst, beta, bconst = m
        xr = self.materialize(x)
        gname = self.param(gconst if gconst is not None and np.allclose(gamma, gconst.static().reshape(-1))
                           else Const(gamma, gamma), n.name + "_gamma", gamma.astype(np.float32))
        keys = {"gamma": gname, "eps": float(eps)}
        if kind == "layernorm":
            keys["beta"] = self.param(bconst if bconst is not None else Const(beta, beta), n.name + "_beta",
                                      beta.astype(np.float32))
        return self.emit(kind, [xr.name], n.output[0], xr.rest, xr.lay, **keys)

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
