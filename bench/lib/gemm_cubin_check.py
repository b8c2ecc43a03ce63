#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks and times GEMM cubins (hkc's gemm variants) on an NVIDIA GPU against torch.

Usage: gemm_cubin_check.py DIR [--check] [--bench] [--only CFG]
DIR/manifest.txt lines: cfg cubin kernel dtype(1 f16, 2 bf16) act trans_b bias res threads shared bm bn
Launch: grid = ceil(M/bm) * ceil(N/bn), block = threads, dynamic shared = shared (the variant's launch()).
Numerics: against act(A@B + bias) + res in float64; error reported in units of the output
dtype's rounding and against torch's own bf16/f16 matmul error.
"""
import ctypes, math, sys, os
import torch
import torch.nn.functional as F

d = sys.argv[1]
args = sys.argv[2:]
only = args[args.index("--only") + 1] if "--only" in args else None
torch.zeros(1, device="cuda")
cu = ctypes.CDLL("libcuda.so.1")
cu.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
cu.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
cu.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

ACTS = {0: lambda x: x, 1: F.relu, 2: F.gelu}
kernels = []
for line in open(os.path.join(d, "manifest.txt")):
    f = line.split("#")[0].split()
    if len(f) < 12 or (only and f[0] != only):
        continue
    cfg, cub, name = f[0], f[1], f[2]
    dt, act, tb, bias, res, thr, sh, bm, bn = map(int, f[3:12])
    mod = ctypes.c_void_p()
    data = open(os.path.join(d, cub), "rb").read()
    assert cu.cuModuleLoadData(ctypes.byref(mod), data) == 0, cub
    fn = ctypes.c_void_p()
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0, name
    assert cu.cuFuncSetAttribute(fn, 8, sh) == 0  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    kernels.append(dict(cfg=cfg, fn=fn, name=name, dt=torch.float16 if dt == 1 else torch.bfloat16, act=act, tb=tb,
                        bias=bias, res=res, thr=thr, sh=sh, bm=bm, bn=bn))


def launch(k, A, B, bias, res, C, M, N, K):
    vals = [ctypes.c_void_p(t.data_ptr() if t is not None else 0) for t in (A, B, bias, res, C)]
    vals += [ctypes.c_longlong(M), ctypes.c_longlong(N), ctypes.c_longlong(K)]
    params = (ctypes.c_void_p * 8)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
    grid = math.ceil(M / k["bm"]) * math.ceil(N / k["bn"])
    r = cu.cuLaunchKernel(k["fn"], grid, 1, 1, k["thr"], 1, 1, k["sh"], torch.cuda.current_stream().cuda_stream,
                          params, None)
    assert r == 0, r


def make(k, M, N, K, scale=1.0):
    dt = k["dt"]
    A = (torch.randn(M, K, device="cuda") * scale).to(dt)
    B = (torch.randn(N, K, device="cuda") if k["tb"] else torch.randn(K, N, device="cuda")).mul(scale).to(dt)
    bias = torch.randn(N, device="cuda").to(dt) if k["bias"] else None
    res = torch.randn(M, N, device="cuda").to(dt) if k["res"] else None
    C = torch.full((M, N), float("nan"), device="cuda").to(dt)
    return A, B, bias, res, C


def check(k, M, N, K):
    A, B, bias, res, C = make(k, M, N, K, scale=1.0 / math.sqrt(math.sqrt(K)))
    launch(k, A, B, bias, res, C, M, N, K)
    torch.cuda.synchronize()
    Bm = B.t() if k["tb"] else B
    ref = A.double() @ Bm.double()
    if bias is not None:
        ref = ref + bias.double()
    ref = ACTS[k["act"]](ref)
    if res is not None:
        ref = ref + res.double()
    err = (C.double() - ref).abs()
    # torch's own: matmul in dtype then epilogue in float64, rounded once
    t = (A @ Bm).double()
    if bias is not None:
        t = t + bias.double()
    t = ACTS[k["act"]](t)
    if res is not None:
        t = t + res.double()
    terr = (t.to(k["dt"]).double() - ref).abs()
    eps = 2.0 ** -8 if k["dt"] == torch.bfloat16 else 2.0 ** -11
    ulp = ref.abs().clamp(min=1e-3) * eps
    bad = (err > 2 * ulp + 1e-3).sum().item() + torch.isnan(C).sum().item()
    return err.max().item(), terr.max().item(), bad


def bench(k, M, N, K, it=20):
    A, B, bias, res, C = make(k, M, N, K)
    Bm = B.t() if k["tb"] else B
    for _ in range(3):
        launch(k, A, B, bias, res, C, M, N, K)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(it):
        launch(k, A, B, bias, res, C, M, N, K)
    e.record()
    torch.cuda.synchronize()
    ours = s.elapsed_time(e) / it
    for _ in range(3):
        torch.matmul(A, Bm)
    s.record()
    for _ in range(it):
        torch.matmul(A, Bm)
    e.record()
    torch.cuda.synchronize()
    theirs = s.elapsed_time(e) / it
    fl = 2.0 * M * N * K
    return fl / ours / 1e9, fl / theirs / 1e9


if "--check" in args:
    shapes = [(1, 8, 8), (77, 136, 200), (4097, 264, 72), (256, 512, 1024), (300, 1000, 1000), (129, 8, 4104)]
    for k in kernels:
        for (M, N, K) in shapes:
            me, te, bad = check(k, M, N, K)
            print(f"CHECK {k['cfg']:12s} {k['name']:36s} tb={k['tb']} {M}x{N}x{K}: maxerr {me:.3g} torch {te:.3g} bad {bad}"
                  + ("  <-- FAIL" if bad else ""), flush=True)
if "--bench" in args:
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)] + [(4096, n, kk) for n in (768, 3072, 4096, 14336)
                                                         for kk in (768, 3072, 4096, 14336)]
    if "--quick" in args:
        shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 3072, 768), (4096, 14336, 4096)]
    for k in kernels:
        if "--plain" in args and (k["bias"] or k["res"] or k["act"]):
            continue
        for (M, N, K) in shapes:
            ours, theirs = bench(k, M, N, K)
            print(f"BENCH {k['cfg']:12s} {k['name']:36s} {M}x{N}x{K}: {ours:7.1f} TF/s vs torch {theirs:7.1f} "
                  f"({100 * ours / theirs:5.1f}%)", flush=True)
