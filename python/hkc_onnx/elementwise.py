# SPDX-License-Identifier: Apache-2.0
"""Element-wise nodes (Add, Sub, Mul, Div, Pow, and the unary ops) over rows: combined lazily
into expressions (values.Expr) that are matched against the patterns of activations.py and
norms.py when something needs the value, else emitted as add / mul nodes (a constant operand
becomes a param; an [out] constant added to a gemm's output becomes its bias)."""
import numpy as np

from .values import ROWSLIKE, Const, Expr, MaskFn, RopePart, RowSlice, Rows, Scores, View, lay_desc


class Elementwise:
    def ew(self, op, ins, n):
        """The expression op(ins) over rows (all in one layout) and constants, or None."""
        args, rest, lay = [], None, None
        for v in ins:
            if isinstance(v, ROWSLIKE):
                if lay is not None and v.lay != lay:
                    self.unsupported("it combines %s and %s: the same rows in two layouts" % (
                        lay_desc(lay, rest), lay_desc(v.lay, v.rest)))
                lay = v.lay
                args.append(v)
                rest = v.rest if rest is None else np.broadcast_shapes(rest, v.rest)
        for i, v in enumerate(ins):
            if isinstance(v, Const):
                s = v.static_b() if lay == "b" else v.static()
                if s is None:
                    return None
                c = Const(s, s, v.origin)
                c.table = v.table
                args.insert(i, c)
            elif not isinstance(v, ROWSLIKE):
                return None
        for v in args:
            if not isinstance(v, Const):
                continue
            if lay == "b":
                full = (1,) + tuple(rest)
                try:
                    if np.broadcast_shapes(full, v.v0.shape) != full:
                        return None
                except ValueError:
                    return None
            elif v.v0.size != 1 and (v.v0.shape[-1] != rest[-1] or v.v0.size != rest[-1]):
                return None  # another layout: scalars and per-column constants only
        return Expr(op, args, tuple(rest), n, lay)

    def binary(self, n, a, ins, op):
        x, y = ins
        sx, sy = self.scalar(x), self.scalar(y)
        # attention scores: scale and mask
        if isinstance(x, Scores) and not x.probs and op in ("Mul", "Div") and sy is not None:
            return x.like(scale=x.scale * (sy if op == "Mul" else 1 / sy))
        if isinstance(y, Scores) and not y.probs and op == "Mul" and sx is not None:
            return y.like(scale=y.scale * sx)
        if op == "Add" and (isinstance(x, Scores) or isinstance(y, Scores)):
            s, mk = (x, y) if isinstance(x, Scores) else (y, x)
            if not s.probs and isinstance(mk, MaskFn):
                return self.add_mask_fn(s, mk)
            if s.probs or not isinstance(mk, Const) or mk.static() is None:
                return None
            return self.add_mask(s, mk.static())
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
            return Expr(op, [ins[0]], ins[0].rest, n, ins[0].lay)
        return None

    def op_Sqrt(self, n, a, ins):
        return self.unary(n, ins, "Sqrt")

    def op_Reciprocal(self, n, a, ins):
        return self.unary(n, ins, "Reciprocal")

    def op_Neg(self, n, a, ins):
        x = ins[0]
        if isinstance(x, RopePart) and x.kind == "half" and x.which == 1:
            return RopePart("neghalf", x.view, 1)
        return self.unary(n, ins, "Neg")

    def op_Identity(self, n, a, ins):
        return ins[0]

    def op_Cast(self, n, a, ins):
        from .fold import onnx_np_dtype

        if onnx_np_dtype(a["to"]).kind != "f":
            return None
        return ins[0]  # float -> float: the spec's dtype decides

    def op_Dropout(self, n, a, ins):
        return [ins[0]]

    # ------------------------------------------------------------------ canonical forms
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

    # ------------------------------------------------------------------ emitting
    def expr_rows(self, e):
        """An expression's value as an hkc tensor: a pattern (gelu, gelu_tanh, layernorm, rmsnorm,
        silu) as one node, else add / mul nodes."""
        n = e.node
        r = self.activation_rows(e)
        if r is not None:
            return r
        r = self.norm_rows(e)
        if r is not None:
            return r
        if e.op in ("Add", "Sub"):
            terms, cs = self.sum_form(e)
            return self.sum_rows(e, terms, cs)
        if e.op in ("Mul", "Div", "Neg", "Reciprocal"):
            return self.prod_rows(e)
        self.cur = n
        self.unsupported(self.lone_reason(e.op))

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
            cur = self.emit("add", [cur.name, tr.name], n.output[0], np.broadcast_shapes(cur.rest, tr.rest), cur.lay)
        for sign, c in left:
            r = None
            if r is None:
                p = self.const_operand(c, cur.rest, n.name + "_const", float(sign))
                r = self.emit("add", [cur.name, p], n.output[0], cur.rest, cur.lay)
            cur = r
        return cur

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
                parts.append(r if r is not None else self.emit("silu", [xr.name], n.output[0], xr.rest, xr.lay))
            else:
                if isinstance(f, Expr) and f.op in ("Sigmoid", "Erf", "Sqrt", "Mean", "Pow"):
                    self.cur = f.node
                    self.unsupported(self.lone_reason(f.op))
                parts.append(self.materialize(f))
        cur = parts[0]
        for p in parts[1:]:
            cur = self.emit("mul", [cur.name, p.name], n.output[0], np.broadcast_shapes(cur.rest, p.rest), cur.lay)
        if consts or coef != 1.0:
            total = np.full(cur.rest[-1], coef)
            for v, c in consts:
                total = total * v
            origin = consts[0][1] if len(consts) == 1 and coef == 1.0 else Const(total, total)
            p = self.param(origin, n.name + "_const", np.ascontiguousarray(
                np.broadcast_to(total, np.broadcast_shapes(total.shape, (cur.rest[-1],))), np.float32))
            cur = self.emit("mul", [cur.name, p], n.output[0], cur.rest, cur.lay)
        return cur
