#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Split-K (gemm_mma `sk`, sm_80 / sm_90) and stream-K (gemm_tma `skm`, sm_90a) on the device.

  python3 bench/lib/splitk.py list                               # the cases and packs (nothing built)
  python3 bench/lib/splitk.py prepare [--only REGEX]              # CPU machine, after build-dev/hkc
  python3 bench/lib/splitk.py run --out DIR [--budget S] [--only REGEX]   # H200 (build-dev carried)

prepare writes build-dev/splitk/<case>__<target>__<tag>.hkpack (names without '@' or ','),
one GEMM each, and checks with `hkc inspect` that every pack got the configuration it asked
for (a forced split that silently fell back would measure nothing):
  numerics cases (num_*): odd shapes with tails in M, N and K, the full epilogue (bias, gelu,
    mul, residual; bf16, weights [N, K]) and the plain one (f16, B [K, N]), for gemm_mma with
    split-K 2/4/8 on sm_80 and sm_90 and without, gemm_tma with stream-K, a split-K cluster
    and its default on sm_90a;
  timing cases (bar_*): the GEMM issue's small-M bars (bf16, no epilogue, weights [N, K] as
    F.linear), per target the build's own choice (sm_90a: the tuning database, as
    bench/lib/gemm_bars.py; both: the model) next to forced split / stream-K configurations;
  whole layers (model_<spec>.hkpack, sm_90 + sm_90a): specs/bert_layer.yaml and
    specs/llama_block.yaml with every GEMM split (gemm_mma sk 4 on sm_90, gemm_tma stream-K on
    sm_90a: PDL launches whose scratch shares the workspace with intermediates), for
    tests/device/check.py (bench/lib/splitk_device.sh runs it).

run, per numerics pack: random inputs (never zeros), the output poisoned with NaN before each
run, two runs (CUDA graph replays of one session), the relative Frobenius error against a
float64 reference (bar: <= 2x torch's own error + 1e-3) and the two outputs' bytes compared
(determinism, and the counters back at zero: a counter left non-zero makes the second run
leave tiles unwritten). sm_80 packs cannot run on an sm_90 GPU (cubins run on their own major
version); their sessions must be refused, and say so. Per timing case, bench/lib/gemm_bars.py's
protocol: R launches over R input/weight copies (past the 60 MB L2) captured in one CUDA
graph on torch's stream (hkc in stream launch mode), median over REPS replays, F.linear in the
same run; each pack's numerics before timing and its bytes again after the timed replays.
Writes DIR/numerics.jsonl, DIR/timing.jsonl, DIR/summary.txt; prints its progress."""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DIR = os.path.join(ROOT, "build-dev", "splitk")
HKC = os.path.join(ROOT, "build-dev", "hkc")
DB = ["--tuning-db", "specs/tuning/h200.db"]
# Split-K through the workspace and stream-K are opt-in (kernel option gemm_split, off by
# default until this run proves them): every pack here is built with them on, so that the
# model's own choice ("model" tags) may pick them too.
SPLIT_ON = ["--kernel-option", "gemm_split=on"]


def mma(cfg):
    return ["--kernel-option", "gemm_mma_cfg=" + cfg]


def tma(cfg):
    return ["--kernel-option", "gemm_tma_cfg=" + cfg]


# Forced configurations: (tag, hkc build flags, what `hkc inspect` must show in cfg=).
MMA_SPLITS = [("mma_64x64_sk%d" % s, mma("64,64,2,2,4,%d" % s), "bm=64,bn=64,wm=2,wn=2,st=4,sk=%d" % s) for s in (2, 4, 8)] + \
             [("mma_64x128_sk%d" % s, mma("64,128,1,4,4,%d" % s), "bm=64,bn=128,wm=1,wn=4,st=4,sk=%d" % s) for s in (2, 4, 8)] + \
             [("mma_128x128_sk%d" % s, mma("128,128,2,4,4,%d" % s), "bm=128,bn=128,wm=2,wn=4,st=4,sk=%d" % s)
              for s in (2, 4, 8)]
TMA_STREAMK = [("tma_coop128_skm4", tma("0,1,128,6,1,1,0,4"), "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=4"),
               ("tma_coop128_skm8", tma("0,1,128,6,1,1,0,8"), "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=8"),
               ("tma_pp128_skm4", tma("1,1,128,7,1,1,0,4"), "pp=1,mw=1,bn=128,st=7,sk=1,cm=1,ts=0,skm=4"),
               ("tma_pp128_skm8", tma("1,1,128,7,1,1,0,8"), "pp=1,mw=1,bn=128,st=7,sk=1,cm=1,ts=0,skm=8"),
               ("tma_pp64_skm4", tma("1,1,64,8,1,1,0,4"), "pp=1,mw=1,bn=64,st=8,sk=1,cm=1,ts=0,skm=4"),
               ("tma_coop2x64_skm4", tma("0,2,64,4,1,1,0,4"), "pp=0,mw=2,bn=64,st=4,sk=1,cm=1,ts=0,skm=4")]
NUM_CONFIGS = {
    "sm_80": [("mma", ["--tune", "default"], "kernel=gemm_mma")] + MMA_SPLITS,
    "sm_90": [("mma", ["--tune", "default"], "kernel=gemm_mma")] + MMA_SPLITS,
    "sm_90a": [("tma", ["--tune", "default"], "kernel=gemm_tma"),
               ("tma_cluster_sk4", tma("0,1,128,5,4"), "pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0")] + TMA_STREAMK,
}
BAR_CONFIGS = {
    "sm_90": [("mma", ["--tune", "default"], "kernel=gemm_mma"), ("model", [], "kernel=")] +
             [c for c in MMA_SPLITS if c[0] in ("mma_64x64_sk2", "mma_64x64_sk4", "mma_64x64_sk8", "mma_64x128_sk4",
                                                 "mma_128x128_sk2", "mma_128x128_sk4")],
    "sm_90a": [("db", DB, "kernel=gemm_tma"), ("model", [], "kernel=")] +
              [c for c in TMA_STREAMK if c[0] != "tma_pp128_skm8"],
}

# Whole layers: every GEMM forced to split, on both targets of one pack (with sm_90 in the pack,
# fusion keeps SwiGLU's gate-with-mul form: no dual gemm, which stream-K does not take).
MODELS = ("bert_layer", "llama_block")
MODEL_FLAGS = ["--target", "sm_90,sm_90a"] + SPLIT_ON + mma("64,64,2,2,4,4") + tma("0,1,128,6,1,1,0,4")

# name, dtype, M, N, K, layout ("nt": weight [N, K]; "nn": B [K, N]), epilogue
NUM_CASES = []
for m, n, k in ((77, 776, 1000), (128, 768, 3072), (333, 1000, 2056), (2100, 2304, 1000)):
    NUM_CASES.append(("num_full_%dx%dx%d" % (m, n, k), "bf16", m, n, k, "nt", "full"))
    NUM_CASES.append(("num_plain_%dx%dx%d" % (m, n, k), "f16", m, n, k, "nn", ""))
BAR_CASES = []
for m in (128, 1024):
    for n, k in ((768, 768), (2304, 768), (3072, 768), (768, 3072)):
        BAR_CASES.append(("bar_%dx%dx%d" % (m, n, k), "bf16", m, n, k, "nt", ""))
for n, k in ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336)):
    BAR_CASES.append(("bar_512x%dx%d" % (n, k), "bf16", 512, n, k, "nt", ""))


def spec_text(name, dt, m, n, k, layout, epi):
    w = "[%d, %d]" % ((n, k) if layout == "nt" else (k, n))
    tb = "trans_b: true, " if layout == "nt" else ""
    lines = ["hkc: 1", "name: %s" % name, "dtype: %s" % dt, "batch_sizes: [1]"]
    if epi == "full":
        lines += ["inputs: {x: [%d, %d], g: [%d, %d], r: [%d, %d]}" % (m, k, m, n, m, n),
                  "params: {w: %s, b: [%d]}" % (w, n), "graph:",
                  "  - {name: f, op: gemm, in: [x, w], %sbias: b, act: gelu, mul: g, residual: r, out: y}" % tb]
    else:
        lines += ["inputs: {x: [%d, %d]}" % (m, k), "params: {w: %s}" % w, "graph:",
                  "  - {name: f, op: gemm, in: [x, w], %sout: y}" % tb]
    return "\n".join(lines + ["outputs: [y]", ""])


def packs(cases, configs):
    """(case, target, tag, flags, expected cfg text) for every pack of the cases."""
    for case in cases:
        for target, cfgs in configs.items():
            for tag, flags, expect in cfgs:
                yield case, target, tag, flags, expect


def pack_path(case, target, tag):
    return os.path.join(DIR, "%s__%s__%s.hkpack" % (case[0], target, tag))


def all_packs(only):
    for case, target, tag, flags, expect in list(packs(NUM_CASES, NUM_CONFIGS)) + list(packs(BAR_CASES, BAR_CONFIGS)):
        if not only or re.search(only, case[0]):
            yield case, target, tag, flags, expect


def model_pack(name):
    return os.path.join(DIR, "model_%s.hkpack" % name)


def cmd_list(args):
    n = 0
    for case, target, tag, flags, expect in all_packs(args.only):
        print("%-26s %-7s %-20s %s" % (case[0], target, tag, " ".join(SPLIT_ON + flags)))
        n += 1
    for name in MODELS:
        print("%-26s %s" % (os.path.basename(model_pack(name)), " ".join(MODEL_FLAGS)))
    print("%d packs" % (n + len(MODELS)))


def prepare_models(n_before):
    """The whole-layer packs; every GEMM kernel must be the forced split one."""
    for name in MODELS:
        out = model_pack(name)
        r = subprocess.run([HKC, "build", "specs/%s.yaml" % name, "-q", "--Werror-spills", "-o", out] + MODEL_FLAGS,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("hkc build failed for %s:\n%s" % (name, r.stderr))
        shown = subprocess.run([HKC, "inspect", out], stdout=subprocess.PIPE, text=True, check=True).stdout
        gemms = [l for l in shown.splitlines() if l.startswith("  hk_gemm_") and "dtype=f32" not in l]
        if not gemms or any(",sk=4 " not in l and ",skm=4 " not in l for l in gemms):
            sys.exit("%s: a GEMM kernel is not split:\n%s" % (out, "\n".join(gemms)))
    return n_before + len(MODELS)


def cmd_prepare(args):
    if not os.access(HKC, os.X_OK):
        sys.exit("no %s: build it first (bench/run.py splitk --prepare)" % HKC)
    os.makedirs(DIR, exist_ok=True)
    for f in os.listdir(DIR):
        os.remove(os.path.join(DIR, f))
    n = 0
    for case, target, tag, flags, expect in all_packs(args.only):
        yaml_path = os.path.join(DIR, case[0] + ".yaml")
        if not os.path.exists(yaml_path):
            with open(yaml_path, "w") as f:
                f.write(spec_text(*case))
        out = pack_path(case, target, tag)
        r = subprocess.run([HKC, "build", yaml_path, "--target", target, "-q", "--Werror-spills", "-o", out] +
                           SPLIT_ON + flags,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("hkc build failed for %s %s %s:\n%s" % (case[0], target, tag, r.stderr))
        shown = subprocess.run([HKC, "inspect", out], stdout=subprocess.PIPE, text=True, check=True).stdout
        if expect not in shown:
            sys.exit("%s: the kernel is not %s:\n%s" % (out, expect, shown))
        n += 1
    if not args.only:
        n = prepare_models(n)
    print("prepared %d packs in %s" % (n, DIR))


# ---- the device ---------------------------------------------------------------------------------
def inputs(torch, case, copies, seed):
    """Random inputs of a case (never zeros): `copies` sets of x (and g, r), w (and b)."""
    name, dt, m, n, k, layout, epi = case
    t = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    sets = []
    for _ in range(copies):
        s = {"x": torch.randn(m, k, device="cuda", dtype=t, generator=gen),
             "w": (torch.randn(*((n, k) if layout == "nt" else (k, n)), device="cuda", dtype=t, generator=gen)
                   / math.sqrt(k)).to(t),
             "y": torch.empty(m, n, device="cuda", dtype=t)}
        if epi == "full":
            s["b"] = torch.randn(n, device="cuda", dtype=t, generator=gen)
            s["g"] = torch.randn(m, n, device="cuda", dtype=t, generator=gen)
            s["r"] = torch.randn(m, n, device="cuda", dtype=t, generator=gen)
        sets.append(s)
    return sets


def reference(torch, F, case, s, dtype=None):
    """act(x @ w + b) * g + r in float64 (dtype None) or as torch computes it in the inputs' dtype."""
    layout, epi = case[5], case[6]
    cast = (lambda v: v.double()) if dtype is None else (lambda v: v)
    w = cast(s["w"])
    y = F.linear(cast(s["x"]), w) if layout == "nt" else cast(s["x"]) @ w
    if epi == "full":
        y = F.gelu(y + cast(s["b"])) * cast(s["g"]) + cast(s["r"])
    return y


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def bind_all(sess, s):
    for name, t in s.items():
        sess.bind(name, t)


def run_poisoned(torch, sess, s):
    """One run with y poisoned (NaN) before it; y's bytes as int16."""
    s["y"].fill_(float("nan"))
    bind_all(sess, s)
    sess.run(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    return s["y"].view(torch.int16).clone()


def open_session(path, mode):
    """((pack, session), None), or (None, why) when libhkrt refuses it."""
    import hkrt_load
    try:
        return hkrt_load.open_session(path, 1, launch_mode=mode), None
    except hkrt_load.hkrt.Error as e:
        return None, str(e)


def numerics(torch, F, args, out, log):
    ok = True
    for case in NUM_CASES:
        if args.only and not re.search(args.only, case[0]):
            continue
        s = inputs(torch, case, 1, 1234)[0]
        expect = reference(torch, F, case, s)
        torch_err = rel(reference(torch, F, case, s, dtype=True), expect)
        for target, cfgs in NUM_CONFIGS.items():
            for tag, _, _ in cfgs:
                row = {"case": case[0], "target": target, "pack": tag, "torch_err": torch_err}
                opened, why = open_session(pack_path(case, target, tag), "auto")
                if opened is None:
                    # an sm_80 cubin does not run on sm_90: the session must be refused
                    row.update(ok=target == "sm_80", refused=why)
                else:
                    pack, sess = opened
                    try:
                        first = run_poisoned(torch, sess, s)
                        err = rel(s["y"], expect)
                        second = run_poisoned(torch, sess, s)
                        same = bool(torch.equal(first, second))
                        row.update(err=err, deterministic=same, ok=math.isfinite(err) and err <= 2 * torch_err + 1e-3
                                   and same)
                    finally:
                        sess.close()
                        pack.close()
                ok &= row["ok"]
                out.write(json.dumps(row) + "\n")
                log("%-26s %-7s %-20s %s" % (case[0], target, tag,
                                             "refused (%s)" % row["refused"][:70] if "refused" in row else
                                             "err %.2e (torch %.2e) %s%s" % (row["err"], torch_err,
                                                                             "same bytes" if row["deterministic"]
                                                                             else "BYTES DIFFER",
                                                                             "" if row["ok"] else "  FAIL")))
        del s, expect
        torch.cuda.empty_cache()
    return ok


def timing(torch, F, args, out, log, deadline):
    sys.path.insert(0, HERE)
    from gemm_bars import capture_time, L2_BYTES
    ok, rows = True, []
    for case in BAR_CASES:
        if args.only and not re.search(args.only, case[0]):
            continue
        if time.time() > deadline:
            log("%-26s SKIPPED: out of time" % case[0])
            continue
        _, dt, m, n, k, _, _ = case
        R = max(2, min(64, math.ceil(3 * L2_BYTES / ((m * k + k * n + m * n) * 2))))
        sets = inputs(torch, case, R, 99)
        expect = reference(torch, F, case, sets[0])
        torch_err = rel(reference(torch, F, case, sets[0], dtype=True), expect)
        torch_us = capture_time(torch, lambda i: F.linear(sets[i]["x"], sets[i]["w"]), R, args.reps)
        for target, cfgs in BAR_CONFIGS.items():
            for tag, _, _ in cfgs:
                opened, why = open_session(pack_path(case, target, tag), "stream")
                if opened is None:
                    log("%-26s %-7s %-20s refused: %s  FAIL" % (case[0], target, tag, why))
                    ok = False
                    continue
                pack, sess = opened
                try:
                    first = run_poisoned(torch, sess, sets[0])
                    err = rel(sets[0]["y"], expect)

                    def hk(i):
                        bind_all(sess, sets[i])
                        sess.run(torch.cuda.current_stream().cuda_stream)
                    hk_us = capture_time(torch, hk, R, args.reps)
                    same = bool(torch.equal(first, run_poisoned(torch, sess, sets[0])))
                finally:
                    sess.close()
                    pack.close()
                good = math.isfinite(err) and err <= 2 * torch_err + 1e-3 and same
                ok &= good
                row = {"case": case[0], "target": target, "pack": tag, "M": m, "N": n, "K": k, "hkc_us": hk_us,
                       "torch_us": torch_us, "ratio": torch_us / hk_us, "err": err, "torch_err": torch_err,
                       "deterministic": same, "ok": good, "R": R}
                rows.append(row)
                out.write(json.dumps(row) + "\n")
                out.flush()
                log("%-26s %-7s %-20s %9.2f us  F.linear %9.2f us  ratio %.3f  err %.1e%s" %
                    (case[0], target, tag, hk_us, torch_us, row["ratio"], err, "" if good else "  FAIL"))
        del sets, expect
        torch.cuda.empty_cache()
    return ok, rows


def summary(rows):
    """Per case and target: the build's own choice, the best split configuration, F.linear."""
    lines = ["%-26s %-7s %10s %-20s %10s %10s %8s" % ("case", "target", "own us", "best split", "split us", "F.linear",
                                                      "speedup")]
    for case in BAR_CASES:
        for target, cfgs in BAR_CONFIGS.items():
            got = {r["pack"]: r for r in rows if r["case"] == case[0] and r["target"] == target}
            own = got.get("db" if target == "sm_90a" else "mma")
            splits = [r for t, r in got.items() if t.startswith(("mma_", "tma_"))]
            if not own or not splits:
                continue
            best = min(splits, key=lambda r: r["hkc_us"])
            lines.append("%-26s %-7s %10.2f %-20s %10.2f %10.2f %8.3f" % (case[0], target, own["hkc_us"], best["pack"],
                                                                          best["hkc_us"], own["torch_us"],
                                                                          own["hkc_us"] / best["hkc_us"]))
    return "\n".join(lines) + "\n"


def cmd_run(args):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    start = time.time()
    os.makedirs(args.out, exist_ok=True)

    def log(line):
        print("[%5.0f s] %s" % (time.time() - start, line), flush=True)
    log("device: %s" % torch.cuda.get_device_name())
    with open(os.path.join(args.out, "numerics.jsonl"), "w") as out:
        num_ok = numerics(torch, F, args, out, log)
    with open(os.path.join(args.out, "timing.jsonl"), "w") as out:
        time_ok, rows = timing(torch, F, args, out, log, start + args.budget)
    text = summary(rows) + "numerics: %s; timing packs' numerics and determinism: %s; %.0f s\n" % (
        "ok" if num_ok else "FAIL", "ok" if time_ok else "FAIL", time.time() - start)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    sys.exit(0 if num_ok and time_ok else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["list", "prepare", "run"])
    p.add_argument("--only", help="regex over case names")
    p.add_argument("--out", help="run: the directory for the logs")
    p.add_argument("--budget", type=float, default=420, help="run: seconds after which timing cases are skipped")
    p.add_argument("--reps", type=int, default=30, help="run: graph replays per timing")
    args = p.parse_args()
    if args.mode == "run" and not args.out:
        p.error("run needs --out DIR")
    os.chdir(ROOT)
    {"list": cmd_list, "prepare": cmd_prepare, "run": cmd_run}[args.mode](args)


if __name__ == "__main__":
    main()
