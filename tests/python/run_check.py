# SPDX-License-Identifier: Apache-2.0
"""An installed hkrt package, as a user meets it: `import hkrt` finds libhkrt by itself and
Session.run(**inputs) runs a host pack of tests/specs/op_elementwise.yaml, checked against a
float64 NumPy reference at a bucket's batch (5), a padded one (3) and back (1).

    python3 tests/python/run_check.py PACK [EXPECTED_LIBRARY_PREFIX]

PACK: built with `hkc build tests/specs/op_elementwise.yaml --target host`. With
EXPECTED_LIBRARY_PREFIX, the library hkrt loaded must lie under it (the wheel's hkrt/_libs/,
an install prefix's lib/). Prints what it loaded and "run_check: ok"; exits 1 on a mismatch.
Used by tests/integration/python.sh (the wheel in a fresh venv) and install.sh (cmake --install).
"""
import math
import os
import sys

import numpy as np

import hkrt


def reference(x, z, row, one):
    x, z, row, one = (a.astype(np.float64) for a in (x, z, row, one))
    t4 = row * (x + z + row) * one
    erf = np.vectorize(math.erf)
    return {"y_relu": np.maximum(t4, 0), "y_gelu": 0.5 * t4 * (1 + erf(t4 / math.sqrt(2))),
            "y_silu": t4 / (1 + np.exp(-t4))}


def main():
    pack_path = sys.argv[1]
    lib = hkrt.load_library()
    print("hkrt %s from %s, libhkrt %s from %s" % (hkrt.__version__, os.path.dirname(hkrt.__file__),
                                                  hkrt.version(), lib))
    if len(sys.argv) > 2 and not os.path.realpath(lib).startswith(os.path.realpath(sys.argv[2]) + os.sep):
        sys.exit("FAIL: libhkrt loaded from %s, not from under %s" % (lib, sys.argv[2]))
    rng = np.random.default_rng(7)
    row = rng.uniform(-2, 2, 1001).astype(np.float32)
    one = np.array([1.25], dtype=np.float32)
    with hkrt.Pack.open(pack_path, allow_unsigned_native_code=True) as pack, pack.session() as s:
        earlier = None
        for batch in (5, 3, 1):
            x = rng.standard_normal((batch, 3, 1001)).astype(np.float32)
            z = rng.standard_normal((batch, 3, 1001)).astype(np.float32)
            out = s.run(x=x, z=z, row=row, one=one)
            want = reference(x, z, row, one)
            if set(out) != set(want):
                sys.exit("FAIL: run() returned %s, want %s" % (sorted(out), sorted(want)))
            if (s.batch, s.bucket) != (batch, 5 if batch > 1 else 1):
                sys.exit("FAIL: batch %d ran as batch %d, bucket %d" % (batch, s.batch, s.bucket))
            for name, got in out.items():
                err = np.abs(got.astype(np.float64) - want[name]) / (1 + np.abs(want[name]))
                if got.shape != want[name].shape or not np.isfinite(got).all() or err.max() > 1e-4:
                    sys.exit("FAIL: %s at batch %d: shape %s, max relative error %g"
                             % (name, batch, got.shape, err.max()))
                if not np.abs(got).max() > 0:
                    sys.exit("FAIL: %s at batch %d is all zeros" % (name, batch))
            if earlier is not None and not np.array_equal(earlier[0]["y_relu"], earlier[1]):
                sys.exit("FAIL: a later run overwrote the arrays an earlier run() returned")
            earlier = (out, out["y_relu"].copy())
            print("batch %d (bucket %d): %s match the reference" % (batch, s.bucket, ", ".join(sorted(out))))
    print("run_check: ok")


if __name__ == "__main__":
    main()
