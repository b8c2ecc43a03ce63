# SPDX-License-Identifier: Apache-2.0
"""Activations: the erf GELU and the tanh GELU written out element-wise (as torch exports
F.gelu before opset 20), ONNX Gelu (opset 20), Tanh, Relu, x * Sigmoid(x) (silu, in
elementwise.prod_rows). A tanh GELU or silu of a gemm's output becomes that gemm's act epilogue.
hkc has no sigmoid or erf op: a Sigmoid or Erf outside these patterns is refused."""
import math

from .values import Expr, close


class Activations:
    def op_Erf(self, n, a, ins):
        return self.unary(n, ins, "Erf")

    def op_Tanh(self, n, a, ins):
        return self.unary(n, ins, "Tanh")

    def op_Sigmoid(self, n, a, ins):
        return self.unary(n, ins, "Sigmoid")

    def op_Relu(self, n, a, ins):
        return self.unary(n, ins, "Relu")

    def op_Gelu(self, n, a, ins):
        """ONNX Gelu (opset 20; torch exports it from opset 20 on): approximate "none" or "tanh"."""
        approx = a.get("approximate", "none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        if approx not in ("none", "tanh"):
            self.unsupported("approximate='%s' (hkc has the erf gelu and the tanh gelu_tanh)" % approx)
        return self.unary(n, ins, "GeluTanh" if approx == "tanh" else "Gelu")

    def lone_reason(self, op):
        """Why an element-wise op outside every pattern is refused."""
        if op == "Sigmoid":
            return ("hkc has no sigmoid op (docs/SPEC.md): a Sigmoid is mapped only as x * sigmoid(x) of the "
                    "same x (silu)")
        if op == "Erf":
            return "hkc has no erf op: an Erf is mapped only in the erf GELU 0.5 * x * (1 + erf(x / sqrt 2))"
        if op in ("Sqrt", "Mean", "Pow", "Reciprocal"):
            return ("this %s is not part of a pattern hkc maps (layernorm, rmsnorm, gelu_tanh): hkc has no "
                    "element-wise %s" % (op, op.lower()))
        return "this %s is not part of a pattern hkc maps (gelu, gelu_tanh, tanh, layernorm, rmsnorm, silu)" % op

    def activation_rows(self, e):
        """e as gelu / gelu_tanh / relu / tanh (a node, or the act epilogue of the gemm that
        produced its input), or None."""
        n = e.node
        g = self.match_gelu(e)
        if g is None and e.op in ("Gelu", "GeluTanh"):
            g = ("gelu" if e.op == "Gelu" else "gelu_tanh", e.args[0])
        if g:
            kind, x = g
            xr = self.materialize(x)
            if kind == "gelu":
                return self.emit("gelu", [xr.name], n.output[0], xr.rest, xr.lay)
            # the epilogue of the gemm that produced x when it has none; else the standalone op
            r = self.gemm_fold(xr, act="gelu_tanh")
            return r if r is not None else self.emit("gelu_tanh", [xr.name], n.output[0], xr.rest, xr.lay)
        if e.op in ("Relu", "Tanh"):  # tanh has no gemm epilogue: always the standalone op
            xr = self.materialize(e.args[0])
            return self.emit(e.op.lower(), [xr.name], n.output[0], xr.rest, xr.lay)
        return None

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
