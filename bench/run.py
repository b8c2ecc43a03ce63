#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hkc's benchmarks, one command per measurement (docs/BENCHMARKS.md has the figures).

    bench/run.py MEASUREMENT [options] [--prepare] [--device]

Each measurement has a CPU half (--prepare: build-dev/ with hkc, libhkrt and the shared libraries
the GPU machine lacks, and the packs the device half runs) and a device half (--device: run on
the GPU machine from the repository root, with build-dev/ carried there). Without either flag
both halves run, one after the other, on this machine. Device logs go to --out (default: $OUT,
else /tmp/hk-MEASUREMENT). `bench/run.py MEASUREMENT --help` says what each one does.

Only the Python standard library is needed here; the device halves use PyTorch (and nvcc, ncu
where they say so) on the GPU machine.
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIB = os.path.join("bench", "lib")
DEV = "build-dev"
HKC = os.path.join(DEV, "hkc")
TUNING_DB = "specs/tuning/h200.db"
# Packs built by a CPU half run in the device half, on another machine with another user key:
# both sign with and trust a key carried in build-dev/ (docs/CLI.md, "Signing"), which every
# command below inherits.
os.environ.setdefault("HKC_KEY", os.path.join(ROOT, DEV, "signing.key"))
LAYERS = {"bert": "bert_layer", "llama": "llama_block"}


class Failed(Exception):
    pass


# ---- helpers -----------------------------------------------------------------------------------
def say(msg):
    print("run.py: " + msg, flush=True)


def run(cmd, env=None, check=True, stdout=None, timeout=None):
    """Runs cmd (a list, or a string for bash) from the repository root; echoes it first."""
    shown = cmd if isinstance(cmd, str) else " ".join(shlex.quote(c) for c in cmd)
    print("+ " + shown, flush=True)
    full_env = dict(os.environ, **(env or {}))
    if isinstance(cmd, str):
        cmd = ["bash", "-c", "set -euo pipefail; " + cmd]
    try:
        rc = subprocess.call(cmd, cwd=ROOT, env=full_env, stdout=stdout, timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = 124
    if check and rc != 0:
        raise Failed("%s exited %d" % (shown, rc))
    return rc


def jobs(a):
    return str(getattr(a, "jobs", None) or os.cpu_count() or 2)


def build_dev(a, targets=("hkc", "hkrt")):
    """build-dev/: a release build as tests/device/prepare.sh makes it (static libyaml and zstd,
    vendor libraries dlopen'ed), so it runs on the GPU machine, with what that machine lacks
    copied beside it (scripts/carry_libs.sh)."""
    run(["cmake", "-S", ".", "-B", DEV, "-DCMAKE_BUILD_TYPE=Release", "-DHKC_BUILD_TESTS=ON"], stdout=subprocess.DEVNULL)
    run(["cmake", "--build", DEV, "-j" + jobs(a), "--target"] + list(targets), stdout=subprocess.DEVNULL)
    run(["bash", "scripts/carry_libs.sh", DEV])


def hkc_build(spec, out, target, flags=(), env=None):
    os.makedirs(os.path.join(ROOT, os.path.dirname(out)), exist_ok=True)
    run([HKC, "build", spec, "-o", out, "--target", target, "-q"] + list(flags), env=env)


def tuning_flags(db):
    return ["--tuning-db", db] if db else []


def device_env(a, name):
    """The environment of a device half: build-dev on the library path, unbuffered Python, $OUT
    and the time budget the lib/ scripts read."""
    out = out_dir(a, name)
    os.makedirs(out, exist_ok=True)
    lib = os.path.join(ROOT, DEV)
    env = {"OUT": out, "PYTHONUNBUFFERED": "1",
           "LD_LIBRARY_PATH": lib + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")}
    if getattr(a, "budget", None):
        env["DEVICE_BUDGET_S"] = str(int(a.budget))
    return env


def out_dir(a, name):
    return os.path.abspath(getattr(a, "out", None) or os.environ.get("OUT") or "/tmp/hk-" + name)


def need(path, what):
    if not os.path.exists(os.path.join(ROOT, path)):
        raise Failed("no %s: %s first (on the CPU machine), then carry build-dev/" % (path, what))


def spec_batches(spec_path):
    """The spec's batch_sizes (a flow list on one line, as every spec here writes it)."""
    with open(os.path.join(ROOT, spec_path)) as f:
        for line in f:
            m = re.match(r"\s*batch_sizes:\s*\[([^\]]*)\]", line)
            if m:
                return [int(x) for x in m.group(1).replace(" ", "").split(",") if x]
    return [1]


def layer_spec(part):
    """bert | llama | a spec name or path -> (name, spec path)."""
    name = LAYERS.get(part, os.path.basename(part)[:-5] if part.endswith(".yaml") else part)
    path = part if part.endswith(".yaml") else "specs/%s.yaml" % name
    return name, path


def write_commit(path):
    try:
        c = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        c, dirty = "", ""
    with open(os.path.join(ROOT, path), "w") as f:
        f.write((c or "unknown") + ("+dirty" if dirty else ""))


def layer_packs(a, specs, target="sm_90a", db=TUNING_DB):
    """build-dev/peers/NAME.hkpack for each spec, every batch bucket, with the spec beside it (the
    device half reads that copy, so pack and spec cannot drift apart) and the commit."""
    os.makedirs(os.path.join(ROOT, DEV, "peers"), exist_ok=True)
    failed = []
    for spec in specs:
        name = os.path.basename(spec)[:-5]
        if not os.path.exists(os.path.join(ROOT, spec)):
            say("%s does not exist: no pack for it" % spec)
            continue
        try:
            hkc_build(spec, "%s/peers/%s.hkpack" % (DEV, name), target, tuning_flags(db))
        except Failed as e:
            say("FAILED to build %s for %s (the other specs go on): %s" % (spec, target, e))
            failed.append(spec)
            continue
        shutil.copy(os.path.join(ROOT, spec), os.path.join(ROOT, DEV, "peers", name + ".yaml"))
    write_commit(os.path.join(DEV, "peers", "commit.txt"))
    if failed:
        raise Failed("packs failed: " + " ".join(failed))


def du(path):
    run("du -sh %s | sed 's/$/  (carried to the GPU machine with the tree: 64 MiB at most)/'" % shlex.quote(path), check=False)


# ---- measurements ------------------------------------------------------------------------------
class Measurement:
    name = ""
    help = ""
    doc = ""

    def args(self, p):
        pass

    def prepare(self, a):
        pass

    def device(self, a):
        pass

    def now(self, a):
        """A mode that runs at once, neither half (e.g. a report); returns True when it ran."""
        return False


class Gemm(Measurement):
    name, help = "gemm", "GEMMs against cuBLAS (torch.matmul / F.linear), numerics and timing"
    doc = """Default: the GEMM bars (bench/lib/gemm_bars.py: large shapes against torch.matmul, the
models' small-M launches against F.linear, a fused epilogue, SwiGLU as one dual GEMM, odd shapes
for numerics). Prepare builds one single-GEMM pack per case for sm_90a with specs/tuning/h200.db
(and `@old` packs with gemm_tma=off for comparison), sm_90a packs of the specs with a SwiGLU
(build-dev/dual/: fusion makes it a dual GEMM there) and the layers' packs (build-dev/peers/).
The device half (bench/lib/gemm_device.sh, under 10 minutes): the dual packs' numerics against
PyTorch, the bars (every case checked against float64 first, then R launches over R copies
past the L2 in one CUDA graph, hkc and torch alike), ncu on three short GEMMs, and bert_layer /
llama_block against PyTorch eager and eager under a CUDA graph.

--tune-bars: hkc tune (gemm_tma alone, --top N) over the bars' standalone launches on the GPU,
merged with specs/tuning/h200.db into OUT/h200.db, then the bars again with packs rebuilt on it.
--short: bench/lib/gemm_short.yaml (the layers' short launches in one pack) against F.linear
(bench/lib/linear_peer.py), `hkc run --profile`, and ncu over one run.
--cubins DIR: bench/lib/gemm_cubin_check.py on standalone cubins (DIR/manifest.txt; its
docstring has the format): numerics against float64 torch on odd shapes and timing against
torch.matmul, no hkc on the device. Tile experiments without rebuilding hkc: the kernel options
(`hkc build --kernel-option gemm_tma_cfg=...`, docs/TUNING.md)."""

    def args(self, p):
        p.add_argument("--only", help="regex over the bar cases (prepare and device)")
        p.add_argument("--configs", help="prepare: gemm_tma configurations to force as well, ';'-separated "
                       "(pp=0,mw=1,bn=256,st=4): packs CASE@CFG.hkpack")
        g = p.add_mutually_exclusive_group()
        g.add_argument("--tune-bars", action="store_true", help="tune the bars' launches on the GPU, then the bars")
        g.add_argument("--short", action="store_true", help="the short GEMMs of the layers: F.linear, profile, ncu")
        g.add_argument("--cubins", metavar="DIR", help="standalone cubins listed in DIR/manifest.txt (device only)")
        p.add_argument("--top", type=int, default=6, help="--tune-bars: candidates measured per launch (default 6)")

    def prepare(self, a):
        if a.cubins:
            return
        build_dev(a, ("hkc", "hkrt", "hk_bench_cold"))
        if a.short:
            hkc_build(os.path.join(LIB, "gemm_short.yaml"), DEV + "/bench/gemm_short.hkpack", "sm_90a", tuning_flags(TUNING_DB))
            return
        cmd = ["python3", os.path.join(LIB, "gemm_bars.py"), "prepare"]
        cmd += ["--only", a.only] if a.only else []
        cmd += ["--configs", a.configs] if a.configs else []
        run(cmd)
        for y in sorted(glob.glob(os.path.join(ROOT, DEV, "bench", "gemm", "*.yaml"))):
            if re.match(r"(big|small|epi)_", os.path.basename(y)):
                rel = os.path.relpath(y, ROOT)
                hkc_build(rel, rel[:-5] + "@old.hkpack", "sm_90a", tuning_flags(TUNING_DB) + ["--kernel-option", "gemm_tma=off"])
        for s in ("specs/llama_block.yaml", "tests/specs/fusion_forms.yaml"):
            hkc_build(s, "%s/dual/%s.hkpack" % (DEV, os.path.basename(s)[:-5]), "sm_90a", tuning_flags(TUNING_DB))
        layer_packs(a, ["specs/bert_layer.yaml", "specs/llama_block.yaml"])
        du(DEV)

    def device(self, a):
        env = device_env(a, "gemm")
        if a.cubins:
            run(["python3", os.path.join(LIB, "gemm_cubin_check.py"), a.cubins, "--check", "--bench"] +
                (["--only", a.only] if a.only else []), env=env)
        elif a.short:
            need(DEV + "/bench/gemm_short.hkpack", "bench/run.py gemm --short --prepare")
            out = env["OUT"]
            rc = run("python3 %s/linear_peer.py | tee %s/peer.txt" % (LIB, out), env=env, check=False)
            rc |= run("%s run %s/bench/gemm_short.hkpack --random-params --batch 1 --profile --runs 50 | tee %s/hkc_profile.txt"
                      % (HKC, DEV, out), env=env, check=False)
            if shutil.which("ncu") or os.path.exists("/usr/local/cuda/bin/ncu"):
                ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
                run("%s --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats "
                    "--section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis "
                    "--section MemoryWorkloadAnalysis %s run %s/bench/gemm_short.hkpack --random-params --batch 1 "
                    "--runs 1 --warmup 0 > %s/ncu_gemm_short.txt 2>&1" % (ncu, HKC, DEV, out), env=env, check=False)
            if rc:
                raise Failed("gemm --short: a step failed")
        else:
            need(DEV + "/bench/gemm", "bench/run.py gemm --prepare")
            script = "gemm_tune_bars.sh" if a.tune_bars else "gemm_device.sh"
            if a.tune_bars:
                env["TUNE_TOP"] = str(a.top)
            run(["bash", os.path.join(LIB, script)], env=env)


class Attention(Measurement):
    name, help = "attention", "attention against F.scaled_dot_product_attention, numerics and timing"
    doc = """Default: attention_tma's bars (bench/lib/attn_bars.py). Prepare builds packs of the specs with
attention (host, sm_90, sm_90a; build-dev/packs-attn/) and one single-op pack per case and
configuration tag (build-dev/bench/attn/: the build's default, attention_tma in each schedule and
a few tiles, and `old` = attn_tma=off). The device half (bench/lib/attention_device.sh, about 2.5
minutes): numerics of every (case, tag) against a float64 reference with a watchdog that skips a
hanging tag, the device harness on the specs with attention, timing (R launches over R input
copies in one CUDA graph, SDPA the same way), and ncu on three cases if time is left.

--decode: split-KV and grouped-query row packing on few queries over long keys (attn_bars.py
--set skv; build-dev/bench/skv/): numerics (each split pack twice: same bytes), then timing
against SDPA (bench/lib/attention_decode_device.sh, under 4 minutes).
--mma-tiles: attention_mma's tile configurations as standalone kernels (bench/lib/attention_mma/):
prepare generates their sources (hk_attn_dump, HKC_ATTN_TUNE), the device half compiles them with
nvcc and checks and times them against SDPA.
--db-from BARS.jsonl: tuning database entries (stdout) from a timing run, for the shapes where a
tag beat the default by more than 2% (merge with `hkc tune --merge`).
--sim: bench/lib/attn_protocol_sim.py, a discrete simulation of attention_tma's barrier protocol
under random interleavings (CPU, under a second)."""

    def args(self, p):
        p.add_argument("--only", help="regex over the cases (prepare and device)")
        g = p.add_mutually_exclusive_group()
        g.add_argument("--decode", action="store_true", help="split-KV attention on decode shapes")
        g.add_argument("--mma-tiles", action="store_true", help="attention_mma's tile configurations, standalone")
        g.add_argument("--db-from", metavar="BARS.jsonl", help="tuning entries from a timing run (stdout)")
        g.add_argument("--sim", action="store_true", help="attention_tma's barrier protocol, simulated (CPU)")
        p.add_argument("--bad", help="--db-from: the run's bad.json (tags that failed or hung)")

    def now(self, a):
        if a.sim:
            run(["python3", os.path.join(LIB, "attn_protocol_sim.py")])
            return True
        if a.db_from:
            run(["python3", os.path.join(LIB, "attn_bars.py"), "db", "--from", a.db_from] + (["--bad", a.bad] if a.bad else []))
            return True
        return False

    def prepare(self, a):
        if a.mma_tiles:
            build_dev(a, ("hkc", "hk_attn_dump"))
            run(["bash", os.path.join(LIB, "attention_mma", "gen.sh"), DEV + "/hk_attn_dump", DEV + "/bench/attention_mma"])
            return
        build_dev(a)
        only = ["--only", a.only] if a.only else []
        if a.decode:
            run(["nice", "python3", os.path.join(LIB, "attn_bars.py"), "--set", "skv", "prepare"] + only)
            idx = json.load(open(os.path.join(ROOT, DEV, "bench", "skv", "tags.json")))
            for case, tags in idx.items():
                d = tags.get("default", {})
                print("model's choice %-40s %s %s" % (case, d.get("kernel", "?"), d.get("cfg", "")))
            du(DEV)
            return
        for s in ("specs/bert_layer.yaml", "specs/llama_block.yaml", "tests/specs/op_attention.yaml",
                  "tests/specs/op_attention128.yaml"):
            pack = "%s/packs-attn/%s.hkpack" % (DEV, os.path.basename(s)[:-5])
            hkc_build(s, pack, "host,sm_90,sm_90a", tuning_flags(TUNING_DB))
            ins = subprocess.run([HKC, "inspect", pack], cwd=ROOT, capture_output=True, text=True).stdout
            if not re.search(r"^  hk_attention.*kernel=attention_tma", ins, re.M):
                raise Failed("%s has no attention_tma kernel on sm_90a" % s)
        run(["python3", os.path.join(LIB, "attn_bars.py"), "prepare"] + only)
        du(DEV)

    def device(self, a):
        env = device_env(a, "attention-decode" if a.decode else "attention")
        if a.mma_tiles:
            need(DEV + "/bench/attention_mma", "bench/run.py attention --mma-tiles --prepare")
            run(["python3", os.path.join(LIB, "attention_mma", "run.py"), DEV + "/bench/attention_mma"], env=env)
        elif a.decode:
            need(DEV + "/bench/skv", "bench/run.py attention --decode --prepare")
            run(["bash", os.path.join(LIB, "attention_decode_device.sh")], env=env)
        else:
            need(DEV + "/bench/attn", "bench/run.py attention --prepare")
            run(["bash", os.path.join(LIB, "attention_device.sh")], env=env)


class Rows(Measurement):
    name, help = "rows", "the memory-bound kernels alone (norms, softmax, element-wise) against torch and a copy"
    doc = """rows_vec16 / elementwise_vec16 (compiler/codegen/variants/variant_rows.c) outside hkc's runtime:
prepare builds hk_rows_tool and writes the generated sm_90 sources with the launch dims hkc
computes (bench/lib/rows/gen.sh, build-dev/bench/rows/); the device half
(bench/lib/rows/bench.py; torch, nvcc, libcuda) compiles them with nvcc, launches them through
libcuda, checks each against torch in float64 (max |err| within 2x torch's own low-precision
error) and, for the 64 Mi-element shapes, prints the kernel's time, TB/s (bytes read + written),
the percentage of a same-size copy_ measured in the same run, and torch's TB/s. `_a1` kernels
are the simple ones (align 1), for comparison.

Sweeps: HKC_ROWS_CFG="THREADS,CACHE,TARGET,MIN_BLOCKS,PREFETCH,GRID_PER_CU" (HKC_ROWS_CFG_F32 /
HKC_ROWS_CFG_16 for one side) and HKC_EW_CFG="THREADS,UNROLL,MIN_BLOCKS,WAVES" change the source
and the launch dims: set them for --prepare, and check `build-dev/hk_rows_tool res sm_90 OP DTYPE
ALIGN` reports scratch 0 for the configuration. HKC_EW_EXACT_ACT=1 puts 16-bit gelu/silu back on
erff/expf. HKC_TEMPLATE_DIR=<copy of templates/> tries template edits without rebuilding."""

    def args(self, p):
        p.add_argument("--only", help="device: a substring of the kernel names to run")

    def prepare(self, a):
        build_dev(a, ("hkc", "hk_rows_tool"))
        run(["bash", os.path.join(LIB, "rows", "gen.sh"), DEV + "/hk_rows_tool", DEV + "/bench/rows"])

    def device(self, a):
        need(DEV + "/bench/rows/cases.json", "bench/run.py rows --prepare")
        run(["python3", os.path.join(LIB, "rows", "bench.py"), DEV + "/bench/rows"] + ([a.only] if a.only else []),
            env=device_env(a, "rows"))


class Peers(Measurement):
    name, help = "peers", "whole layers against PyTorch eager, CUDA graphs and torch.compile"
    doc = """bert_layer and llama_block (or other specs) in five systems: PyTorch eager, eager under a CUDA
graph, torch.compile, torch.compile max-autotune and hkc through libhkrt, per batch size, the
same weights and inputs, every output checked (bench/lib/peers.py has the protocol). Prepare
builds build-dev/ (hkc, libhkrt, hk_bench_cold) and one sm_90a pack per spec with every batch
bucket (build-dev/peers/). The device half runs bench/lib/peers_device.sh once per spec named
(one device call each, under 10 minutes with the default budget): versions, hkc's build time on
the GPU machine's CPUs, then peers.py (hkc cold start; eager, CUDA graph and hkc per batch with
the float64 check; torch.compile per batch and in fresh processes; max-autotune), the markdown
report and the plot. Arguments after `--` go to peers.py (--systems eager,cudagraph,hkc,
--batches 32,128, --skip-max-autotune, --no-torch-cold, --cold-runs 0, --hkc-sessions one, ...).
--profile: then `hkc run --profile` of the same pack at every batch (each launch alone against
the whole graph: the bubbles).
--report FILES / --plot FILES: the docs' tables (bench/lib/peers_report.py) and plot.
--selftest: the CPU side's tests (no PyTorch, no GPU; ctest runs it as bench.peers_selftest)."""

    def args(self, p):
        p.add_argument("parts", nargs="*", metavar="bert|llama|SPEC",
                       help="the layers (default: bert and llama); SPEC: a spec path or name under specs/")
        p.add_argument("--target", default="sm_90a", help="prepare: the packs' GPU target (default sm_90a)")
        p.add_argument("--tuning-db", default=TUNING_DB, help="prepare: '' for the model's choices")
        p.add_argument("--build-times", action="store_true", help="prepare: also bench/run.py build-times here")
        p.add_argument("--tag", help="device: name a follow-up call's files apart (peers_PART_TAG.*)")
        p.add_argument("--no-device-build", action="store_true", help="device: skip hkc's build time on the GPU machine")
        p.add_argument("--profile", action="store_true", help="device: per-launch profiles at every batch afterwards")
        p.add_argument("--report", nargs="+", metavar="JSONL", help="markdown tables from peers JSON lines (stdout)")
        p.add_argument("--plot", nargs="+", metavar="JSONL", help="the latency plot from peers JSON lines")
        p.add_argument("-o", "--plot-out", default="docs/peers.png", help="--plot: the PNG (default docs/peers.png)")
        p.add_argument("--selftest", action="store_true", help="the CPU side's tests (with --build DIR: the dry runs)")
        p.add_argument("--build", help="--selftest: build folder with hkc, libhkrt.so, hk_bench_cold")

    def specs(self, a):
        return [layer_spec(p) for p in (a.parts or ["bert", "llama"])]

    def now(self, a):
        if a.selftest:
            run([sys.executable, os.path.join(LIB, "peers_selftest.py")] + (["--build", a.build] if a.build else []))
            return True
        if a.report:
            run(["python3", os.path.join(LIB, "peers_report.py")] + a.report)
            return True
        if a.plot:
            run(["python3", os.path.join(LIB, "plot_peers.py")] + a.plot + ["-o", a.plot_out])
            return True
        return False

    def prepare(self, a):
        build_dev(a, ("hkc", "hkrt", "hk_bench_cold"))
        specs = [s for _, s in self.specs(a)]
        layer_packs(a, specs, a.target, a.tuning_db)
        if a.build_times:
            out = DEV + "/peers/build_times.jsonl"
            if os.path.exists(os.path.join(ROOT, out)):
                os.remove(os.path.join(ROOT, out))
            run(["bash", os.path.join(LIB, "build_times.sh"), "--specs", " ".join(specs), "--out", out])
        du(DEV)

    def device(self, a):
        env = device_env(a, "peers")
        if a.budget:
            env["PEERS_BUDGET_S"] = str(int(a.budget))
        if a.tag:
            env["PEERS_TAG"] = a.tag
        if a.no_device_build:
            env["PEERS_DEVICE_BUILD"] = "0"
        extra = a.extra
        rc = 0
        for part in (a.parts or ["bert", "llama"]):
            name, _ = layer_spec(part)
            need("%s/peers/%s.hkpack" % (DEV, name), "bench/run.py peers --prepare")
            rc |= run(["bash", os.path.join(LIB, "peers_device.sh"), part if part in LAYERS else name] + extra,
                      env=env, check=False)
            if a.profile:
                for b in spec_batches("%s/peers/%s.yaml" % (DEV, name)):
                    f = "%s/profile_%s_b%d.txt" % (env["OUT"], name, b)
                    with open(f, "w") as fh:
                        run([HKC, "run", "%s/peers/%s.hkpack" % (DEV, name), "--target", a.target, "--batch", str(b),
                             "--random-params", "--runs", "200", "--warmup", "20", "--profile", "--repeats", "50"],
                            env=env, check=False, stdout=fh, timeout=60)
                    run("grep -E 'sum of launches|bubbles' %s || true" % shlex.quote(f), check=False)
        if rc:
            raise Failed("peers: a run failed or an output did not match")


class Ops(Measurement):
    name, help = "ops", "every op kernel alone through libhkrt against its PyTorch peer"
    doc = """One single-op spec per case (GEMMs, norms, softmax, element-wise, attention at the shapes of the
op table) built for the GPU target (default sm_90a) into --dir (default build-dev/bench/ops/);
the device half (bench/lib/ops.py) drives each pack through libhkrt from Python (torch tensors
bound by pointer, runs on torch's stream), checks it against torch in float64 and times hkc and
the peer with one protocol (CUDA events around back-to-back calls, median of 15 samples after
warm-up, inputs rotated past the 60 MB L2); memory-bound cases are also reported against a
device-to-device copy measured in the same run. Every build-dev/bench/t_* folder (packs of the
same cases built with other kernel options: --dir build-dev/bench/t_NAME --build-flags ...) is
run too, as a sweep.
--harness: the device numerics harness (tests/device/prepare.sh, tests/device/run.sh on sm_90 and
sm_90a) as well."""

    def args(self, p):
        p.add_argument("--only", help="prepare: regex over the case names to build")
        p.add_argument("--pattern", default="*", help="device: glob over the case names to run")
        p.add_argument("--target", default="sm_90a", help="prepare: GPU target (sm_90: the mma.sync kernels)")
        p.add_argument("--dir", default=DEV + "/bench/ops", help="prepare: where the cases go")
        p.add_argument("--build-flags", default="--tuning-db " + TUNING_DB,
                       help="prepare: hkc build flags (default: the tuning database; '--tune default': fixed defaults)")
        p.add_argument("--harness", action="store_true", help="the device numerics harness too")

    def prepare(self, a):
        if a.harness:
            run(["bash", "tests/device/prepare.sh"], stdout=subprocess.DEVNULL)
        build_dev(a)
        d = os.path.join(ROOT, a.dir)
        os.makedirs(d, exist_ok=True)
        for f in glob.glob(os.path.join(d, "*.yaml")) + glob.glob(os.path.join(d, "*.hkpack")):
            os.remove(f)
        n = 0
        for name, text in ops_cases():
            if a.only and not re.search(a.only, name):
                continue
            with open(os.path.join(d, name + ".yaml"), "w") as f:
                f.write(text)
            hkc_build(os.path.join(a.dir, name + ".yaml"), os.path.join(a.dir, name + ".hkpack"), a.target,
                      shlex.split(a.build_flags))
            n += 1
        say("%d cases in %s" % (n, a.dir))

    def device(self, a):
        env = device_env(a, "ops")
        out = env["OUT"]
        rc = 0
        if a.harness:
            for t, d in (("sm_90", "/tmp/hk-d90"), ("sm_90a", "/tmp/hk-d90a")):
                with open("%s/check_%s.log" % (out, t), "w") as fh:
                    rc |= run(["bash", "tests/device/run.sh", d], env=dict(env, HK_GPU_TARGET=t), check=False, stdout=fh)
                run("tail -n1 %s/check_%s.log; grep -E '^FAIL' %s/check_%s.log | cut -c1-200 | head -20 || true"
                    % (out, t, out, t), check=False)
        need(a.dir, "bench/run.py ops --prepare")
        rc |= run("python3 %s/ops.py %s --dir %s --out %s/ops.jsonl | tee %s/ops.log"
                  % (LIB, shlex.quote(a.pattern), shlex.quote(a.dir), out, out), env=env, check=False)
        for d in sorted(glob.glob(os.path.join(ROOT, DEV, "bench", "t_*"))):
            rel = os.path.relpath(d, ROOT)
            print("=== sweep %s" % os.path.basename(d), flush=True)
            run("python3 %s/ops.py --dir %s 2>&1 | tee -a %s/sweeps.log" % (LIB, rel, out), env=env, check=False)
        if rc:
            raise Failed("ops: a numerics check failed")


def ops_cases():
    """(name, spec text) of every op case (bench/run.py ops)."""
    def head(name, dt):
        return "hkc: 1\nname: %s\ndtype: %s\nbatch_sizes: [1]\n" % (name, dt)

    def gemm(name, dt, m, n, k, epi=False):
        t = head(name, dt)
        if epi:
            t += "inputs: {x: [%d, %d], r: [%d, %d]}\nparams: {w: [%d, %d], b: [%d]}\ngraph:\n" % (m, k, m, n, k, n, n)
            t += "  - {name: g, op: gemm, in: [x, w], bias: b, act: gelu, residual: r, out: y}\n"
        else:
            t += "inputs: {x: [%d, %d]}\nparams: {w: [%d, %d]}\ngraph:\n" % (m, k, k, n)
            t += "  - {name: g, op: gemm, in: [x, w], out: y}\n"
        return name, t + "outputs: [y]\n"

    def rows(name, dt, op, r, c):
        t = head(name, dt) + "inputs: {x: [%d, %d]}\n" % (r, c)
        if op == "layernorm":
            t += "params: {g: [%d], b: [%d]}\ngraph:\n  - {name: n, op: layernorm, in: [x], gamma: g, beta: b, out: y}\n" % (c, c)
        elif op == "rmsnorm":
            t += "params: {g: [%d]}\ngraph:\n  - {name: n, op: rmsnorm, in: [x], gamma: g, out: y}\n" % c
        elif op == "add":
            t += "params: {z: [%d, %d]}\ngraph:\n  - {name: n, op: add, in: [x, z], out: y}\n" % (r, c)
        else:
            t += "graph:\n  - {name: n, op: %s, in: [x], out: y}\n" % op
        return name, t + "outputs: [y]\n"

    def attn(name, dt, s, dh, causal):
        t = head(name, dt)
        t += "inputs: {q: [8, %d, 16*%d], k: [8, %d, 16*%d], v: [8, %d, 16*%d]}\n" % (s, dh, s, dh, s, dh)
        t += "graph:\n  - {name: a, op: attention, in: [q, k, v], heads: 16, causal: %s, out: y}\n" % causal
        return name, t + "outputs: [y]\n"

    out = []
    for dt in ("bf16", "f16"):
        out.append(gemm("gemm_%s_4096x4096x4096" % dt, dt, 4096, 4096, 4096))
        out.append(gemm("gemm_%s_8192x8192x8192" % dt, dt, 8192, 8192, 8192))
    out.append(gemm("gemm_bf16_4096x4096x4096_epi", "bf16", 4096, 4096, 4096, epi=True))
    for n, k in ((768, 768), (2304, 768), (3072, 768), (768, 3072), (4096, 4096), (14336, 4096), (4096, 14336)):
        out.append(gemm("gemm_bf16_4096x%dx%d" % (n, k), "bf16", 4096, n, k))
    for op in ("layernorm", "rmsnorm", "softmax", "add", "gelu"):
        out.append(rows("mem_%s_bf16_16384x4096" % op, "bf16", op, 16384, 4096))
    out.append(rows("mem_layernorm_f32_16384x4096", "f32", "layernorm", 16384, 4096))
    for s in (1024, 4096):
        for dh in (64, 128):
            for c in ("false", "true"):
                out.append(attn("attn_bf16_b8h16_s%d_d%d_%s" % (s, dh, "causal" if c == "true" else "full"), "bf16", s, dh, c))
    out.append(attn("attn_f16_b8h16_s4096_d128_full", "f16", 4096, 128, "false"))
    return out


class Fusion(Measurement):
    name, help = "fusion", "the same spec fused (--fusion auto) against unfused (--fusion none)"
    doc = """Each spec built twice for the GPU target (default sm_90a), `--fusion auto` and `--fusion none`
(build-dev/fusion/); the device half replays both through libhkrt's CUDA graph at every batch
bucket with the same random inputs (bench/lib/fusion.py: outputs cross-checked, median graph
latency of each), then `hkc run --profile` of the fused packs at small batches (each launch
beside its floor).
--harness: the device numerics harness (tests/device/prepare.sh, run.sh on sm_90a and sm_90)."""

    def args(self, p):
        p.add_argument("parts", nargs="*", metavar="bert|llama|SPEC", help="default: bert and llama")
        p.add_argument("--target", default=os.environ.get("HK_GPU_TARGET", "sm_90a"))
        p.add_argument("--build-flags", default="", help="prepare: extra hkc build flags (e.g. --tuning-db specs/tuning/h200.db)")
        p.add_argument("--harness", action="store_true", help="the device numerics harness too")

    def prepare(self, a):
        if a.harness:
            run(["bash", "tests/device/prepare.sh"], stdout=subprocess.DEVNULL)
        else:
            build_dev(a)
        for name, spec in [layer_spec(p) for p in (a.parts or ["bert", "llama"])]:
            for mode in ("auto", "none"):
                hkc_build(spec, "%s/fusion/%s_%s.hkpack" % (DEV, name, mode), a.target,
                          ["--fusion", mode] + shlex.split(a.build_flags))
            shutil.copy(os.path.join(ROOT, spec), os.path.join(ROOT, DEV, "fusion", name + ".yaml"))

    def device(self, a):
        env = device_env(a, "fusion")
        out = env["OUT"]
        rc = 0
        if a.harness:
            for t, d in (("sm_90a", "/tmp/hk-d90a"), ("sm_90", "/tmp/hk-d90")):
                with open("%s/check_%s.log" % (out, t), "w") as fh:
                    rc |= run(["bash", "tests/device/run.sh", d], env=dict(env, HK_GPU_TARGET=t), check=False, stdout=fh)
                run("tail -n1 %s/check_%s.log" % (out, t), check=False)
        for name, _ in [layer_spec(p) for p in (a.parts or ["bert", "llama"])]:
            need("%s/fusion/%s_auto.hkpack" % (DEV, name), "bench/run.py fusion --prepare")
            f = "%s/fusion/%s" % (DEV, name)
            rc |= run("python3 %s/fusion.py %s.yaml %s_auto.hkpack %s_none.hkpack --out %s/fusion.jsonl 2>&1 | tee -a %s/fusion.log"
                      % (LIB, f, f, f, out, out), env=env, check=False)
            with open("%s/profile.log" % out, "a") as fh:
                for b in [x for x in spec_batches(f + ".yaml") if x <= 8]:
                    rc |= run([HKC, "run", "--random-params", f + "_auto.hkpack", "--batch", str(b), "--profile",
                               "--repeats", "50"], env=env, check=False, stdout=fh, timeout=120)
        run("cat %s/profile.log" % out, check=False)
        if rc:
            raise Failed("fusion: a step failed")


class SplitK(Measurement):
    name, help = "splitk", "split-K (gemm_mma) and stream-K (gemm_tma) GEMMs: numerics, determinism, timing"
    doc = """Prepare builds build-dev/ and the split-K / stream-K packs (bench/lib/splitk.py prepare, about 400:
sm_80, sm_90 and sm_90a numerics cases, sm_90 and sm_90a timing cases, each checked to hold the
configuration it asked for and not to spill; built with --kernel-option gemm_split=on). The
device half (bench/lib/splitk_device.sh, DEVICE_BUDGET_S default 420 s): numerics of every
configuration against a float64 torch reference on odd shapes, the same bytes from two runs, the
small-M bars against F.linear, and bert_layer / llama_block with every GEMM split on sm_90 and
sm_90a through tests/device/check.py. sm_80 packs must be refused on an sm_90 GPU."""

    def args(self, p):
        p.add_argument("--only", help="prepare: regex over the case names")

    def prepare(self, a):
        build_dev(a)
        run(["python3", os.path.join(LIB, "splitk.py"), "prepare"] + (["--only", a.only] if a.only else []))
        du(DEV)

    def device(self, a):
        need(DEV + "/splitk", "bench/run.py splitk --prepare")
        run(["bash", os.path.join(LIB, "splitk_device.sh")], env=device_env(a, "splitk"))


class ColdStart(Measurement):
    name, help = "cold-start", "a pack opened in a fresh process: context, open, upload, first result"
    doc = """build-dev/hk_bench_cold (bench/lib/cold_start.c: the public API only) in --runs fresh processes
per spec, median: CUDA context creation (dlopen libcuda, cuInit, primary context retain and set
current) timed on its own, then from hk_pack_open_file through session create, every tensor
allocated, filled and bound, one run and a synchronize (the first result), and a second run.
Prepare builds the layers' sm_90a packs (as `peers --prepare`). torch.compile's first call in a
fresh process is measured by `bench/run.py peers` (the same table there)."""

    def args(self, p):
        p.add_argument("parts", nargs="*", metavar="bert|llama|SPEC", help="default: bert and llama")
        p.add_argument("--runs", type=int, default=5, help="fresh processes per spec (default 5)")
        p.add_argument("--batch", type=int, default=1)

    def prepare(self, a):
        build_dev(a, ("hkc", "hkrt", "hk_bench_cold"))
        layer_packs(a, [s for _, s in [layer_spec(p) for p in (a.parts or ["bert", "llama"])]])

    def device(self, a):
        env = device_env(a, "cold-start")
        os.environ.update(env)
        sys.path.insert(0, os.path.join(HERE, "lib"))
        import peers_common as pc  # lazily: the device half only
        need(DEV + "/hk_bench_cold", "bench/run.py cold-start --prepare")
        rows = []
        with open(os.path.join(env["OUT"], "cold_start.jsonl"), "a") as out:
            for name, _ in [layer_spec(p) for p in (a.parts or ["bert", "llama"])]:
                pack = os.path.join(ROOT, DEV, "peers", name + ".hkpack")
                rec, err = pc.cold_hkc(os.path.join(ROOT, DEV, "hk_bench_cold"), pack, a.batch, a.runs)
                out.write(json.dumps(dict(rec, kind="cold_hkc", spec=name, batch=a.batch, error=err)) + "\n")
                if err:
                    raise Failed("%s: %s" % (name, err))
                rows.append((name, rec["median"]))

        def f(x, fmt):
            return "-" if x is None else fmt % x
        print("| spec | batch | CUDA context | open -> first result | of which upload | second run | whole process |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, m in rows:
            print("| %s | %d | %s ms | %s ms | %s ms | %s ms | %s s |" % (
                name, a.batch, f(m["ctx_ms"], "%.1f"), f(m["first_result_ms"], "%.2f"), f(m["upload_ms"], "%.2f"),
                f(m["second_run_ms"], "%.3f"), f(m["process_s"], "%.3f")))


class BuildTimes(Measurement):
    name, help = "build-times", "hkc build time, cold and warm, pack and libhkrt sizes (CPU)"
    doc = """bench/lib/build_times.sh on this machine: for each spec and target, every batch bucket, a cold
build (empty compile cache: every kernel generated and compiled) and the same build again with
that cache filled (median of --warm-runs), the pack's size, and libhkrt.so's as built and
stripped. JSON lines for bench/lib/peers_report.py. Prepare builds build-dev/hkc; the
measurement runs here (it needs no GPU); with --device it is recorded as the GPU machine's CPUs
(`where: device`), as the peers' device half does."""

    def args(self, p):
        p.add_argument("--specs", default="specs/bert_layer.yaml specs/llama_block.yaml")
        p.add_argument("--targets", default="sm_90 sm_90a")
        p.add_argument("--warm-runs", type=int, default=3)
        p.add_argument("--jsonl", default=DEV + "/peers/build_times.jsonl", help="JSON lines (appended)")

    def prepare(self, a):
        build_dev(a)

    def device(self, a):
        where = "device" if a.device else "cpu"
        run(["bash", os.path.join(LIB, "build_times.sh"), "--specs", a.specs, "--targets", a.targets,
             "--warm-runs", str(a.warm_runs), "--where", where, "--out", a.jsonl])


class Launch(Measurement):
    name, help = "launch", "launch overhead: graph replay vs stream launches vs a raw CUDA graph"
    doc = """A chain of --nodes tiny element-wise kernels (bench/lib/chain.sh: relu/silu over a [1, 256] f32
tensor), built for --target (default sm_90); build-dev/hk_bench_launch (bench/lib/launch_overhead.c)
replays the pack three ways: libhkrt's CUDA graph, libhkrt with HK_LAUNCH=stream (one
cuLaunchKernel per node), and a CUDA graph of the same cubins built directly with the driver API
(the floor for any graph-based runtime). Median of 21 samples of 50 back-to-back runs."""

    def args(self, p):
        p.add_argument("--nodes", type=int, default=200)
        p.add_argument("--target", default=os.environ.get("HK_GPU_TARGET", "sm_90"))

    def pack(self, a):
        return "%s/bench/chain%d.hkpack" % (DEV, a.nodes)

    def prepare(self, a):
        build_dev(a, ("hkc", "hkrt", "hk_bench_launch"))
        os.makedirs(os.path.join(ROOT, DEV, "bench"), exist_ok=True)
        y = "%s/bench/chain%d.yaml" % (DEV, a.nodes)
        run(["bash", os.path.join(LIB, "chain.sh"), str(a.nodes), y])
        hkc_build(y, self.pack(a), a.target)

    def device(self, a):
        need(self.pack(a), "bench/run.py launch --prepare")
        env = device_env(a, "launch")
        run("%s/hk_bench_launch %s | tee %s/launch.log" % (DEV, self.pack(a), env["OUT"]), env=env)


class Tune(Measurement):
    name, help = "tune", "hkc tune on the GPU: measured kernel choices for specs/tuning/h200.db"
    doc = """The device half (bench/lib/tune_device.sh) runs `hkc tune` on the GPU over each spec of --specs
(default: the GEMM launches of bert_layer and llama_block, specs/tuning/bert_layer_bf16.yaml and
llama_gemms.yaml): for every launch the model's --top best-ranked candidates are built as
one-launch packs, replayed through libhkrt (median after warm-up) and cross-checked against the
default configuration; the databases are merged (with --base-db too, when given) into
OUT/h200.db -- commit it as specs/tuning/h200.db; the reports (default / model / measured best per
launch, geomeans) are OUT/tune_NAME.md. --check then rebuilds bert_layer and llama_block with the
new database: numerics against PyTorch, fused against unfused latency, profiles, and the whole
numerics harness on sm_90a. Whole specs can be tuned too (--specs specs/llama_block.yaml)."""

    def args(self, p):
        p.add_argument("--specs", default="specs/tuning/bert_layer_bf16.yaml specs/tuning/llama_gemms.yaml")
        p.add_argument("--top", type=int, default=8, help="candidates measured per launch (default 8)")
        p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                       help="kernel option for the tuning space (e.g. gemm_tma=on); repeatable")
        p.add_argument("--target", default="sm_90a")
        p.add_argument("--base-db", help="merge into this database as well (e.g. specs/tuning/h200.db)")
        p.add_argument("--check", action="store_true", help="then check and time the layers built with it")

    def prepare(self, a):
        if a.check:
            run(["bash", "tests/device/prepare.sh"], stdout=subprocess.DEVNULL)
        else:
            build_dev(a)

    def device(self, a):
        env = device_env(a, "tune")
        env.update(TUNE_SPECS=a.specs, TUNE_TOP=str(a.top), TUNE_OPTIONS=" ".join(a.option), TUNE_TARGET=a.target,
                   TUNE_CHECK="1" if a.check else "0")
        if a.base_db:
            env["TUNE_BASE_DB"] = a.base_db
        run(["bash", os.path.join(LIB, "tune_device.sh")], env=env)


class AB(Measurement):
    name, help = "ab", "one spec built two ways (hkc build flags), whole graphs timed interleaved"
    doc = """An A/B of two builds of one spec: prepare builds build-dev/ab/{a,b}_NAME.hkpack for --target
(default sm_90a) with the extra flags of --a and --b (kernel options, --fusion, another
--tuning-db: specs/tuning/h200.db unless one is given; write --a=--flag for a single flag); the device half times `hkc run --runs 300 --warmup 30`
(median per run) of both packs at every batch, --rounds interleaved rounds, and with --profile
the per-launch profile of each (`hkc run --profile --repeats 50`). Environment-driven variants
(HKC_TEMPLATE_DIR, HKC_*_CFG) go through --a-env / --b-env at prepare time."""

    def args(self, p):
        p.add_argument("part", metavar="bert|llama|SPEC")
        p.add_argument("--a", default="", help="hkc build flags of pack a")
        p.add_argument("--b", default="", help="hkc build flags of pack b")
        p.add_argument("--a-env", default="", help="VAR=VALUE ... for building pack a")
        p.add_argument("--b-env", default="", help="VAR=VALUE ... for building pack b")
        p.add_argument("--target", default="sm_90a")
        p.add_argument("--batches", help="comma-separated (default: the spec's batch_sizes)")
        p.add_argument("--rounds", type=int, default=3)
        p.add_argument("--profile", action="store_true")

    def prepare(self, a):
        build_dev(a)
        name, spec = layer_spec(a.part)
        for v, flags, envs in (("a", a.a, a.a_env), ("b", a.b, a.b_env)):
            env = dict(x.split("=", 1) for x in shlex.split(envs))
            flags = shlex.split(flags)
            base = [] if "--tuning-db" in flags or "--tune" in flags else tuning_flags(TUNING_DB)
            hkc_build(spec, "%s/ab/%s_%s.hkpack" % (DEV, v, name), a.target, base + flags, env=env)
        shutil.copy(os.path.join(ROOT, spec), os.path.join(ROOT, DEV, "ab", name + ".yaml"))

    def device(self, a):
        env = device_env(a, "ab")
        name, _ = layer_spec(a.part)
        need("%s/ab/a_%s.hkpack" % (DEV, name), "bench/run.py ab --prepare")
        batches = [int(x) for x in a.batches.split(",")] if a.batches else spec_batches("%s/ab/%s.yaml" % (DEV, name))
        with open(os.path.join(env["OUT"], "ab.log"), "a") as log:
            for b in batches:
                for r in range(1, a.rounds + 1):
                    for v in ("a", "b"):
                        p = subprocess.run([HKC, "run", "%s/ab/%s_%s.hkpack" % (DEV, v, name), "--target", a.target,
                                            "--batch", str(b), "--random-params", "--runs", "300", "--warmup", "30"],
                                           cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=120)
                        med = [ln for ln in (p.stdout + p.stderr).splitlines() if "median" in ln]
                        line = "%s b%d %s#%d: %s" % (name, b, v, r, med[-1].strip() if med else "FAILED (exit %d)" % p.returncode)
                        print(line, flush=True)
                        log.write(line + "\n")
        if a.profile:
            for b in batches:
                for v in ("a", "b"):
                    with open("%s/profile_%s_%s_b%d.txt" % (env["OUT"], v, name, b), "w") as fh:
                        run([HKC, "run", "%s/ab/%s_%s.hkpack" % (DEV, v, name), "--target", a.target, "--batch", str(b),
                             "--random-params", "--runs", "200", "--warmup", "20", "--profile", "--repeats", "50"],
                            env=env, check=False, stdout=fh, timeout=120)


class Ptx(Measurement):
    name, help = "ptx", "PTX on the GPU: JIT from PTX, SASS by default, refusal without PTX (a check)"
    doc = """bench/lib/ptx_device.sh on the GPU (it builds its packs there with build-dev/hkc: nvrtc is on the
GPU machine too): per spec, an sm_80 pack with PTX must run through the driver's JIT on 9.0, an
sm_90 pack runs its SASS (its PTX with HK_PREFER_PTX=1), an sm_80 pack without PTX is refused;
every run checked against PyTorch and the outputs of every way and the host compared."""

    def prepare(self, a):
        build_dev(a)

    def device(self, a):
        need(HKC, "bench/run.py ptx --prepare")
        env = device_env(a, "ptx")
        run(["bash", os.path.join(LIB, "ptx_device.sh"), env["OUT"]], env=env)


class Generate(Measurement):
    name, help = "generate", "token generation against Hugging Face (bench/gen_prepare.sh, bench/gen_call.sh)"
    doc = """Prepare: bench/gen_prepare.sh (build-dev/ and, for each config in bench/gen_configs/, a
generation spec, its weights name map and packs in build-dev/gen/). Device: bench/gen_call.sh
(kv_append + kv_attention against NumPy, greedy tokens against Hugging Face, the decode step's
profile, sampling twice with one seed, ms/token and time to first token against Hugging Face;
GEN_POINTS, GEN_T_KV, GEN_T_CHECK, GEN_T_BENCH as those scripts read them)."""

    def prepare(self, a):
        run(["bash", "bench/gen_prepare.sh"], env={"HK_JOBS": jobs(a)})

    def device(self, a):
        need(DEV + "/gen", "bench/run.py generate --prepare")
        run(["bash", "bench/gen_call.sh"], env=device_env(a, "generate"))


class AmdWorkers(Measurement):
    name, help = "amd-workers", "AMD compiles in worker processes: many cold builds, byte-identical (CPU)"
    doc = """bench/lib/amd_workers_stress.sh: N cold builds (--no-cache) of a multi-kernel spec for
gfx90a,gfx1030 at -j2 and N at -j8, each pack compared byte for byte with the -j1 build; then N
runs of `hkc targets`, each output compared with the first (docs/DESIGN.md, "Compile workers").
Needs hiprtc here; no GPU."""

    def args(self, p):
        p.add_argument("--n", type=int, default=50, help="runs per kind (default 50)")
        p.add_argument("--spec", default="specs/bert_layer.yaml")

    def prepare(self, a):
        build_dev(a, ("hkc",))

    def device(self, a):
        run(["bash", os.path.join(LIB, "amd_workers_stress.sh"), HKC, str(a.n), a.spec])


MEASUREMENTS = [Gemm(), Attention(), Rows(), Peers(), Ops(), Fusion(), SplitK(), ColdStart(), BuildTimes(), Launch(),
                Tune(), AB(), Ptx(), Generate(), AmdWorkers()]


def parser():
    ap = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0],
                                 epilog="\n".join("  %-12s %s" % (m.name, m.help) for m in MEASUREMENTS),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="measurement", metavar="MEASUREMENT")
    sub.required = True
    for m in MEASUREMENTS:
        p = sub.add_parser(m.name, help=m.help, description=m.help + ".\n\n" + m.doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        m.args(p)
        g = p.add_argument_group("steps (neither flag: both, here)")
        g.add_argument("--prepare", action="store_true", help="the CPU half only: build-dev/ and the packs")
        g.add_argument("--device", action="store_true", help="the device half only (build-dev/ carried)")
        g.add_argument("--out", help="device logs (default: $OUT, else /tmp/hk-%s)" % m.name)
        g.add_argument("--budget", type=float, help="device seconds the half may take (DEVICE_BUDGET_S)")
        g.add_argument("-j", "--jobs", type=int, help="prepare: build jobs (default: the CPU count)")
        p.set_defaults(m=m)
    return ap


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:  # what follows goes to the measurement's own program (peers: bench/lib/peers.py)
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    a = parser().parse_args(argv)
    a.extra = extra
    m = a.m
    start = time.time()
    try:
        if m.now(a):
            return 0
        if a.prepare or not a.device:
            m.prepare(a)
        if a.device or not a.prepare:
            m.device(a)
    except Failed as e:
        say("%s: FAILED: %s (%.0f s)" % (m.name, e, time.time() - start))
        return 1
    except KeyboardInterrupt:
        return 130
    say("%s: done (%.0f s)" % (m.name, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
