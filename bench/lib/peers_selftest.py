#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of the peers benchmark's CPU side (no PyTorch, no GPU), run by hand:

    /usr/bin/python3 bench/lib/peers_selftest.py [--build build]     (= bench/run.py peers --selftest)

  1. peers_common: param roles and draws, bars, verdicts (missing peers, missed bars),
     the table, hk_bench_cold's JSON, the JSON lines round trip, the time estimate;
  2. peers_report.py and plot_peers.py on a FABRICATED JSON lines file (in a temporary
     directory; never copied to docs/): the verdicts and "not measured" rows in the
     markdown, a PNG written (skipped, and said so, without matplotlib);
  3. with --build DIR (hkc, libhkrt.so, hk_bench_cold built there): peers.py --dry-run end
     to end on host packs of specs/bert_layer.yaml and of a small Llama-like spec without
     rope (rmsnorm, GQA causal attention, silu gate, mul), each checked against the NumPy
     float64 reference; a pack built from a changed spec (relu for gelu) must fail;
     argument errors (a batch not in the pack, another spec's pack) must exit 2;
  4. bash -n on the shell scripts; peers_torch.py and the rest byte-compile; bench/run.py's
     --help for every measurement.
The PyTorch side (peers_torch.py: the five systems, compile phases, the torch.compile
worker) runs only on the GPU machine (bench/lib/peers_device.sh).
Exit 0 when all pass.
"""
import argparse
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import peers_common as pc  # noqa: E402

LLAMA_SMALL = """hkc: 1
name: llama_small
dtype: bf16
batch_sizes: [1, 2]
dims: {seq: 32, hidden: 128, heads: 4, kv_heads: 2, ffn: 256}
targets: [host]
inputs:
  x: [batch, seq, hidden]
params:
  g1: [hidden]
  wq: [hidden, hidden]
  wk: [hidden, kv_heads*hidden/heads]
  wv: [hidden, kv_heads*hidden/heads]
  wo: [hidden, hidden]
  g2: [hidden]
  wg: [hidden, ffn]
  wu: [hidden, ffn]
  wd: [ffn, hidden]
graph:
  - {name: n1, op: rmsnorm, in: [x], gamma: g1, eps: 1.0e-5, out: h}
  - {name: q, op: gemm, in: [h, wq], out: q}
  - {name: k, op: gemm, in: [h, wk], out: k}
  - {name: v, op: gemm, in: [h, wv], out: v}
  - {name: att, op: attention, in: [q, k, v], heads: 4, kv_heads: 2, causal: true, out: a}
  - {name: o, op: gemm, in: [a, wo], residual: x, out: r1}
  - {name: n2, op: rmsnorm, in: [r1], gamma: g2, eps: 1.0e-5, out: h2}
  - {name: gate, op: gemm, in: [h2, wg], act: silu, out: gt}
  - {name: up, op: gemm, in: [h2, wu], out: up}
  - {name: m, op: mul, in: [gt, up], out: gu}
  - {name: down, op: gemm, in: [gu, wd], residual: r1, out: y}
outputs: [y]
"""

failures = []


def expect(cond, what, detail=""):
    print(("ok    " if cond else "FAIL  ") + what + ("" if cond or not detail else ": " + detail))
    if not cond:
        failures.append(what)


def test_common(tmp):
    bert = pc.load_spec(os.path.join(ROOT, "specs", "bert_layer.yaml"))
    roles = pc.param_roles(bert)
    expect(roles["w_qkv"] == ("weight", 768) and roles["w_2"] == ("weight", 3072), "bert weights: fan-in = K")
    expect(roles["ln1_g"] == ("gamma",) and roles["ln1_b"] == ("beta",) and roles["b_1"] == ("bias",),
           "bert gains, shifts, biases")
    expect(abs(pc.init_rule(bert, "w_2")[1] - 3072 ** -0.5) < 1e-12 and pc.init_rule(bert, "x") == (0.0, 1.0),
           "draws: weights N(0, 1/K), inputs N(0, 1)")
    path = os.path.join(tmp, "llama_small.yaml")
    with open(path, "w") as f:
        f.write(LLAMA_SMALL)
    ll = pc.load_spec(path)
    expect(pc.shapes(ll, 2)["wk"] == [128, 64] and pc.shapes(ll, 2)["x"] == [2, 32, 128], "dim expressions")
    expect(pc.param_roles(ll)["g1"] == ("gamma",) and pc.param_roles(ll)["wd"] == ("weight", 256), "llama roles")
    tb = dict(bert, graph=[dict(n, trans_b=True) if n["name"] == "ffn_down" else n for n in bert["graph"]])
    expect(pc.param_roles(tb)["w_2"] == ("weight", 768), "trans_b: fan-in is the last dim")
    expect(pc.batch_dependent_params(bert) == [], "bert params do not depend on the batch")
    expect(pc.bar_for("bert_layer", 1) == 0.6 and pc.bar_for("bert_layer", 8) == 0.6 and
           pc.bar_for("bert_layer", 32) == 0.95 and pc.bar_for("llama_block", 1) == 0.95, "bars")

    def lat(spec, batch, system, v):
        return {"kind": "latency", "spec": spec, "batch": batch, "system": system, "ms": v}
    recs = [lat("bert_layer", 1, "eager", 0.5), lat("bert_layer", 1, "cudagraph", 0.2),
            lat("bert_layer", 1, "compile", 0.3), lat("bert_layer", 1, "hkc", 0.13),
            lat("bert_layer", 8, "eager", 1.0), lat("bert_layer", 8, "cudagraph", 0.9), lat("bert_layer", 8, "hkc", 0.7),
            lat("bert_layer", 32, "eager", 2.0),
            {"kind": "skip", "spec": "bert_layer", "batch": 8, "system": "max-autotune", "reason": "time budget"}]
    pts = {(p["spec"], p["batch"]): p for p in pc.points(recs)}
    p1, p8, p32 = pts[("bert_layer", 1)], pts[("bert_layer", 8)], pts[("bert_layer", 32)]
    expect(p1["best_peer"] == "cudagraph" and abs(p1["ratio"] - 0.65) < 1e-9 and p1["met"] is False,
           "verdict: 0.65x at batch 1 misses the 0.6x bar")
    expect(p8["met"] is False and p8["peers_missing"] == ["compile", "max-autotune"], "missing peers listed")
    expect(p32["ratio"] is None and p32["met"] is None, "no hkc figure: no verdict")
    t = pc.table(recs)
    expect("MISSED" in t and "not measured: bert_layer batch 8 max-autotune: time budget" in t and "skip" in t,
           "table: missed bars and skips")
    cold = pc.parse_cold("pack x\n  FIRST RESULT 1 ms\n{\"first_result_ms\": 12.5, \"ctx_ms\": 200}\n")
    expect(cold["first_result_ms"] == 12.5, "hk_bench_cold JSON line parsed")
    jl = os.path.join(tmp, "w.jsonl")
    w = pc.Writer(jl)
    for r in recs:
        w(r)
    w.f.close()
    expect(pc.read_jsonl([jl]) == recs, "JSON lines round trip")
    e = pc.estimate_s(bert, [1, 8, 32, 128], pc.SYSTEMS, 5, True)
    expect(60 < e < 2000, "estimate %.0f s is plausible" % e)


def fabricated(tmp):
    """Records shaped like a real run's, with invented figures (test data only)."""
    recs = [{"kind": "env", "spec": "bert_layer", "gpu": "FABRICATED GPU", "driver": "0.0", "torch": "0.0",
             "triton": "0.0", "cuda_runtime": "0.0", "date_utc": "2000-01-01T00:00:00Z", "argv": ["bench/lib/peers.py"],
             "python": "3", "os": "test"},
            {"kind": "sizes", "spec": "bert_layer", "pack_bytes": 12345, "pack_targets": ["sm_90a"],
             "libhkrt_bytes": 300000},
            {"kind": "sizes", "where": "cpu", "libhkrt_bytes": 300000, "libhkrt_stripped_bytes": 200000},
            {"kind": "build", "spec": "bert_layer", "target": "sm_90", "where": "cpu", "batch_sizes": [1, 8, 32, 128],
             "cold_s": 9.0, "warm_s": 0.4, "pack_bytes": 9999, "cores": 2, "bar_s": 60, "met": True},
            {"kind": "cold_hkc", "spec": "bert_layer", "batch": 1, "bar_ms": 50, "met": True, "runs": [{}, {}, {}],
             "median": {"ctx_ms": 150.0, "first_result_ms": 20.0, "upload_ms": 4.0, "second_run_ms": 0.1,
                        "process_s": 0.4}},
            {"kind": "cold_torch", "spec": "bert_layer", "batch": 1, "cache": "cold", "import_s": 3.0, "ctx_s": 0.5,
             "first_call_s": 30.0},
            {"kind": "cold_torch", "spec": "bert_layer", "batch": 1, "cache": "warm", "import_s": 2.0, "ctx_s": 0.5,
             "first_call_s": 5.0}]
    ms = {"bert_layer": {1: [0.40, 0.10, 0.20, 0.15, 0.05], 8: [0.9, 0.5, 0.4, 0.35, 0.25],
                         32: [2.0, 1.6, 1.2, 1.0, 1.1], 128: [7.0, 6.5, 4.0, None, 4.1]},
          "llama_block": {1: [5.0, 4.0, 3.5, 3.3, 3.0], 4: [15.0, 14.0, 12.0, 11.0, 11.5], 16: [55, 54, 47, None, 44]}}
    for spec, per in ms.items():
        for batch, vals in per.items():
            for s, v in zip(pc.SYSTEMS, vals):
                if v is None:
                    recs.append({"kind": "skip", "spec": spec, "batch": batch, "system": s,
                                 "reason": "time budget: 20 s left, a compile takes about 90 s"})
                    continue
                r = {"kind": "latency", "spec": spec, "batch": batch, "system": s, "ms": v, "p10": v * 0.98,
                     "p90": v * 1.03}
                if s in ("compile", "max-autotune"):
                    r["compile_s"] = 20.0 + batch / 10
                recs.append(r)
                recs.append({"kind": "compare", "spec": spec, "batch": batch, "system": s,
                             "against": "eager", "rel": 0.004, "worst": 0.1, "ok": True})
    recs.append({"kind": "compare", "spec": "bert_layer", "batch": 1, "system": "hkc", "against": "float64",
                 "rel": 0.003, "worst": 0.1, "ok": True})
    path = os.path.join(tmp, "fabricated.jsonl")
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return path


def test_report_and_plot(tmp):
    path = fabricated(tmp)
    p = subprocess.run([sys.executable, os.path.join(HERE, "peers_report.py"), path], capture_output=True, text=True)
    md = p.stdout
    expect(p.returncode == 0, "peers_report.py runs", p.stderr.strip()[-300:])
    expect("| 1 | 0.4000<br>" in md and "| hkc (libhkrt) |" in md or "hkc (libhkrt)" in md, "latency table rendered")
    expect("bert_layer batch 8: hkc 0.250 ms against torch.compile max-autotune 0.350 ms = 0.71× (bar 0.6×): **missed**" in md,
           "missed bar at bert batch 8 listed")
    expect("bert_layer batch 1:" not in md.split("#### Bars and gaps")[1].split("####")[0],
           "met bar at bert batch 1 not listed as missed")
    expect("met (without torch.compile max-autotune)" in md, "verdict says which peer is missing")
    expect("not measured: bert_layer batch 128, torch.compile max-autotune: time budget" in md, "skips listed")
    expect("9.00 s / 0.40 s (bar ≤ 60 s: met)" in md, "build times with the bar")
    expect("| bert_layer | 1 | 150.0 ms | 20.00 ms | 4.00 ms" in md, "cold start row")
    expect("libhkrt.so: 300000 bytes as built, 200000 stripped" in md, "sizes")
    with open(os.path.join(tmp, "report.md"), "w") as f:
        f.write(md)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skip  plot_peers.py: matplotlib is not installed here (apt-get install python3-matplotlib)")
        return
    png = os.path.join(tmp, "peers.png")
    p = subprocess.run([sys.executable, os.path.join(HERE, "plot_peers.py"), path, "-o", png], capture_output=True,
                       text=True)
    ok = p.returncode == 0 and os.path.exists(png)
    expect(ok, "plot_peers.py writes a PNG", (p.stdout + p.stderr).strip()[-300:])
    if ok:
        with open(png, "rb") as f:
            expect(f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10000, "the PNG is a PNG")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def test_dry_run(tmp, build):
    hkc, lib, cold = (os.path.join(build, x) for x in ("hkc", "libhkrt.so", "hk_bench_cold"))
    for x in (hkc, lib, cold):
        if not os.path.exists(x):
            expect(False, "%s exists (cmake --build %s --target hkc hkrt hk_bench_cold)" % (x, build))
            return
    common = ["--dry-run", "--hkrt", lib, "--hkc", hkc, "--cold-bin", cold, "--cold-runs", "2"]
    peers = [sys.executable, os.path.join(HERE, "peers.py")]
    # the compile cache the caller set (scripts/test.sh: the one every test shares), else a fresh one
    env = dict(os.environ, HKC_CACHE_DIR=os.environ.get("HKC_CACHE_DIR") or os.path.join(tmp, "cache"))

    llama = os.path.join(tmp, "llama_small.yaml")
    pack = os.path.join(tmp, "llama_small.hkpack")
    b = run([hkc, "build", llama, "-o", pack, "--target", "host", "-q"], env=env)
    expect(b.returncode == 0, "hkc builds the small Llama-like spec for host", b.stderr.strip()[-300:])
    out = os.path.join(tmp, "dry_llama.jsonl")
    p = run(peers + [llama, pack, "--out", out, "--check-batch", "2"] + common)
    expect(p.returncode == 0 and "host check llama_small batch 2 output y" in p.stdout and "ok" in p.stdout,
           "dry run: Llama-like pack on host matches NumPy float64", (p.stdout + p.stderr).strip()[-600:])
    recs = pc.read_jsonl([out]) if os.path.exists(out) else []
    kinds = {r["kind"] for r in recs}
    expect({"env", "sizes", "compare", "latency", "cold_hkc"} <= kinds, "dry run records: %s" % sorted(kinds))
    c = [r for r in recs if r["kind"] == "cold_hkc"]
    expect(bool(c) and len(c[0]["runs"]) == 2 and c[0]["median"]["first_result_ms"] > 0 and
           all(r["nonfinite"] == 0 for r in c[0]["runs"]), "hk_bench_cold: 2 processes, finite outputs")

    # bert_layer's graph at reduced dims and two batch sizes: the dry run's reference and the host
    # kernels run in seconds rather than minutes (the test suite runs this on every change)
    bert = os.path.join(tmp, "bert_layer.yaml")
    with open(os.path.join(ROOT, "specs", "bert_layer.yaml")) as f:
        text = f.read()
    for a, b_ in (("batch_sizes: [1, 8, 32, 128]", "batch_sizes: [1, 2]"),
                  ("dims: {seq: 128, hidden: 768, heads: 12, ffn: 3072}", "dims: {seq: 32, hidden: 192, heads: 12, ffn: 384}")):
        expect(a in text, "specs/bert_layer.yaml holds %r (the reduced copy replaces it)" % a)
        text = text.replace(a, b_)
    with open(bert, "w") as f:
        f.write(text)
    bpack = os.path.join(tmp, "bert.hkpack")
    b = run([hkc, "build", bert, "-o", bpack, "--target", "host", "-q"], env=env)
    expect(b.returncode == 0, "hkc builds bert_layer for host")
    p = run(peers + [bert, bpack, "--cold-runs", "0"] + common[:-2] + ["--cold-runs", "0"])
    expect(p.returncode == 0 and "host check bert_layer batch 1 output y" in p.stdout, "dry run: bert_layer on host")

    bad = os.path.join(tmp, "bert_relu.yaml")
    with open(bert) as f, open(bad, "w") as g:
        g.write(f.read().replace("op: gelu", "op: relu"))  # bert_layer's ffn_act node
    badpack = os.path.join(tmp, "bert_relu.hkpack")
    b = run([hkc, "build", bad, "-o", badpack, "--target", "host", "-q"], env=env)
    p = run(peers + [bert, badpack] + common[:-2] + ["--cold-runs", "0"])
    expect(b.returncode == 0 and p.returncode == 1 and "MISMATCH" in p.stdout,
           "dry run: a pack of another function fails (exit %d)" % p.returncode)
    p = run(peers + [bert, bpack, "--batches", "3"] + common)
    expect(p.returncode == 2 and "not in the pack" in p.stdout, "a batch not in the pack: exit 2")
    p = run(peers + [bert, pack] + common)
    expect(p.returncode == 2 and "built from spec" in p.stdout, "another spec's pack: exit 2")
    p = run(peers + [bert, bpack, "--systems", "eager,bogus"] + common)
    expect(p.returncode != 0 and "unknown system" in (p.stdout + p.stderr), "unknown system refused")
    p = run(peers + ["--help"])
    expect(p.returncode == 0 and "--skip-max-autotune" in p.stdout and "--compile-timeout" in p.stdout, "--help")


def test_static(tmp):
    for s in ("build_times.sh", "peers_device.sh"):
        p = run(["bash", "-n", os.path.join(HERE, s)])
        expect(p.returncode == 0, "bash -n %s" % s)
    entry = os.path.join(ROOT, "bench", "run.py")
    sys.path.insert(0, os.path.dirname(entry))
    import run as bench_run  # bench/run.py: stdlib only at import
    names = [m.name for m in bench_run.MEASUREMENTS]
    p = run([sys.executable, entry, "--help"])
    expect(p.returncode == 0 and all(n in p.stdout for n in names), "bench/run.py --help lists the measurements",
           (p.stdout + p.stderr)[-300:])
    for m in names:
        q = run([sys.executable, entry, m, "--help"])
        expect(q.returncode == 0 and "--prepare" in q.stdout and "--device" in q.stdout, "bench/run.py %s --help" % m,
               (q.stdout + q.stderr)[-300:])
    for s in ("peers.py", "peers_torch.py", "peers_common.py", "peers_report.py", "plot_peers.py"):
        try:
            py_compile.compile(os.path.join(HERE, s), doraise=True, cfile=os.path.join(tmp, os.path.basename(s) + "c"))
            expect(True, "byte-compiles: %s" % s)
        except py_compile.PyCompileError as e:
            expect(False, "byte-compiles: %s: %s" % (s, e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", help="build directory with hkc, libhkrt.so and hk_bench_cold (runs the dry-run tests)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="peers-selftest-")
    try:
        test_common(tmp)
        test_report_and_plot(tmp)
        test_static(tmp)
        if a.build:
            test_dry_run(tmp, os.path.abspath(a.build))
        else:
            print("skip  dry-run tests: no --build DIR")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
