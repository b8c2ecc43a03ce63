#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hkc against its PyTorch peers on one spec (`bench/run.py peers`), on the GPU machine.

The same function (the spec's graph, in the spec's dtype), the same random weights and the
same inputs, in five systems, per batch size:
  eager         PyTorch eager (bench/lib/peers_torch.py: the spec as a torch.nn.Module)
  cudagraph     the same eager module captured in a torch.cuda.CUDAGraph, replayed
  compile       torch.compile(module, dynamic=False), compiled per batch size
  max-autotune  torch.compile(module, mode="max-autotune", dynamic=False), per batch size
  hkc           the pack through libhkrt (the hkrt package): torch tensors bound by device
                pointer, the pack's CUDA graph replayed on torch's stream
Every system's output is compared with eager's (bf16 bound, peers_common.TOL_VS_EAGER)
and, at the smallest batch, with a float64 evaluation of tests/device/check.py's ops; a
mismatch fails the run (exit 1) after the table is printed.

Latency: median over many calls of the CUDA-event time around each call (calls back to
back), after warm-up, inputs rotated over several sets (copies of different random
inputs; weights shared), in interleaved rounds; the same protocol for every system.
Compile time of a torch.compile system = its first call (compile + first run). Also: the
pack's cold start (build-dev/hk_bench_cold, several fresh processes) and torch.compile's
first call in a fresh process (cold and warm inductor cache). Writes JSON lines (--out,
appended) and prints a table: each system's median ms, hkc / best peer, bar, verdict.

usage: peers.py SPEC PACK [--batches 1,8] [--out FILE] [--budget S] [--skip-max-autotune]
                [--compile-timeout S] [--systems eager,hkc,...] [--cold-runs N] ...
       peers.py SPEC PACK --dry-run [--hkrt build/libhkrt.so] [--cold-bin build/hk_bench_cold]
--dry-run needs no PyTorch and no GPU: it checks the arguments, the spec and the pack,
prints the plan and the time estimate, and, when the pack has a host target, runs the pack
there through libhkrt against the NumPy float64 reference and times its cold start.
"""
import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import hkrt_load  # noqa: E402  (the hkrt package, python/hkrt)
import peers_common as pc  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("pack")
    ap.add_argument("--batches", help="comma-separated batch sizes (default: the spec's batch_sizes)")
    ap.add_argument("--systems", default=",".join(pc.SYSTEMS),
                    help="comma-separated subset of %s (eager is always run: it is the reference)" % ",".join(pc.SYSTEMS))
    ap.add_argument("--skip-max-autotune", action="store_true", help="leave out torch.compile mode=max-autotune")
    ap.add_argument("--compile-timeout", type=float, default=300.0,
                    help="seconds one torch.compile first call may take (each batch and mode); one over it is\n"
                         "abandoned, recorded, and that mode is not tried at larger batches (default 300)")
    ap.add_argument("--budget", type=float, default=None,
                    help="wall-clock seconds for the whole run: work that would not fit is skipped and recorded")
    ap.add_argument("--out", help="JSON lines file (appended)")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--rotate", type=int, default=0,
                    help="input sets to rotate among (default: enough to pass twice the 60 MB L2, 2 to 8)")
    ap.add_argument("--time-per-point", type=float, default=0.6,
                    help="seconds of timed calls per system and batch, split over the rounds (default 0.6)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved timing rounds (default 2)")
    ap.add_argument("--check-batch", type=int, help="batch of the float64 check (default: the smallest)")
    ap.add_argument("--target", help="hkc session target (default: what libhkrt picks on this machine)")
    ap.add_argument("--hkc-sessions", choices=("per-set", "one"), default="per-set",
                    help="per-set: one hkc session per rotated input set, each with its own workspace (as\n"
                         "the CUDA-graph peer keeps one graph per set; the default, every table so far);\n"
                         "one: a single session whose inputs are rebound to the next set before each call\n"
                         "(the binding's CPU time is inside the timed call)")
    ap.add_argument("--hkrt", help="libhkrt.so (default: $HKRT_LIB or build-dev/libhkrt.so)")
    ap.add_argument("--hkc", default=os.path.join(ROOT, "build-dev", "hkc"), help="hkc binary (versions only)")
    ap.add_argument("--cold-bin", default=os.path.join(ROOT, "build-dev", "hk_bench_cold"))
    ap.add_argument("--cold-runs", type=int, default=5, help="hk_bench_cold processes (median; 0: none)")
    ap.add_argument("--cold-batch", type=int, help="batch of both cold starts (default: the smallest)")
    ap.add_argument("--no-torch-cold", action="store_true", help="skip torch.compile's first call in fresh processes")
    ap.add_argument("--reference-ops", action="store_true",
                    help="peers run check.py's run_node for every op (x @ W gemm, its rope) instead of\n"
                         "F.linear on [N, K] weights and cached rope tables")
    ap.add_argument("--dry-run", action="store_true", help="no torch, no GPU: see the end of the description")
    ap.add_argument("--torch-first-call", action="store_true", help=argparse.SUPPRESS)  # fresh-process worker
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)                        # its batch
    a = ap.parse_args(argv)
    a.spec, a.pack = os.path.abspath(a.spec), os.path.abspath(a.pack)
    return a


def hkrt_path(a):
    return a.hkrt or os.environ.get("HKRT_LIB") or os.path.join(ROOT, "build-dev", "libhkrt.so")


def choose(a, spec):
    batches = [int(b) for b in a.batches.split(",")] if a.batches else list(spec["batch_sizes"])
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in pc.SYSTEMS]
    if unknown:
        raise SystemExit("peers.py: unknown system(s) %s (known: %s)" % (unknown, ", ".join(pc.SYSTEMS)))
    if a.skip_max_autotune and "max-autotune" in systems:
        systems.remove("max-autotune")
    if "eager" not in systems:
        systems.insert(0, "eager")
    return batches, [s for s in pc.SYSTEMS if s in systems]


# ---- the CPU path: no torch ---------------------------------------------------------------------
def np_storage(values, dtype):
    """float64 values (already rounded to dtype) -> a 64-byte-aligned array of the dtype's
    bits: uint16 for bf16, float16, float32."""
    import numpy as np
    v = np.ascontiguousarray(values)
    if dtype == "bf16":
        bits = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    else:
        bits = v.astype(np.float16 if dtype == "f16" else np.float32)
    raw = np.empty(bits.nbytes + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + bits.nbytes].view(bits.dtype).reshape(bits.shape)
    out[...] = bits
    return out


def np_values(storage, dtype):
    import numpy as np
    if dtype == "bf16":
        return (storage.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return storage.astype(np.float64)


def host_check(a, spec, batch, target, W):
    """The pack on the host target through libhkrt (the same binding code as on the GPU),
    against reference.py's NumPy float64 evaluation; a few timed runs. Returns ok."""
    import numpy as np
    import reference
    dt = spec["dtype"]
    rng = np.random.default_rng(a.seed)
    shp = pc.shapes(spec, batch)
    vals = {}
    for n in list(spec["inputs"]) + list(spec["params"]):
        mean, std = pc.init_rule(spec, n)
        vals[n] = reference.round_to(rng.normal(mean, std, size=shp[n]), dt)
    pack, s = hkrt_load.open_session(a.pack, batch, target=target)
    bufs = {}
    for info in s.tensors:
        n = info.name
        if info.role == "output":
            bufs[n] = np_storage(np.zeros(info.shape), dt)
            bufs[n].view(np.uint8)[...] = 0xFF  # NaN in f32, f16 and bf16
        else:
            if tuple(vals[n].shape) != info.shape:
                raise SystemExit("tensor %s: the pack says %s, the spec %s" % (n, list(info.shape), list(vals[n].shape)))
            bufs[n] = np_storage(vals[n], dt)
        s.bind(n, bufs[n])
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        s.run()
        times.append((time.perf_counter() - t0) * 1e3)
    t = dict(vals)
    ok = True
    for node in spec["graph"]:
        if node["op"] not in ("gemm", "add", "mul", "relu", "gelu", "silu", "layernorm", "rmsnorm", "softmax",
                              "attention"):
            print("  host check: reference.py has no op %s; the comparison is skipped" % node["op"])
            s.close()
            pack.close()
            return True
        t[node["out"]] = reference.round_to(reference.run_node(node, t), dt)
    norm_tol, el_tol = reference.TOL[dt]
    for o in spec["outputs"]:
        got = np_values(bufs[o], dt)
        ref = t[o]
        rel = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)) if np.all(np.isfinite(got)) else math.nan
        worst = float(np.max(np.abs(got - ref) / (el_tol + el_tol * np.abs(ref)))) if np.all(np.isfinite(got)) else math.nan
        good = rel <= norm_tol and worst <= 1.0
        ok &= good
        W({"kind": "compare", "spec": spec["name"], "batch": batch, "system": "hkc", "against": "float64",
           "rel": rel, "worst": worst, "ok": good, "target": s.target, "dry_run": True})
        print("  host check %s batch %d output %s: rel %.2e, worst %.2f: %s" % (spec["name"], batch, o, rel, worst,
                                                                               "ok" if good else "MISMATCH"))
    W({"kind": "latency", "spec": spec["name"], "batch": batch, "system": "hkc", "ms": pc.median(times),
       "p10": min(times), "p90": max(times), "iters": len(times), "rotate": 1, "target": s.target, "dry_run": True})
    s.close()
    pack.close()
    return ok


def dry_run(a, spec, batches, systems, W, info):
    ok = True
    roles = pc.param_roles(spec)
    print("params (how they are drawn):")
    for n in spec["params"]:
        mean, std = pc.init_rule(spec, n)
        print("  %-10s %-16s %-18s N(%g, %.4g^2)" % (n, pc.shapes(spec, 1)[n], roles[n], mean, std))
    for b in batches:
        print("batch %d: inputs %s" % (b, {n: s for n, s in pc.shapes(spec, b).items() if n in spec["inputs"]}))
    host = [t for t in info["targets"] if t.startswith("host")]
    check_batch = a.check_batch or min(batches)
    if host:
        ok &= host_check(a, spec, check_batch, host[0], W)
        if a.cold_runs:
            rec, err = pc.cold_hkc(a.cold_bin, a.pack, a.cold_batch or min(batches), a.cold_runs, target=host[0])
            if err:
                print("  cold start: " + err)
                ok = False
            else:
                W(dict(rec, kind="cold_hkc", spec=spec["name"], batch=a.cold_batch or min(batches), target=host[0],
                       dry_run=True))
                print("  cold start on %s (median of %d processes): first result %.2f ms after opening the pack" % (
                    host[0], len(rec["runs"]), rec["median"]["first_result_ms"]))
    else:
        print("the pack has no host target: nothing runs here (a GPU target needs the GPU machine)")
    print(pc.table(W.records))
    return 0 if ok else 1


def main(argv=None):
    a = parse_args(argv)
    spec = pc.load_spec(a.spec)
    if a.torch_first_call:
        t0 = time.perf_counter()
        import peers_torch
        return peers_torch.first_call_worker(a, spec, time.perf_counter() - t0)
    batches, systems = choose(a, spec)
    hkrt_load.load(hkrt_path(a))
    info = pc.pack_info(a.pack)
    if info["name"] != spec["name"]:
        print("peers.py: the pack %s was built from spec %r, not %r" % (a.pack, info["name"], spec["name"]))
        return 2
    missing = [b for b in batches if b not in info["batch_sizes"]]
    if missing:
        print("peers.py: batch size(s) %s not in the pack (it has %s)" % (missing, info["batch_sizes"]))
        return 2
    W = pc.Writer(a.out)
    deadline = pc.Deadline(a.budget)
    est = pc.estimate_s(spec, batches, systems, a.cold_runs, not a.no_torch_cold)
    print("peers: %s, batches %s, systems %s; pack %s (%d bytes, targets %s)" % (
        spec["name"], batches, ", ".join(systems), os.path.relpath(a.pack), info["bytes"], ", ".join(info["targets"])))
    print("estimated run time: %.0f s (%.1f min)%s" % (est, est / 60, "; budget %.0f s" % a.budget if a.budget else ""),
          flush=True)
    if a.budget and est > a.budget:
        print("the estimate is over the budget: what does not fit is skipped and recorded, max-autotune at the "
              "largest batches first (a later call can measure it: --systems max-autotune --batches ...)", flush=True)
    env = pc.machine_env(a.hkc, hkrt_path(a))
    env.update({"spec": spec["name"], "dtype": spec["dtype"], "spec_path": os.path.relpath(a.spec, ROOT), "pack_bytes": info["bytes"],
                "pack_targets": info["targets"], "batches": batches, "systems": systems, "estimate_s": est,
                "budget_s": a.budget, "seed": a.seed, "reference_ops": a.reference_ops, "dry_run": a.dry_run})
    W({"kind": "sizes", "spec": spec["name"], "pack_bytes": info["bytes"], "pack_targets": info["targets"],
       "libhkrt_bytes": env.get("libhkrt_bytes")})
    if a.dry_run:
        W(env)
        return dry_run(a, spec, batches, systems, W, info)
    fail = 0
    cold_batch = a.cold_batch or min(batches)
    if a.cold_runs:  # before this process touches the GPU
        rec, err = pc.cold_hkc(a.cold_bin, a.pack, cold_batch, a.cold_runs, target=a.target)
        bar = pc.COLD_START_BAR_MS if spec["name"] == "bert_layer" else None
        if err:
            fail += 1
            W({"kind": "skip", "spec": spec["name"], "batch": cold_batch, "system": "cold_hkc", "reason": err})
            print("hkc cold start: " + err, flush=True)
        else:
            m = rec["median"]
            W(dict(rec, kind="cold_hkc", spec=spec["name"], batch=cold_batch, bar_ms=bar,
                   met=None if bar is None else m["first_result_ms"] <= bar))
            print("hkc cold start (median of %d processes): CUDA context %.1f ms, then first result %.2f ms after "
                  "opening the pack (%.2f without the upload); process %.3f s" % (
                      len(rec["runs"]), m["ctx_ms"], m["first_result_ms"], m["first_result_no_upload_ms"],
                      m["process_s"]), flush=True)
    t0 = time.perf_counter()
    try:
        import peers_torch
        env["import_torch_s"] = time.perf_counter() - t0
        fail += peers_torch.run(a, spec, batches, systems, W, deadline, env)
    except Exception as e:  # noqa: BLE001  (print what was measured before failing)
        import traceback
        traceback.print_exc()
        W({"kind": "skip", "spec": spec["name"], "batch": 0, "system": "run",
           "reason": "the run stopped: %s: %s" % (type(e).__name__, str(e)[:300])})
        fail += 1
    for p in pc.points(W.records):
        W(p)
    print()
    print(pc.table(W.records))
    print("run time %.0f s (estimate %.0f s)" % (time.perf_counter() - t0, est))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
