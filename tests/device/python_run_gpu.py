# SPDX-License-Identifier: Apache-2.0
"""The hkrt wheel on the GPU machine (tests/device/python_wheel_check.sh installs it; nothing in
the environment names a library, and that machine has no libcjson of its own):
  - import hkrt loads the wheel's hkrt/_libs/libhkrt.so.N and libcjson.so.1;
  - Session.run(**inputs) on a GPU target with torch CUDA tensors: f32 through
    __cuda_array_interface__, the batch following the inputs (a bucket, padded, back), the
    returned dict holding the bound output tensors, an output left unbound after a batch change
    named by hkrt.FailedPrecondition; bf16 through DLPack against the host target's run(**inputs)
    of the same values given as float32 NumPy arrays (converted by hkrt);
  - with the real ml_dtypes (where installed): host bf16 outputs are ml_dtypes.bfloat16 arrays
    with the same bits as without it, and ml_dtypes inputs are accepted.

  python3 tests/device/python_run_gpu.py ELEMENTWISE.hkpack ROWS_BF16.hkpack GPU_TARGET
(packs of tests/specs/op_elementwise.yaml and op_rows_aligned_bf16.yaml for host + GPU_TARGET).
Exits 1 on any failure. Written without device time: not yet run on a GPU."""
import os
import sys

import numpy as np

import hkrt
from hkrt import _arrays

elementwise, rows_bf16, gpu = sys.argv[1:4]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


lib = hkrt.load_library()
libs = os.path.join(os.path.dirname(hkrt.__file__), "_libs")
check(os.path.realpath(lib).startswith(os.path.realpath(libs)), "libhkrt %s from %s" % (hkrt.version(), lib))
cjson = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libcjson" in line})
check(bool(cjson) and all(p.startswith(os.path.realpath(libs)) for p in map(os.path.realpath, cjson)),
      "libcjson from the wheel: %s" % cjson)
check("HKRT_LIBRARY" not in os.environ and "LD_LIBRARY_PATH" not in os.environ, "no HKRT_LIBRARY, no LD_LIBRARY_PATH")

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None
try:
    import torch
except ImportError:
    torch = None
print("ml_dtypes", getattr(ml_dtypes, "__version__", None), "torch", getattr(torch, "__version__", None),
      "numpy", np.__version__, "python", sys.version.split()[0])

if torch is not None and torch.cuda.is_available():
    dev = torch.device("cuda", 0)
    g = torch.Generator(device="cpu").manual_seed(3)
    with hkrt.Pack.open(elementwise, allow_unsigned_native_code=True) as pack, pack.session(target=gpu) as s:
        row = torch.randn(1001, generator=g).to(dev)
        one = torch.tensor([1.25]).to(dev)
        stream = torch.cuda.Stream()
        for batch, bucket in ((5, 5), (3, 5), (1, 1)):
            x = torch.randn(batch, 3, 1001, generator=g).to(dev)
            z = torch.randn(batch, 3, 1001, generator=g).to(dev)
            outs = {n: torch.full((batch, 3, 1001), float("nan"), device=dev) for n in ("y_relu", "y_gelu", "y_silu")}
            with torch.cuda.stream(stream):
                got = s.run(x=x, z=z, row=row, one=one, stream=stream, **outs)
            stream.synchronize()
            check((s.batch, s.bucket) == (batch, bucket), "batch %d: runs batch %d, bucket %d" % (batch, s.batch, s.bucket))
            check(all(got[n] is outs[n] for n in outs), "batch %d: run() returns the bound output tensors" % batch)
            t4 = row.double() * (x.double() + z.double() + row.double()) * one.double()
            ref = {"y_relu": torch.relu(t4), "y_gelu": torch.nn.functional.gelu(t4), "y_silu": torch.nn.functional.silu(t4)}
            err = max(((got[n].double() - ref[n]).abs() / (1 + ref[n].abs())).max().item() for n in ref)
            check(err < 1e-4, "f32 run(**inputs) on %s, batch %d: max rel error %.2e" % (gpu, batch, err))
        try:
            s.run(x=torch.zeros(5, 3, 1001, device=dev), z=torch.zeros(5, 3, 1001, device=dev))
            check(False, "a batch change with the outputs unbound did not raise")
        except hkrt.FailedPrecondition as e:
            check("y_" in e.message, "outputs unbound after the batch change: %s" % e.message[:100])

    with hkrt.Pack.open(rows_bf16, allow_unsigned_native_code=True) as pack, \
            pack.session(target=gpu) as s, pack.session(target=pack.targets[0]) as h:
        ins = {t.name: torch.randn((3,) + t.shape[1:] if t.role == "input" else t.shape, generator=g)
               for t in s.tensors if t.role != "output"}
        bf = {n: t.to(torch.bfloat16) for n, t in ins.items()}
        outs = {t.name: torch.full((3,) + t.shape[1:], float("nan"), dtype=torch.bfloat16, device=dev)
                for t in s.tensors if t.role == "output"}
        got = s.run({n: t.to(dev) for n, t in bf.items()}, stream=torch.cuda.current_stream(), **outs)
        torch.cuda.synchronize()
        host = h.run({n: t.numpy() for n, t in ins.items()})  # float32: hkrt rounds them to bf16
        check((s.batch, s.bucket, h.batch, h.bucket) == (3, 3, 3, 3), "bf16: batch 3 from the inputs on both")
        worst = 0.0
        for n, t in got.items():
            a = t.float().cpu().numpy()
            b = _arrays.bf16_bits_to_f32(np, host[n].view(np.uint16))
            worst = max(worst, float((np.abs(a - b) / (1 + np.abs(b))).max())) if not np.isnan(a).any() else 1e9
        check(worst < 0.15, "bf16 GPU (DLPack) vs host (float32 converted): max rel difference %.3g" % worst)
else:
    check(False, "no torch with CUDA: the GPU part is not run")

if ml_dtypes is not None:
    saved = _arrays._bf16
    with hkrt.Pack.open(rows_bf16, allow_unsigned_native_code=True) as pack, \
            pack.session(target=pack.targets[0]) as h:
        rng = np.random.default_rng(4)
        ins = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in h.tensors if t.role != "output"}
        _arrays._bf16 = _arrays._UNSET  # as imported: ml_dtypes present
        with_ml = h.run({n: a.astype(ml_dtypes.bfloat16) for n, a in ins.items()})
        check(all(a.dtype == np.dtype(ml_dtypes.bfloat16) for a in with_ml.values()),
              "with ml_dtypes %s: host bf16 outputs are ml_dtypes.bfloat16" % ml_dtypes.__version__)
        _arrays._bf16 = None  # as without ml_dtypes
        bits = h.run(ins)
        check(all(a.dtype == np.uint16 for a in bits.values()), "without ml_dtypes: uint16 bits")
        check(all(np.array_equal(with_ml[n].view(np.uint16), bits[n]) for n in bits),
              "ml_dtypes inputs and float32 inputs (converted by hkrt) give the same bits")
        check(all(np.array_equal(a.astype(ml_dtypes.bfloat16).view(np.uint16), _arrays.f32_to_bf16_bits(np, a))
                  for a in ins.values()), "hkrt's float32 -> bf16 rounding equals ml_dtypes'")
    _arrays._bf16 = saved
else:
    print("note: no ml_dtypes here: its path is covered by the stand-in test of tests/python/test_hkrt.py")

print("FAILED: %d" % len(failures) if failures else "python_run_gpu: ok")
sys.exit(1 if failures else 0)
