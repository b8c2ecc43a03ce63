# SPDX-License-Identifier: Apache-2.0
"""Rotary position embedding: rotate-half rotary on a heads view, x * cos + cat(-x2, x1) * sin
(Slice halves, Neg, Concat, Mul by constant tables, Add), becomes an hkc rope node whose theta
is recovered from the tables and checked against the spec's formula."""
import math

import numpy as np

from .values import Const, RopePart


class Rope:
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
        out = self.emit("rope", [src.name], src.name + "_rope", src.rest, src.lay, heads=v.nh, theta=theta)
        return v.like(src=out)

