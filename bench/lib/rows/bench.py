# SPDX-License-Identifier: Apache-2.0
"""GPU side of the memory-bound variant bench: compiles bench/lib/rows/gen/*.cu (from gen.sh)
with nvcc for sm_90, launches them through libcuda (ctypes) on torch tensors with the
launch dims hkc computed, checks each against torch in float64 and times the big shapes
against torch and a device-to-device copy.  usage: python3 bench/lib/rows/bench.py GEN_DIR"""
import ctypes, json, os, subprocess, sys
import torch
import torch.nn.functional as F

gen = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else ""
cuda = ctypes.CDLL("libcuda.so.1")
torch.cuda.init(); torch.empty(1, device="cuda")
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
mods = {}

def func(name):
    if name in mods: return mods[name]
    src = os.path.join(gen, name + ".cu"); cub = "/tmp/" + name + ".cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", "-o", cub, src], check=True)
    data = open(cub, "rb").read()
    mod = ctypes.c_void_p(); fn = ctypes.c_void_p()
    assert cuda.cuModuleLoadData(ctypes.byref(mod), data) == 0
    assert cuda.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()) == 0
    mods[name] = fn
    return fn

def launch(fn, dims, args):
    g, b, sh = (int(v) for v in dims.split())
    keep = []
    for a in args:
        if isinstance(a, torch.Tensor): keep.append(ctypes.c_void_p(a.data_ptr()))
        elif isinstance(a, float): keep.append(ctypes.c_float(a))
        else: keep.append(ctypes.c_int64(a))
    arr = (ctypes.c_void_p * len(keep))(*[ctypes.cast(ctypes.pointer(k), ctypes.c_void_p) for k in keep])
    rc = cuda.cuLaunchKernel(fn, g, 1, 1, b, 1, 1, sh, None, arr, None)
    assert rc == 0, rc

def timeit(f, iters=30):
    for _ in range(3): f()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2] * 1e-3

torch.manual_seed(0)
cases = json.load(open(os.path.join(gen, "cases.json")))
fails = 0
for c in cases:
    if only and only not in c["kernel"]: continue
    dt = DT[c["dtype"]]; op = c["op"]; fn = func(c["kernel"])
    big = c.get("rows", 0) * c.get("cols", 0) >= 1 << 26 or c.get("n", 0) >= 1 << 26
    if "rows" in c:
        R, C = c["rows"], c["cols"]
        x = (torch.randn(R, C, device="cuda") * 2 + 5).to(dt)
        if op == "softmax": x = (torch.randn(R, C, device="cuda") * 4).to(dt)
        gm = torch.randn(C, device="cuda").to(dt); bt = torch.randn(C, device="cuda").to(dt)
        out = torch.full_like(x, float("nan"))
        x64 = x.double()
        if op == "layernorm":
            args = [x, gm, bt, out, R, C, 1e-5]
            ref = F.layer_norm(x64, (C,), gm.double(), bt.double(), 1e-5); tl = lambda: F.layer_norm(x, (C,), gm, bt, 1e-5)
        elif op == "rmsnorm":
            args = [x, gm, out, R, C, 1e-6]
            ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * gm.double(); tl = lambda: F.rms_norm(x, (C,), gm, 1e-6)
        else:
            args = [x, out, R, C]; ref = torch.softmax(x64, -1); tl = lambda: torch.softmax(x, -1)
        nbytes = 2 * x.numel() * x.element_size()
        shape = f"{R}x{C}"
    else:
        n, nb = c["n"], c["nb"]
        a = torch.randn(n, device="cuda").to(dt); b = torch.randn(nb, device="cuda").to(dt)
        out = torch.full_like(a, float("nan"))
        if op in ("add", "mul"):
            args = [a, b, out, n, n, nb]
            bb = b.double().repeat(n // nb)
            ref = a.double() + bb if op == "add" else a.double() * bb
            tl = (lambda: a.view(-1, nb) + b) if op == "add" else (lambda: a.view(-1, nb) * b)
            nbytes = (2 if nb == n else 1) * a.numel() * a.element_size() + out.numel() * out.element_size()
        else:
            args = [a, out, n]
            ref = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[op](a.double())
            tl = {"relu": lambda: F.relu(a), "gelu": lambda: F.gelu(a), "silu": lambda: F.silu(a)}[op]
            nbytes = 2 * a.numel() * a.element_size()
        shape = f"n={n} nb={nb}"
    launch(fn, c["dims"], args); torch.cuda.synchronize()
    err = (out.double() - ref).abs()
    lowp = tl().double().reshape(ref.shape)
    terr = (lowp - ref).abs().max().item()
    merr = err.max().item() if err.numel() else 0.0
    finite = bool(torch.isfinite(out).all())
    ok = finite and merr <= max(2.0 * terr, 1e-6 if dt == torch.float32 else 1e-3) * 1.0001
    fails += not ok
    line = f"{'OK  ' if ok else 'FAIL'} {c['kernel']:22s} {shape:20s} err {merr:.3e} (torch {terr:.3e})"
    if big:
        t = timeit(lambda: launch(fn, c["dims"], args)); tt = timeit(tl)
        src = x if "rows" in c else a; dst = torch.empty_like(src)
        tc = timeit(lambda: dst.copy_(src)); cbytes = 2 * src.numel() * src.element_size()
        line += f" | {t*1e6:7.1f} us {nbytes/t/1e12:5.2f} TB/s = {100*(nbytes/t)/(cbytes/tc):5.1f}% of copy {cbytes/tc/1e12:.2f} | torch {nbytes/tt/1e12:5.2f} TB/s"
    print(line, flush=True)
print("FAILS", fails)
