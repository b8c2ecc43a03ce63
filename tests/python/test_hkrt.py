# SPDX-License-Identifier: Apache-2.0
"""The hkrt Python package (python/hkrt) on a host pack of tests/specs/op_elementwise.yaml:
opening (file, bytes), the trust policy (hkrt.Untrusted; a pack signed with hkc keygen/sign;
the user's own key, with which hkc build signs, trusted by default; allow_unsigned_code),
tensor metadata, bind checks, runs against an independent float64 NumPy reference (random
inputs, outputs poisoned first), set_batch, profile, and the errors' statuses and messages;
Session.run(inputs) (binding, the batch from the inputs, the outputs returned); bf16 from
NumPy with and without ml_dtypes (a bf16 pack); weights (safetensors, parts, a self-contained
pack); Session.generate against `hkc generate` (an imported generation pack).

Needs HKC (the hkc binary) and libhkrt where hkrt finds it (tests/integration/python.sh sets
HKRT_LIBRARY). Run: python3 -m unittest tests/python/test_hkrt.py"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import hkrt

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "..", "specs", "op_elementwise.yaml")
S, C = 3, 1001                                        # the spec's dims
NODES = {"a1", "a2", "m1", "m2", "u1", "u2", "u3"}   # its graph's nodes
F = {}                                               # fixtures made once: paths, key id


def setUpModule():
    hkc = os.environ.get("HKC")
    if not hkc:
        raise unittest.SkipTest("HKC (the hkc binary) is not set")
    F["dir"] = tempfile.mkdtemp(prefix="hkrt-py-")
    d = F["dir"]

    def hkc_run(*args):
        return subprocess.run([hkc, *args], check=True, capture_output=True, text=True).stdout

    F["pack"] = os.path.join(d, "e.hkpack")
    hkc_run("build", SPEC, "-o", F["pack"], "--target", "host", "-q", "--no-sign")
    F["user"] = os.path.join(d, "u.hkpack")  # signed with the user's key (the tests' own, in the build tree)
    hkc_run("build", SPEC, "-o", F["user"], "--target", "host", "-q")
    out = hkc_run("keygen", "-o", os.path.join(d, "k"))
    F["key_id"] = re.search(r"key id ([0-9a-f]{16})", out).group(1)
    hkc_run("keygen", "-o", os.path.join(d, "other"), "-q")
    F["pub"], F["other_pub"] = os.path.join(d, "k.pub"), os.path.join(d, "other.pub")
    F["signed"] = os.path.join(d, "s.hkpack")
    hkc_run("sign", F["pack"], "--key", os.path.join(d, "k"), "-o", F["signed"], "-q")


def tearDownModule():
    if "dir" in F:
        shutil.rmtree(F["dir"], ignore_errors=True)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def open_pack(**kw):
    return hkrt.Pack.open(F["pack"], allow_unsigned_native_code=True, **kw)


def reference(x, z, row, one):
    """The spec's graph in float64: t4 = (x + z + row) * row * one, then relu, gelu (erf), silu."""
    x, z, row, one = (a.astype(np.float64) for a in (x, z, row, one))
    t4 = row * (x + z + row) * one
    erf = np.vectorize(math.erf)
    return {"y_relu": np.maximum(t4, 0), "y_gelu": 0.5 * t4 * (1 + erf(t4 / math.sqrt(2))),
            "y_silu": t4 / (1 + np.exp(-t4))}


def assert_close(test, got, want, name):
    test.assertEqual(got.shape, want.shape, name)
    test.assertFalse(np.isnan(got).any(), "%s: unwritten (NaN-poisoned) elements" % name)
    err = np.abs(got.astype(np.float64) - want) / (1 + np.abs(want))
    test.assertLess(err.max(), 1e-4, "%s: max relative error %g at %s" % (name, err.max(), np.argmax(err)))


class Inputs:
    """Random inputs and params for a batch, and poisoned output arrays."""

    def __init__(self, batch, seed):
        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((batch, S, C)).astype(np.float32)
        self.z = rng.standard_normal((batch, S, C)).astype(np.float32)
        self.row = rng.uniform(-2, 2, C).astype(np.float32)
        self.one = np.array([rng.uniform(0.5, 1.5)], dtype=np.float32)
        self.outs = {n: np.full((batch, S, C), np.nan, dtype=np.float32) for n in ("y_relu", "y_gelu", "y_silu")}

    def bind(self, sess, outputs=True):
        for name in ("x", "z", "row", "one"):
            sess.bind(name, getattr(self, name))
        if outputs:
            for name, a in self.outs.items():
                sess.bind(name, a)

    def ref(self):
        return reference(self.x, self.z, self.row, self.one)


class TestLibrary(unittest.TestCase):
    def test_version(self):
        self.assertRegex(hkrt.version(), r"^\d+\.\d+\.\d+$")
        self.assertEqual(hkrt.version(), hkrt.__version__, "the package and libhkrt disagree on the version")
        self.assertTrue(os.path.exists(hkrt.load_library()))

    def test_library_not_found(self):
        env = dict(os.environ, HKRT_LIBRARY="/nonexistent/libhkrt.so")
        code = ("import hkrt\ntry:\n    hkrt.version()\nexcept hkrt.Unavailable as e:\n"
                "    print('status', e.status, e.message)\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        self.assertIn("status 5", out)
        self.assertIn("/nonexistent/libhkrt.so", out)


class TestDevicePaths(unittest.TestCase):
    """What of the GPU targets' binding runs without a GPU: the DLPack structure read from a
    NumPy (CPU) capsule, and CPU memory refused for a GPU tensor."""

    def test_dlpack_layout(self):
        from hkrt import _arrays
        a = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)[1:]
        capsule = a.__dlpack__()
        t = _arrays._DLTensor.from_address(_arrays._capsule_pointer(capsule, b"dltensor"))
        self.assertEqual(t.data + t.byte_offset, a.ctypes.data)
        self.assertEqual((t.device_type, t.device_id, t.ndim, t.code, t.bits, t.lanes), (1, 0, 3, 2, 32, 1))
        self.assertEqual([t.shape[i] for i in range(3)], [1, 3, 5])
        info = hkrt.TensorInfo("x", "input", "float32", (1, 3, 5), 60)
        with self.assertRaises(hkrt.InvalidArgument) as cm:
            _arrays._dlpack_address(info, capsule, 0)
        self.assertIn("cpu", cm.exception.message)
        with self.assertRaises(hkrt.InvalidArgument) as cm:  # __dlpack_device__ says CPU
            _arrays.device_object(info, a, 0)
        self.assertIn("not a GPU", cm.exception.message)


class TestOpen(unittest.TestCase):
    def check_pack(self, pack):
        self.assertEqual(pack.name, "op_elementwise")
        self.assertEqual(len(pack.targets), 1)
        self.assertTrue(pack.targets[0].startswith("host-"), pack.targets)
        self.assertEqual(pack.batch_sizes, [1, 5])
        self.assertEqual(pack.batch_policy, "pad")

    def test_file_and_bytes(self):
        with open_pack() as pack:
            self.check_pack(pack)
            self.assertEqual(pack.signature, hkrt.Signature("none", ""))
            self.assertEqual(pack.select_target(), pack.targets[0])
        data = read(F["pack"])
        for source in (data, bytearray(data), memoryview(data)):
            with hkrt.Pack.open(source, allow_unsigned_native_code=True) as pack:
                self.check_pack(pack)
                with pack.session(batch=1) as sess:  # the code loads from the bytes, and runs
                    inp = Inputs(1, seed=3)
                    inp.bind(sess)
                    sess.run()
                    assert_close(self, inp.outs["y_gelu"], inp.ref()["y_gelu"], "y_gelu")

    def test_unsigned_host_code_refused(self):
        for source in (F["pack"], read(F["pack"])):
            with self.assertRaises(hkrt.Untrusted) as cm:
                hkrt.Pack.open(source)
            e = cm.exception
            self.assertIsInstance(e, hkrt.Error)
            self.assertEqual((e.status, e.status_name), (13, "UNTRUSTED"))
            self.assertIn("native host code", e.message)
            self.assertIn("UNTRUSTED", str(e))

    def test_signed_and_trusted(self):
        for key in (F["pub"], hkrt.public_key(F["pub"]), read(F["pub"]).decode()):
            with hkrt.Pack.open(F["signed"], trusted_keys=[F["other_pub"], key], require_signature=True) as pack:
                self.assertEqual(pack.signature, hkrt.Signature("trusted", F["key_id"]))
                with pack.session() as sess:
                    inp = Inputs(1, seed=4)
                    inp.bind(sess)
                    sess.run()
                    assert_close(self, inp.outs["y_silu"], inp.ref()["y_silu"], "y_silu")
        with self.assertRaises(hkrt.Untrusted) as cm:
            hkrt.Pack.open(F["signed"], trusted_keys=[F["other_pub"]])
        self.assertIn("not trusted", cm.exception.message)
        with self.assertRaises(hkrt.Untrusted) as cm:  # unsigned, but a signature is required
            hkrt.Pack.open(F["pack"], allow_unsigned_native_code=True, require_signature=True)
        with hkrt.Pack.open(F["signed"], allow_unsigned_native_code=True) as pack:  # verifies, key unknown
            self.assertEqual(pack.signature, hkrt.Signature("valid", F["key_id"]))
        self.assertEqual(len(hkrt.public_key(F["pub"])), hkrt.HK_PUBLIC_KEY_BYTES)
        with self.assertRaises(hkrt.InvalidArgument):
            hkrt.public_key(b"hk-ed25519-public 1234")

    def test_user_key(self):
        path = hkrt.user_key_path()
        self.assertTrue(path and os.path.exists(path + ".pub"), "hkc build made no user key at %s" % path)
        if os.environ.get("XDG_CONFIG_HOME", "").startswith("/") and not os.environ.get("HKC_KEY"):
            self.assertEqual(path, os.path.join(os.environ["XDG_CONFIG_HOME"], "hkc", "key"))
        self.assertEqual(hkrt.user_public_key(), hkrt.public_key(path + ".pub"))
        with hkrt.Pack.open(F["user"]) as pack:  # trusted by default, no argument
            self.assertEqual(pack.signature.state, "trusted")
            with pack.session() as sess:
                inp = Inputs(1, seed=6)
                inp.bind(sess)
                sess.run()
                assert_close(self, inp.outs["y_relu"], inp.ref()["y_relu"], "y_relu")
        with self.assertRaises(hkrt.Untrusted) as cm:
            hkrt.Pack.open(F["user"], trust_user_key=False)
        self.assertIn("not trusted", cm.exception.message)
        with self.assertRaises(hkrt.Untrusted):  # the user key vouches only for what it signed
            hkrt.Pack.open(F["pack"])
        old = os.environ.get("HKC_KEY")
        try:  # HKC_KEY moves it, as for hkc
            os.environ["HKC_KEY"] = os.path.join(F["dir"], "k")
            self.assertEqual(hkrt.user_public_key(), hkrt.public_key(F["pub"]))
            with hkrt.Pack.open(F["signed"]) as pack:
                self.assertEqual(pack.signature, hkrt.Signature("trusted", F["key_id"]))
            os.environ["HKC_KEY"] = os.path.join(F["dir"], "absent")
            self.assertIsNone(hkrt.user_public_key())
        finally:
            if old is None:
                os.environ.pop("HKC_KEY", None)
            else:
                os.environ["HKC_KEY"] = old

    def test_allow_unsigned_code(self):
        with hkrt.Pack.open(F["pack"], allow_unsigned_code=True) as pack:
            self.assertEqual(pack.signature, hkrt.Signature("none", ""))
        with self.assertRaises(hkrt.Untrusted):
            hkrt.Pack.open(F["pack"], allow_unsigned_code=True, require_signature=True)

    def test_open_errors(self):
        with self.assertRaises(hkrt.IOFailure) as cm:
            hkrt.Pack.open(os.path.join(F["dir"], "missing.hkpack"), allow_unsigned_native_code=True)
        self.assertIn("missing.hkpack", cm.exception.message)
        data = bytearray(read(F["pack"]))
        data[len(data) // 2] ^= 0x40
        with self.assertRaises(hkrt.Corrupt) as cm:
            hkrt.Pack.open(data, allow_unsigned_native_code=True)
        self.assertTrue(cm.exception.message)
        signed = bytearray(read(F["signed"]))
        signed[len(signed) // 2] ^= 0x40  # damage after signing: refused, whatever the reason says
        with self.assertRaises((hkrt.Untrusted, hkrt.Corrupt)):
            hkrt.Pack.open(signed, trusted_keys=[F["pub"]])
        with self.assertRaises(hkrt.InvalidArgument):
            hkrt.Pack.open(12345)


class TestSession(unittest.TestCase):
    def setUp(self):
        self.pack = open_pack()
        self.sess = self.pack.session(batch=1)

    def tearDown(self):
        self.pack.close()

    def test_tensors(self):
        T = hkrt.TensorInfo
        want = [T("x", "input", "float32", (1, S, C), S * C * 4), T("z", "input", "float32", (1, S, C), S * C * 4),
                T("row", "param", "float32", (C,), C * 4), T("one", "param", "float32", (1,), 4)]
        want += [T(n, "output", "float32", (1, S, C), S * C * 4) for n in ("y_relu", "y_gelu", "y_silu")]
        self.assertEqual(sorted(self.sess.tensors), sorted(want))
        self.assertEqual(self.sess.tensor("row"), want[2])
        self.assertTrue(self.sess.target.startswith("host-"))
        self.assertEqual(self.sess.device_name, "host")
        self.assertEqual((self.sess.batch, self.sess.bucket), (1, 1))
        self.assertEqual(self.sess.launch_mode[0], "stream")

    def test_bind_checks(self):
        good = np.zeros((1, S, C), np.float32)
        cases = [("x", np.zeros((1, S, C + 1), np.float32), "shape"), ("x", np.zeros((2, S, C), np.float32), "shape"),
                 ("x", np.zeros((1, S, C), np.float64), "dtype"), ("x", np.zeros((1, S, C), np.float16), "dtype"),
                 ("x", np.zeros((1, S, C), ">f4"), "dtype"), ("x", good.tolist(), "NumPy"),
                 ("row", np.zeros((1, C), np.float32), "shape")]
        for name, array, what in cases:
            with self.assertRaises(hkrt.InvalidArgument, msg=(name, what)) as cm:
                self.sess.bind(name, array)
            self.assertIn(what, cm.exception.message)
            self.assertIn("'%s'" % name, cm.exception.message)
        ro = good.copy()
        ro.flags.writeable = False
        self.sess.bind("x", ro)  # inputs may be read-only
        with self.assertRaises(hkrt.InvalidArgument) as cm:
            self.sess.bind("y_relu", ro)
        self.assertIn("read-only", cm.exception.message)
        with self.assertRaises(hkrt.NotFound) as cm:
            self.sess.bind("nope", good)
        self.assertIn("y_gelu", cm.exception.message)  # the names are listed

    def test_run_unbound_input(self):
        inp = Inputs(1, seed=5)
        self.sess.bind("x", inp.x)
        self.sess.bind("row", inp.row)
        self.sess.bind("one", inp.one)
        with self.assertRaises(hkrt.FailedPrecondition) as cm:
            self.sess.run()
        self.assertRegex(cm.exception.message, r"unbound.*\bz\b")  # libhkrt names the unbound tensor

    def test_run_matches_reference(self):
        inp = Inputs(1, seed=1)
        inp.bind(self.sess)
        self.sess.run()
        ref = inp.ref()
        for name, got in inp.outs.items():  # written in place into the bound arrays
            assert_close(self, got, ref[name], name)
        outs = self.sess.outputs()
        self.assertEqual(set(outs), set(ref))
        for name in ref:
            np.testing.assert_array_equal(outs[name], inp.outs[name])

    def test_staged_and_automatic_buffers(self):
        inp = Inputs(1, seed=2)
        # a strided input, a misaligned param and a misaligned output: staged copies are bound
        wide = np.zeros((1, S, 2 * C), np.float32)
        wide[:, :, ::2] = inp.x
        x_view = wide[:, :, ::2]
        raw = np.zeros(C * 4 + 16 + 4, np.uint8)
        off = 4 + (-raw.ctypes.data) % 16
        row_mis = raw[off:off + C * 4].view(np.float32)
        row_mis[:] = inp.row
        self.assertNotEqual(row_mis.ctypes.data % 16, 0)
        raw_out = np.zeros(S * C * 4 + 16 + 4, np.uint8)
        off = 4 + (-raw_out.ctypes.data) % 16
        gelu_mis = raw_out[off:off + S * C * 4].view(np.float32).reshape(1, S, C)
        gelu_mis[:] = np.nan
        self.sess.bind("x", x_view)
        self.sess.bind("z", inp.z)
        self.sess.bind("row", row_mis)
        self.sess.bind("one", inp.one)
        self.sess.bind("y_gelu", gelu_mis)
        self.sess.run()  # y_relu and y_silu unbound: the session allocates them
        ref = inp.ref()
        assert_close(self, gelu_mis, ref["y_gelu"], "y_gelu (staged)")
        outs = self.sess.outputs()
        for name in ref:
            assert_close(self, outs[name], ref[name], name + " (outputs())")
        # a staged input is read again at each run
        x2 = Inputs(1, seed=9).x
        wide[:, :, ::2] = x2
        self.sess.run()
        assert_close(self, self.sess.outputs()["y_relu"], reference(x2, inp.z, inp.row, inp.one)["y_relu"],
                     "y_relu after changing the staged input")
        # after a batch change, the outputs the session allocated are allocated again at the new size
        self.sess.set_batch(5)
        inp5 = Inputs(5, seed=8)
        self.sess.bind("x", inp5.x)
        self.sess.bind("z", inp5.z)
        self.sess.run()  # row (staged), one: still bound
        ref = reference(inp5.x, inp5.z, inp.row, inp.one)
        self.assertEqual(self.sess.outputs()["y_silu"].shape, (5, S, C))
        assert_close(self, self.sess.outputs()["y_silu"], ref["y_silu"], "y_silu batch 5")

    def test_set_batch(self):
        Inputs(1, seed=6).bind(self.sess)
        self.sess.set_batch(5)
        self.assertEqual((self.sess.batch, self.sess.bucket), (5, 5))
        self.assertEqual(self.sess.tensor("x").shape, (5, S, C))
        self.assertEqual(self.sess.tensor("row").shape, (C,))
        with self.assertRaises(hkrt.FailedPrecondition):  # x and z changed size: unbound
            self.sess.run()
        for batch, bucket in ((5, 5), (3, 5), (1, 1)):
            self.sess.set_batch(batch)
            self.assertEqual((self.sess.batch, self.sess.bucket), (batch, bucket))
            inp = Inputs(batch, seed=10 + batch)
            inp.bind(self.sess)
            self.sess.run()
            ref = inp.ref()
            for name, got in inp.outs.items():
                assert_close(self, got, ref[name], "%s batch %d" % (name, batch))
        with self.assertRaises(hkrt.NotFound) as cm:
            self.sess.set_batch(6)
        self.assertIn("5", cm.exception.message)  # the buckets are listed
        self.assertEqual(self.sess.batch, 1)

    def test_profile(self):
        inp = Inputs(1, seed=7)
        inp.bind(self.sess)
        prof = self.sess.profile(repeats=3)
        self.assertGreaterEqual(len(prof), 1)
        self.assertLessEqual(len(prof), len(NODES))
        seen = []
        for p in prof:
            self.assertIsInstance(p, hkrt.LaunchProfile)
            self.assertTrue(p.kernel)
            self.assertTrue(p.nodes)
            self.assertGreater(p.us, 0)
            seen += p.nodes
        self.assertEqual(sorted(seen), sorted(NODES), "each spec node computed by exactly one launch")
        ref = inp.ref()
        for name, got in inp.outs.items():  # profile leaves a normal run's outputs
            assert_close(self, got, ref[name], name + " after profile")
        with self.assertRaises(hkrt.InvalidArgument):
            self.sess.profile(repeats=0)

    def test_session_errors(self):
        with self.assertRaises(hkrt.NotFound) as cm:
            self.pack.session(batch=7)
        self.assertTrue(cm.exception.message)
        with self.assertRaises(hkrt.NotFound):
            self.pack.session(target="sm_90a")
        with self.assertRaises(hkrt.InvalidArgument):
            self.pack.session(launch_mode="fast")
        with self.assertRaises(hkrt.FailedPrecondition):
            self.sess.run()  # nothing bound
        self.pack.close()  # closes its sessions first
        with self.assertRaises(hkrt.FailedPrecondition) as cm:
            self.sess.run()
        self.assertIn("closed", cm.exception.message)
        with self.assertRaises(hkrt.FailedPrecondition):
            self.pack.name


PARTS_SPEC = """hkc: 1
name: pw
dtype: f32
batch_sizes: [1, 2]
inputs: {x: [batch, 5, 7]}
params:
  w: {shape: [7, 4], parts: [p.a, p.b]}
  b: [4]
graph:
  - {name: g, op: gemm, in: [x, w], bias: b, out: y}
outputs: [y]
"""


def write_safetensors(path, tensors):
    """A safetensors file of float32 arrays (8-byte length, JSON header, raw little-endian data)."""
    import json
    import struct
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class TestWeights(unittest.TestCase):
    """Session.bind_weights (safetensors, a name map, a param made of parts), Session.parts and
    is_bound, and a self-contained pack (hkc build --weights): Pack.weight_count, the stored
    params bound at session creation, Pack.session(no_pack_weights=True)."""

    @classmethod
    def setUpClass(cls):
        d = F["dir"]
        rng = np.random.default_rng(11)
        cls.a, cls.b2 = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4, 4))
        cls.bias = rng.uniform(-1, 1, 4)
        cls.spec = os.path.join(d, "pw.yaml")
        with open(cls.spec, "w") as f:
            f.write(PARTS_SPEC)
        cls.st = os.path.join(d, "pw.safetensors")
        write_safetensors(cls.st, {"p.a": cls.a, "p.b": cls.b2, "model.bias": cls.bias})
        cls.bad = os.path.join(d, "pw_bad.safetensors")
        write_safetensors(cls.bad, {"p.a": cls.a, "p.b": cls.b2[:3], "model.bias": cls.bias})
        cls.pack = os.path.join(d, "pw.hkpack")
        cls.self_pack = os.path.join(d, "pw_self.hkpack")
        hkc = os.environ["HKC"]
        subprocess.run([hkc, "build", cls.spec, "-o", cls.pack, "--target", "host", "-q"], check=True)
        mp = os.path.join(d, "pw.map")
        with open(mp, "w") as f:
            f.write("b model.bias\n")
        subprocess.run([hkc, "build", cls.spec, "-o", cls.self_pack, "--target", "host", "-q", "--weights", cls.st,
                        "--weights-map", mp], check=True)

    def expected(self, x):
        w = np.concatenate([self.a, self.b2]).astype(np.float32).astype(np.float64)
        return x.astype(np.float64) @ w + self.bias.astype(np.float32)

    def run_x(self, s, seed=3):
        x = np.random.default_rng(seed).standard_normal((1, 5, 7)).astype(np.float32)
        y = np.full((1, 5, 4), np.nan, dtype=np.float32)
        s.bind("x", x)
        s.bind("y", y)
        s.run()
        return x, y

    def test_bind_weights_parts_and_map(self):
        with hkrt.Pack.open(self.pack, allow_unsigned_native_code=True) as p, p.session() as s:
            self.assertEqual(p.weight_count, 0)
            self.assertEqual(s.parts("w"), ["p.a", "p.b"])
            self.assertEqual(s.parts("b"), [])
            self.assertFalse(s.is_bound("w"))
            # a mismatch binds nothing and names the param
            with self.assertRaises(hkrt.InvalidArgument) as cm:
                s.bind_weights(self.bad, names={"b": "model.bias"})
            self.assertIn("tensor w", str(cm.exception))
            self.assertFalse(s.is_bound("w") or s.is_bound("b"))
            # without the map, b is missing: all_params refuses
            with self.assertRaises(hkrt.NotFound) as cm:
                s.bind_weights(self.st, all_params=True)
            self.assertIn("b", str(cm.exception))
            self.assertEqual(s.bind_weights(self.st, names={"b": "model.bias"}, all_params=True), 2)
            self.assertTrue(s.is_bound("w") and s.is_bound("b"))
            x, y = self.run_x(s)
            np.testing.assert_allclose(y, self.expected(x), rtol=1e-5, atol=1e-5)

    def test_self_contained_pack(self):
        with hkrt.Pack.open(self.self_pack, allow_unsigned_native_code=True) as p:
            self.assertEqual(p.weight_count, 2)
            with p.session() as s:
                self.assertTrue(s.is_bound("w") and s.is_bound("b"))
                x, y = self.run_x(s, seed=5)
                np.testing.assert_allclose(y, self.expected(x), rtol=1e-5, atol=1e-5)
            with p.session(no_pack_weights=True) as s:
                self.assertFalse(s.is_bound("w"))
                with self.assertRaises(hkrt.FailedPrecondition):
                    self.run_x(s)


class TestRunInputs(unittest.TestCase):
    """Session.run(inputs): binds, picks the batch from the inputs' leading dimension, runs and
    returns every output; the run() of before (no inputs, a positional stream) still works."""

    def setUp(self):
        self.pack = open_pack()
        self.sess = self.pack.session(batch=1)

    def tearDown(self):
        self.pack.close()

    def check(self, out, inp, batch, what):
        ref = inp.ref()
        self.assertEqual(set(out), set(ref), what)
        for name, got in out.items():
            self.assertEqual(got.shape, (batch, S, C), "%s %s" % (what, name))
            assert_close(self, got, ref[name], "%s %s" % (what, name))

    def test_keywords_dict_and_batches(self):
        inp1 = Inputs(1, seed=21)
        out1 = self.sess.run(x=inp1.x, z=inp1.z, row=inp1.row, one=inp1.one)
        self.check(out1, inp1, 1, "batch 1")
        kept = {n: a.copy() for n, a in out1.items()}
        for batch, bucket in ((5, 5), (3, 5), (1, 1)):  # a bucket, padded, back: the batch follows the inputs
            inp = Inputs(batch, seed=30 + batch)
            inp.row, inp.one = inp1.row, inp1.one    # params stay bound from the first call
            out = self.sess.run({"x": inp.x, "z": inp.z})
            self.assertEqual((self.sess.batch, self.sess.bucket), (batch, bucket))
            self.check(out, inp, batch, "batch %d" % batch)
        for name, a in out1.items():  # later runs never write into arrays run() returned
            np.testing.assert_array_equal(a, kept[name], name)
        # the run() of before: returns None, the outputs are read with outputs()
        inp = Inputs(1, seed=40)
        inp.bind(self.sess, outputs=False)
        self.assertIsNone(self.sess.run())
        self.assertIsNone(self.sess.run(None))
        self.assertIsNone(self.sess.run(0))          # a stream handle, positionally (host: ignored)
        self.assertIsNone(self.sess.run(stream=None))
        self.check(self.sess.outputs(), inp, 1, "run() then outputs()")

    def test_outputs_the_caller_bound(self):
        inp = Inputs(1, seed=22)
        mine = np.full((1, S, C), np.nan, np.float32)
        self.sess.bind("y_gelu", mine)
        out = self.sess.run(x=inp.x, z=inp.z, row=inp.row, one=inp.one)
        self.assertIs(out["y_gelu"], mine)           # written in place, returned as is
        self.check(out, inp, 1, "bound output")
        inp5 = Inputs(5, seed=23)
        mine5 = np.full((5, S, C), np.nan, np.float32)  # outputs may be given too
        out = self.sess.run(x=inp5.x, z=inp5.z, row=inp5.row, one=inp5.one, y_relu=mine5)
        self.assertIs(out["y_relu"], mine5)
        self.check(out, inp5, 5, "output given to run()")

    def test_run_errors(self):
        inp = Inputs(1, seed=24)
        with self.assertRaises(hkrt.NotFound) as cm:
            self.sess.run(x=inp.x, nope=inp.x)
        self.assertIn("'nope'", cm.exception.message)
        with self.assertRaises(hkrt.NotFound) as cm:  # past the largest bucket
            self.sess.run(x=np.zeros((6, S, C), np.float32))
        self.assertIn("5", cm.exception.message)
        with self.assertRaises(hkrt.InvalidArgument) as cm:  # the batch fits, another dim does not
            self.sess.run(x=inp.x, z=np.zeros((1, S, C - 1), np.float32))
        self.assertIn("'z'", cm.exception.message)
        with self.assertRaises(hkrt.InvalidArgument) as cm:
            self.sess.run({"x": inp.x}, x=inp.x)
        self.assertIn("twice", cm.exception.message)
        with self.assertRaises(hkrt.FailedPrecondition) as cm:  # z, row, one unbound: libhkrt names one
            self.sess.run(x=inp.x)
        self.assertIn("unbound", cm.exception.message)
        self.pack.close()
        with self.assertRaises(hkrt.FailedPrecondition):
            self.sess.run(x=inp.x)


BF16_SPEC = """hkc: 1
name: eb
dtype: bf16
batch_sizes: [1, 4]
inputs: {x: [batch, 3, 40]}
params: {g: [40]}
graph:
  - {name: m, op: mul, in: [x, g], out: t}
  - {name: r, op: relu, in: [t], out: y}
outputs: [y]
"""


def bf16_round(a):
    """float32 -> the nearest bfloat16 (ties to even), as float32: an independent formulation."""
    a = np.asarray(a, np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    low, hi = u & 0xFFFF, u >> 16
    up = (low > 0x8000) | ((low == 0x8000) & ((hi & 1) == 1))
    return ((hi + up) << 16).astype(np.uint32).view(np.float32)


class TestBfloat16(unittest.TestCase):
    """bf16 tensors from NumPy: float32 arrays converted (round to nearest even), uint16 raw
    bits, float32 arrays bound to bf16 outputs; outputs the session allocates are uint16 bits
    without ml_dtypes and ml_dtypes.bfloat16 arrays with it (checked with a stand-in module,
    and with the real one where it is installed)."""

    @classmethod
    def setUpClass(cls):
        cls.spec = os.path.join(F["dir"], "eb.yaml")
        with open(cls.spec, "w") as f:
            f.write(BF16_SPEC)
        cls.pack = os.path.join(F["dir"], "eb.hkpack")
        subprocess.run([os.environ["HKC"], "build", cls.spec, "-o", cls.pack, "--target", "host", "-q"], check=True)
        rng = np.random.default_rng(5)
        cls.x = rng.standard_normal((3, 3, 40)).astype(np.float32)
        cls.g = rng.uniform(-2, 2, 40).astype(np.float32)
        cls.want = bf16_round(np.maximum(bf16_round(cls.x) * bf16_round(cls.g), 0))

    def setUp(self):
        from hkrt import _arrays
        self.arrays = _arrays
        self.saved = (sys.modules.get("ml_dtypes", "absent"), _arrays._bf16)

    def tearDown(self):
        module, cached = self.saved
        if module == "absent":
            sys.modules.pop("ml_dtypes", None)
        else:
            sys.modules["ml_dtypes"] = module
        self.arrays._bf16 = cached

    def use_ml_dtypes(self, module):
        """module: a module to import as ml_dtypes, or None for 'not installed'."""
        sys.modules["ml_dtypes"] = module
        self.arrays._bf16 = self.arrays._UNSET

    def bits(self, a):
        return np.asarray(a).view(np.uint16)

    def check_y(self, y_bits):
        got = self.arrays.bf16_bits_to_f32(np, y_bits)
        self.assertTrue(np.abs(got).max() > 0, "all zeros")
        # the kernel computes in float32 and rounds once: within one bf16 step of the reference
        np.testing.assert_allclose(got, self.want, rtol=2.0 ** -7, atol=1e-30)

    def test_rounding(self):
        f = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8 + 2 ** -20), np.finfo(np.float32).max, -0.0, np.inf, -np.inf,
                      1e-40, 65504.0], np.float32)
        want = [0x3F80, 0x3F82, 0xBF81, 0x7F80, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x4780]
        self.assertEqual(self.arrays.f32_to_bf16_bits(np, f).tolist(), want)
        nan = self.arrays.f32_to_bf16_bits(np, np.array([np.nan, -np.nan], np.float32))
        self.assertTrue(np.isnan(self.arrays.bf16_bits_to_f32(np, nan)).all())
        r = np.random.default_rng(3).standard_normal(10000).astype(np.float32) * 100
        np.testing.assert_array_equal(self.arrays.bf16_bits_to_f32(np, self.arrays.f32_to_bf16_bits(np, r)),
                                      bf16_round(r))

    def test_without_ml_dtypes(self):
        self.use_ml_dtypes(None)  # import ml_dtypes raises ImportError
        with hkrt.Pack.open(self.pack, allow_unsigned_native_code=True) as p, p.session() as s:
            out = s.run(x=self.x, g=self.g)  # float32 in: converted
            self.assertEqual((s.batch, s.bucket), (3, 4))
            self.assertEqual(out["y"].dtype, np.uint16)  # the raw bits, as before ml_dtypes support
            self.check_y(out["y"])
            self.assertEqual(s.outputs()["y"].dtype, np.uint16)
            bits_x = self.arrays.f32_to_bf16_bits(np, self.x)  # uint16 bits in: bound as they are
            out = s.run(x=bits_x)
            np.testing.assert_array_equal(self.bits(out["y"]), self.arrays.f32_to_bf16_bits(np, self.want))
            y32 = np.full((3, 3, 40), np.nan, np.float32)  # a float32 array bound to a bf16 output
            s.bind("y", y32)
            self.assertIs(s.run(x=self.x)["y"], y32)
            np.testing.assert_array_equal(y32, self.want)
            with self.assertRaises(hkrt.InvalidArgument) as cm:
                s.run(x=self.x.astype(np.float64))
            self.assertIn("float32 (converted)", cm.exception.message)

    def test_with_ml_dtypes_stand_in(self):
        # a stand-in for ml_dtypes: a distinct 2-byte NumPy dtype (a one-field record) plays
        # bfloat16; what hkrt does with it (allocate, accept, view as bits) is all it needs
        import types
        fake = types.ModuleType("ml_dtypes")
        fake.bfloat16 = np.dtype([("bf16", "<u2")])
        self.use_ml_dtypes(fake)
        with hkrt.Pack.open(self.pack, allow_unsigned_native_code=True) as p, p.session() as s:
            out = s.run(x=self.x, g=self.g)
            self.assertEqual(out["y"].dtype, fake.bfloat16)
            self.check_y(self.bits(out["y"]))
            self.assertEqual(s.outputs()["y"].dtype, fake.bfloat16)
            xb = self.arrays.f32_to_bf16_bits(np, self.x).view(fake.bfloat16)  # inputs of that dtype
            np.testing.assert_array_equal(self.bits(s.run(x=xb)["y"]), self.bits(out["y"]))
            wide = np.zeros((3, 3, 80), np.uint16).view(fake.bfloat16)  # a strided one: staged
            wide[:, :, ::2] = xb
            np.testing.assert_array_equal(self.bits(s.run(x=wide[:, :, ::2])["y"]), self.bits(out["y"]))

    def test_with_ml_dtypes(self):
        try:
            import ml_dtypes
        except ImportError:
            self.skipTest("ml_dtypes is not installed (Debian 12 has no python3-ml-dtypes): the stand-in "
                          "test covers hkrt's side")
        self.use_ml_dtypes(ml_dtypes)
        with hkrt.Pack.open(self.pack, allow_unsigned_native_code=True) as p, p.session() as s:
            out = s.run(x=self.x, g=self.g.astype(ml_dtypes.bfloat16))
            self.assertEqual(out["y"].dtype, np.dtype(ml_dtypes.bfloat16))
            np.testing.assert_allclose(out["y"].astype(np.float32), self.want, rtol=2.0 ** -7, atol=1e-30)
            np.testing.assert_array_equal(self.bits(self.x.astype(ml_dtypes.bfloat16)),
                                          self.arrays.f32_to_bf16_bits(np, self.x))


class TestGenerate(unittest.TestCase):
    """Session.generate on a generation pack (hkc import hf --generate of the llama config of
    tests/integration/gen_configs, weights from gen_reference.py, bound by bind_weights with
    the importer's name map): the same ids as `hkc generate`, greedy and sampled."""

    def test_generate_matches_hkc(self):
        import json
        d, hkc = F["dir"], os.environ["HKC"]
        integ = os.path.join(HERE, "..", "integration")
        cfg = os.path.join(integ, "gen_configs", "llama.json")
        spec, mp = os.path.join(d, "gen.yaml"), os.path.join(d, "gen.map")
        st, pack = os.path.join(d, "gen.safetensors"), os.path.join(d, "gen.hkpack")
        env = dict(os.environ, HKC_PYTHON=sys.executable)
        subprocess.run([hkc, "import", "hf", cfg, "--generate", "--max-seq", "64", "--slots", "4", "--token-buckets",
                        "1,4,16,64", "--dtype", "f32", "--targets", "host", "-o", spec, "--weights-map-out", mp, "-q"],
                       check=True, env=env, capture_output=True)
        subprocess.run([sys.executable, os.path.join(integ, "gen_reference.py"), "weights", cfg, st], check=True,
                       capture_output=True)
        subprocess.run([hkc, "build", spec, "-o", pack, "--target", "host", "-q"], check=True)
        prompts = [[5, 17, 42], [1, 2]]
        ids = []
        for i, p in enumerate(prompts):
            ids += ["--ids", os.path.join(d, "p%d.npy" % i)]
            np.save(ids[-1], np.array(p, np.int32))
        names = {}
        with open(mp) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and not line.startswith("#"):
                    names[parts[0]] = parts[1]
        for sampling in ([], ["--temperature", "0.8", "--top-k", "20", "--sample-seed", "3"]):
            want = json.loads(subprocess.run([hkc, "generate", pack, "--weights", st, "--weights-map", mp, *ids, "-n", "8",
                                              "--allow-unsigned-native", "--json", *sampling], check=True,
                                             capture_output=True, text=True).stdout)["outputs"]
            kw = {"temperature": 0.8, "top_k": 20, "seed": 3} if sampling else {}
            with hkrt.Pack.open(pack, allow_unsigned_native_code=True) as p, p.session() as s:
                self.assertEqual(s.bind_weights(st, names=names, all_params=True),
                                 len([t for t in s.tensors if t.role == "param"]))
                got = s.generate(prompts, max_new_tokens=8, **kw)
            self.assertEqual(got, want, "sampling %s" % (sampling or "greedy"))
            self.assertEqual([len(g) for g in got], [8, 8])


if __name__ == "__main__":
    unittest.main()
