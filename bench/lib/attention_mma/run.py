# SPDX-License-Identifier: Apache-2.0
import ctypes, glob, os, subprocess, sys, math
from concurrent.futures import ThreadPoolExecutor
import torch
import torch.nn.functional as F
"""GPU half of `bench/run.py attention --mma-tiles`: python3 bench/lib/attention_mma/run.py GEN_DIR
(GEN_DIR from gen.sh). CHECK_PREFIX (default k_8_64_1) picks the configurations whose numerics are
checked, CHECK_ALL=1 all; ONLY=a,b keeps the kernels whose names contain one of them."""
gen = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else 'build-dev/bench/attention_mma')
names = sorted(os.path.basename(p)[:-3] for p in glob.glob(gen + "/k_*.cu"))
only = os.environ.get('ONLY')
if only: names = [n for n in names if any(o in n for o in only.split(','))]

def build(n):
    so = f'/tmp/{n}.so'
    r = subprocess.run(['nvcc', '-O3', '-arch=sm_90', '-shared', '-Xcompiler', '-fPIC', '-Xptxas', '-v', '-o', so, f"{gen}/{n}.cu"],
                       capture_output=True, text=True)
    if r.returncode: print(n, r.stderr[-3000:]); return n, None
    regs = [l for l in r.stderr.splitlines() if 'Used' in l or 'spill' in l]
    return n, (so, ' | '.join(x.strip() for x in regs[-2:]))

with ThreadPoolExecutor(16) as ex: built = dict(ex.map(build, names))
fns = {}
for n, b in built.items():
    if not b: continue
    f = ctypes.CDLL(b[0]).hk_launch
    f.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_longlong] * 11 + [ctypes.c_float, ctypes.c_int]
    f.restype = ctypes.c_int
    fns[n] = f
    print(n, b[1])
sys.stdout.flush()

def dtype_of(n): return torch.float16 if '_t1_' in n else torch.bfloat16
def dh_of(n): return int(n.split('_d')[-1])

def ref(q4, k4, v4, causal, scale):
    H, Hkv = q4.shape[1], k4.shape[1]
    k4 = k4.repeat_interleave(H // Hkv, dim=1).double(); v4 = v4.repeat_interleave(H // Hkv, dim=1).double()
    s = q4.double() @ k4.transpose(-1, -2) * scale
    if causal:
        Sq, Skv = s.shape[-2], s.shape[-1]
        m = torch.ones(Sq, Skv, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(m, float('-inf'))
    return torch.softmax(s, -1) @ v4

def call(f, dh, q, k, v, o, B, Sq, Skv, H, Hkv, ldq, ldkv, qc, kc, vc, causal, scale, reps=1):
    rc = f(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), B, Sq, Skv, H, Hkv, ldq, ldkv, qc, kc, vc, int(causal), scale, reps)
    assert rc == 0, rc

def check(n, f, B, Sq, Skv, H, Hkv, causal, packed=False, extra=0, scale=None):
    dt, dh = dtype_of(n), dh_of(n)
    scale = scale if scale is not None else 1.0 / math.sqrt(dh)
    torch.manual_seed(Sq * 7 + Skv + H)
    if packed:
        qkv = torch.randn(B, Sq, 3 * H * dh, device='cuda', dtype=dt)
        q = k = v = qkv; ldq = ldkv = 3 * H * dh; qc, kc, vc = 0, H * dh, 2 * H * dh
        q4 = qkv[..., :H*dh].view(B, Sq, H, dh).transpose(1, 2)
        k4 = qkv[..., H*dh:2*H*dh].view(B, Sq, H, dh).transpose(1, 2)
        v4 = qkv[..., 2*H*dh:].view(B, Sq, H, dh).transpose(1, 2)
    else:
        q = torch.randn(B, Sq, H * dh, device='cuda', dtype=dt)
        k = torch.randn(B, Skv, Hkv * dh + extra, device='cuda', dtype=dt)
        v = torch.randn(B, Skv, Hkv * dh + extra, device='cuda', dtype=dt)
        ldq, ldkv, qc, kc, vc = H * dh, Hkv * dh + extra, 0, extra, extra // 2 // 8 * 8
        q4 = q.view(B, Sq, H, dh).transpose(1, 2)
        k4 = k[..., kc:kc + Hkv*dh].reshape(B, Skv, Hkv, dh).transpose(1, 2)
        v4 = v[..., vc:vc + Hkv*dh].reshape(B, Skv, Hkv, dh).transpose(1, 2)
    o = torch.full((B, Sq, H * dh), float('nan'), device='cuda', dtype=dt)
    call(f, dh, q, k, v, o, B, Sq, Skv, H, Hkv, ldq, ldkv, qc, kc, vc, causal, scale)
    torch.cuda.synchronize()
    r = ref(q4, k4, v4, causal, scale)
    got = o.view(B, Sq, H, dh).transpose(1, 2).double()
    kr, vr = k4.repeat_interleave(H // Hkv, 1), v4.repeat_interleave(H // Hkv, 1)
    base = F.scaled_dot_product_attention(q4, kr, vr, is_causal=bool(causal), scale=scale).double() if Sq == Skv or not causal else None
    err = (got - r).abs().max().item()
    berr = (base - r).abs().max().item() if base is not None else float('nan')
    ok = err == err and err <= max(4 * berr if berr == berr else 0, 2e-2 if dt == torch.bfloat16 else 4e-3)
    print(f'{"OK  " if ok else "FAIL"} {n} B{B} Sq{Sq} Skv{Skv} H{H}/{Hkv} causal{int(causal)} packed{int(packed)} extra{extra}: max err {err:.2e} (sdpa {berr:.2e})')
    return ok

cases = [(2, 77, 77, 4, 2, 1, False, 16), (1, 1, 1, 2, 2, 0, False, 0), (1, 1, 1, 2, 1, 1, False, 0),
         (2, 4097, 4097, 2, 1, 1, False, 0), (1, 4097, 4097, 2, 2, 0, False, 8), (2, 130, 50, 4, 4, 1, False, 0),
         (2, 50, 130, 4, 4, 1, False, 0), (2, 200, 333, 4, 2, 0, False, 0), (2, 77, 77, 3, 3, 0, True, 0),
         (1, 300, 300, 3, 3, 1, True, 0), (1, 1024, 1024, 8, 8, 1, False, 0), (1, 64, 64, 1, 1, 1, False, 0),
         (1, 128, 129, 1, 1, 0, False, 0)]
fails = 0
for n, f in fns.items():
    if not n.startswith(os.environ.get('CHECK_PREFIX', 'k_8_64_1')) and not os.environ.get('CHECK_ALL'): continue
    for c in cases:
        fails += not check(n, f, *c)
    fails += not check(n, f, 1, 100, 100, 2, 2, 0, scale=0.5)
print('numerics failures:', fails); sys.stdout.flush()

# ---- speed
def bench(fn, reps=20):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); fn(reps) if fn.__code__.co_argcount else [fn() for _ in range(reps)]; e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / reps * 1e-3

B, H = 8, 16
for dt in (torch.float16, torch.bfloat16):
    for dh in (64, 128):
        for S in (1024, 4096):
            for causal in (0, 1):
                flops = 4 * B * H * S * S * dh / (2 if causal else 1)
                q = torch.randn(B, S, H * dh, device='cuda', dtype=dt); k = torch.randn_like(q); v = torch.randn_like(q)
                o = torch.empty_like(q)
                q4, k4, v4 = (x.view(B, S, H, dh).transpose(1, 2).contiguous() for x in (q, k, v))
                ts = bench(lambda: F.scaled_dot_product_attention(q4, k4, v4, is_causal=bool(causal)))
                line = f'{str(dt)[6:]:8s} d{dh:3d} S{S:5d} causal{causal}: sdpa {flops/ts/1e12:6.1f} TF/s'
                for n, f in fns.items():
                    if dtype_of(n) != dt or dh_of(n) != dh: continue
                    t = bench(lambda reps=1: call(f, dh, q, k, v, o, B, S, S, H, H, H*dh, H*dh, 0, 0, 0, causal, 1/math.sqrt(dh), reps))
                    line += f' | {n[2:8]} {flops/t/1e12:6.1f} ({100*ts/t:3.0f}%)'
                print(line); sys.stdout.flush()
