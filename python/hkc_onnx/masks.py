# SPDX-License-Identifier: Apache-2.0
"""Mask inputs: a value computed from a [batch, seq] (or [batch, h, q, k]) input by nodes hkc
has no op for is kept as a NumPy function of the input (values.MaskFn). Where it meets the
attention scores it is evaluated on probe masks and mapped onto attention's lengths (a key
padding mask: 1 = keep as Hugging Face's attention_mask, or 1 / True = padding as torch's
key_padding_mask) or mask (an additive mask input, as it is)."""
import numpy as np

from .fold import fold
from .values import B0, B1, MaskFn, onnx_shape

MASK_PROBE_ALL = 64  # up to this seq a padding mask is probed with every length; beyond, 16 of them


class Masks:
    def probe(self, src, w, lengths=None, invert=False):
        """A value of src with batch B0 (w = 0) or B1: for a [batch, seq] mask, rows that keep their
        first lengths[b] keys (all when None; lengths may also be the keep rows of 0/1 themselves),
        as ones (invert: as zeros, the rest ones); zeros for an additive mask."""
        b = B0 if w == 0 else B1
        if len(src.rest) != 1:
            return np.zeros((b,) + src.rest, src.dtype)
        seq = src.rest[0]
        lengths = [seq] * b if lengths is None else lengths
        if np.ndim(lengths) == 2:
            m = np.asarray(lengths).astype(bool)
        else:
            m = np.arange(seq)[None, :] < np.array(lengths)[:, None]
        return (~m if invert else m).astype(src.dtype)

    def probe_eval(self, f, w, lengths=None, invert=False):
        return np.asarray(f.ev(self.probe(f.src, w, lengths, invert), w))

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

    def add_mask_fn(self, s, f):
        """scores + f(source): attention's mask (f is an additive mask input as it is) or lengths
        (f turns a [batch, seq] padding mask into 0 / large negative biases)."""
        src, (nh, t, tk) = f.src, s.rest
        if s.lengths is not None or s.mask is not None:
            self.unsupported("a second mask on the same attention scores")
        if len(src.rest) == 3:
            if not f.raw or src.dtype.kind != "f":
                self.unsupported("the additive mask input '%s' is changed before it is added to the scores (only "
                                 "the input itself maps onto attention's mask)" % src.onnx_name)
            if s.merged or src.rest[0] not in (1, nh) or src.rest[1:] != (t, tk):
                self.unsupported("the additive mask input '%s' is not [batch, 1 or %d, %d, %d] added to scores of that "
                                 "shape" % (src.onnx_name, nh, t, tk))
            if src.mask is None:
                src.mask = self.fresh(src.onnx_name)
                self.inputs[src.mask] = src.rest
            return s.like(mask=src.mask)
        seq = src.rest[0]
        what = "the mask computed from input '%s'" % src.onnx_name
        if seq != tk:
            self.unsupported("%s has %d keys, the scores %d" % (what, seq, tk))
        ckey = ("maskfn", f.key, nh, t, tk, s.merged)
        if ckey not in self.memo:  # every layer adds the same mask: probed once
            self.memo[ckey] = (f, self.probe_mask_fn(f, s, what))
        causal, invert = self.memo[ckey][1]
        if src.invert is not None and src.invert != invert:
            self.unsupported("%s keeps the keys where the input is 1 in one attention and where it is 0 in another"
                             % what)
        src.invert = invert
        one, zero = ("1 (True)", "0 (False)") if invert else ("0", "1")  # masked, kept
        if self.padding_mask == "mask":
            if src.mask is None:
                src.mask = self.fresh(src.onnx_name + "_bias")
                self.inputs[src.mask] = (1, t, tk)
                self.input_note[src.mask] = (
                    "replaces ONNX input '%s' [batch, %d]: added to the scaled scores, [b, 0, i, j] = 0 where "
                    "%s[b, j] is %s, -inf where it is %s, the same for every query row i%s" % (
                        src.onnx_name, seq, src.onnx_name, zero, one, " (the causal masking is the node's causal: true)"
                        if causal or s.causal else ""))
            return s.like(mask=src.mask, causal=s.causal or causal)
        if src.lengths is None:
            src.lengths = self.fresh(src.onnx_name + "_lengths")
            self.inputs[src.lengths] = ()
            self.input_dtype[src.lengths] = "i32"
            if invert:
                self.input_note[src.lengths] = (
                    "replaces ONNX input '%s' [batch, %d] (1 / True = padding, torch's key_padding_mask): the number "
                    "of leading zeros of each row (right padding assumed: 0 for j < len, 1 after)" % (
                        src.onnx_name, seq))
            else:
                self.input_note[src.lengths] = (
                    "replaces ONNX input '%s' [batch, %d]: the number of leading ones of each row (right padding "
                    "assumed: 1 for j < len, 0 after)" % (src.onnx_name, seq))
        return s.like(lengths=src.lengths, causal=s.causal or causal)

    def probe_mask_fn(self, f, s, what):
        """Checks on probe masks that f is a key padding mask: 0 / <= -1e4 only; with every key
        kept, nothing or the causal triangle masked; with the first L keys of a row kept, exactly
        the keys j >= L (and the causal ones); with --padding-mask-as mask, on random rows,
        exactly the keys not kept. The polarity: a mask of ones keeps every key (Hugging Face's
        attention_mask), or masks every key (torch's key_padding_mask, True = padding: then a
        mask of zeros keeps them). Returns (whether it masks the causal triangle, the polarity)."""
        (nh, t, tk), seq = s.rest, f.src.rest[0]
        upper = np.triu(np.ones((t, tk), bool), 1)

        def masked(w, lengths, invert):
            b = B0 if w == 0 else B1
            v = self.probe_eval(f, w, lengths, invert)
            shape = onnx_shape(s, b)
            try:
                full_shape = np.broadcast_shapes(v.shape, shape)
            except ValueError:
                full_shape = None
            if full_shape != tuple(shape):
                self.unsupported("%s (%s) does not broadcast to the scores %s" % (what, list(v.shape), list(shape)))
            full = np.broadcast_to(v, shape).reshape(b, nh, t, tk)
            if not np.all((full == 0) | (full <= -1e4)):
                self.unsupported("%s is not 0 (keep) / <= -1e4 (masked) for a mask of ones and zeros" % what)
            return full <= -1e4

        invert = bool(np.all(masked(0, None, False)))  # ones mask every key: 1 = padding
        ones = masked(0, None, invert)
        causal = bool(np.any(ones))
        if causal and not np.array_equal(ones, np.broadcast_to(upper, ones.shape)):
            self.unsupported("%s masks keys of a mask that keeps every key, and not in the causal pattern" % what)
        lens = list(range(0, seq + 1))
        if seq > MASK_PROBE_ALL:
            lens = sorted({0, 1, 2, 3, seq // 2, seq - 2, seq - 1, seq} |
                          {int(v) for v in np.random.default_rng(19).integers(0, seq + 1, 8)})
        probes = [(0, [la, lb]) for la, lb in zip(lens, lens[::-1])] + [(1, [seq, 1, max(1, seq // 2)])]
        for w, lengths in probes:
            want = np.arange(tk)[None, None, None, :] >= np.array(lengths)[:, None, None, None]
            want = want | upper[None, None] if causal else want
            got = masked(w, lengths, invert)
            if not np.array_equal(got, np.broadcast_to(want, got.shape)):
                self.unsupported("%s is not a key padding mask: with the first L keys of a row kept, it does not "
                                 "mask exactly the keys j >= L%s" % (what, " (and the causal ones)" if causal else ""))
        if self.padding_mask == "mask":
            rng = np.random.default_rng(19)
            for _ in range(8):
                rows = rng.integers(0, 2, (B0, seq))
                want = (rows == 0)[:, None, None, :]
                want = want | upper[None, None] if causal else want
                got = masked(0, rows, invert)
                if not np.array_equal(got, np.broadcast_to(want, got.shape)):
                    self.unsupported("%s does not mask exactly the keys whose entry is %s for masks of ones and zeros "
                                     "that are not leading runs (--padding-mask-as lengths maps right padding)" % (
                                         what, "1" if invert else "0"))
        return causal, invert
