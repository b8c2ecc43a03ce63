# SPDX-License-Identifier: Apache-2.0
"""The hkrt Python package on a GPU target (device machine, with torch): binding torch CUDA
tensors through __cuda_array_interface__ (f32) and DLPack (bf16, which torch cannot describe
in the array interface), the device/dtype/layout checks, runs on torch's stream against a
float64 reference (f32) and the host target's results (bf16, bound as NumPy uint16 bits; its
outputs ml_dtypes.bfloat16 arrays where ml_dtypes imports, else uint16 bits),
profile and the launch mode.

  HKRT_LIBRARY=path/libhkrt.so PYTHONPATH=python python3 tests/device/python_gpu.py \\
      ELEMENTWISE.hkpack ROWS_BF16.hkpack GPU_TARGET
(packs of tests/specs/op_elementwise.yaml and op_rows_aligned_bf16.yaml with host + GPU_TARGET).
Exits 1 on any failure. Written without device time: not yet run on a GPU (CI checks only the
DLPack structure's layout, on NumPy's CPU capsules: tests/python/test_hkrt.py)."""
import sys

import numpy as np
import torch

import hkrt

elementwise, rows_bf16, gpu = sys.argv[1:4]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def raises(exc, fn, what):
    try:
        fn()
    except exc as e:
        check(True, "%s -> %s: %s" % (what, type(e).__name__, e.message[:100]))
        return
    check(False, what + " did not raise " + exc.__name__)


dev = torch.device("cuda", 0)
g = torch.Generator(device="cpu").manual_seed(1)
with hkrt.Pack.open(elementwise, allow_unsigned_native_code=True) as pack, \
        pack.session(batch=5, target=gpu) as s:
    print("target", s.target, "launch mode", s.launch_mode, "pdl", s.pdl_count)
    ins = {t.name: torch.randn(t.shape, generator=g).to(dev) for t in s.tensors if t.role != "output"}
    outs = {t.name: torch.full(t.shape, float("nan"), device=dev) for t in s.tensors if t.role == "output"}
    for name, t in {**ins, **outs}.items():
        s.bind(name, t)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        s.run(stream=stream)
    stream.synchronize()
    x, z, row, one = (ins[n].double() for n in ("x", "z", "row", "one"))
    t4 = row * (x + z + row) * one
    ref = {"y_relu": torch.relu(t4), "y_gelu": torch.nn.functional.gelu(t4), "y_silu": torch.nn.functional.silu(t4)}
    for name, want in ref.items():
        err = ((outs[name].double() - want).abs() / (1 + want.abs())).max().item()
        check(err < 1e-4, "f32 %s on %s: max rel error %.2e" % (name, gpu, err))
    raises(hkrt.InvalidArgument, lambda: s.bind("x", ins["x"].half()), "f16 tensor for f32")
    raises(hkrt.InvalidArgument, lambda: s.bind("x", ins["x"].cpu()), "CPU tensor on a GPU target")
    raises(hkrt.InvalidArgument, lambda: s.bind("x", ins["x"].transpose(1, 2).contiguous().transpose(1, 2)),
           "non-contiguous tensor")
    raises(hkrt.InvalidArgument, lambda: s.bind("x", ins["x"][:1]), "wrong shape")
    raises(hkrt.InvalidArgument, lambda: s.bind("x", np.zeros((5, 3, 1001), np.float32)), "NumPy array on a GPU target")
    prof = s.profile(repeats=5)
    check(len(prof) >= 1 and all(p.us > 0 for p in prof),
          "profile: %d launches %s" % (len(prof), [(p.kernel, round(p.us, 2)) for p in prof]))
    check(sorted(n for p in prof for n in p.nodes) == sorted(["a1", "a2", "m1", "m2", "u1", "u2", "u3"]),
          "profile covers every node once")


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


with hkrt.Pack.open(rows_bf16, allow_unsigned_native_code=True) as pack, \
        pack.session(batch=1, target=gpu) as s, pack.session(batch=1, target=pack.targets[0]) as h:
    check(h.target.startswith("host"), "host session " + h.target)
    ins = {t.name: torch.randn(t.shape, generator=g).to(torch.bfloat16) for t in s.tensors if t.role != "output"}
    outs = {t.name: torch.full(t.shape, float("nan"), dtype=torch.bfloat16, device=dev)
            for t in s.tensors if t.role == "output"}
    for name, t in ins.items():
        s.bind(name, t.to(dev))  # DLPack: torch has no __cuda_array_interface__ for bf16
        h.bind(name, t.view(torch.int16).numpy().view(np.uint16))
    for name, t in outs.items():
        s.bind(name, t)
    s.run(stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    h.run()
    host = h.outputs()
    want_dtype = "bfloat16" if hkrt._arrays.bf16_dtype(np) is not None else "uint16"
    check(all(a.dtype.name == want_dtype for a in host.values()),
          "host bf16 outputs are %s arrays (ml_dtypes %s)" % (want_dtype, "present" if want_dtype == "bfloat16" else "absent"))
    host = {n: a.view(np.uint16) for n, a in host.items()}  # the bits, either way
    worst = 0.0
    for name, t in outs.items():
        got = t.float().cpu().numpy()
        want = bf16_to_f32(host[name])
        if np.isnan(got).any():
            check(False, "bf16 %s: NaN (unwritten) elements" % name)
            continue
        worst = max(worst, float((np.abs(got - want) / (1 + np.abs(want))).max()))
    check(worst < 0.15, "bf16 GPU vs host, every output: max rel difference %.3g" % worst)
    raises(hkrt.InvalidArgument, lambda: s.bind("x8", ins["x8"].float().to(dev)), "f32 tensor for bf16 (DLPack path)")

print("FAILED: %d" % len(failures) if failures else "python_gpu: ok")
sys.exit(1 if failures else 0)
