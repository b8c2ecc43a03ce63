#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown for docs/BENCHMARKS.md (whole layers) from the JSON lines of the peers benchmark:
bench/lib/peers.py's files (one per spec, from bench/lib/peers_device.sh) and bench/lib/build_times.sh's
(CPU machine). Writes to stdout: versions and machine, the exact commands, latency per
batch with hkc / best peer and the bar's verdict, numerics, build and compile times, cold
start, sizes, and a list of every missed bar and every figure not measured.

usage: peers_report.py FILE.jsonl [FILE.jsonl ...] [--plot peers.png]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402

COMMANDS = """    bench/run.py peers --prepare                # CPU machine: build-dev/ + packs (sm_90a, all buckets)
    bench/run.py build-times                    # CPU machine: hkc build times, pack and libhkrt sizes
    bench/run.py peers bert --device            # GPU machine (build-dev/ carried), one call
    bench/run.py peers llama --device           # GPU machine, one call
    bench/run.py peers --report peers_bert.jsonl peers_llama.jsonl build_times.jsonl   # this section
    bench/run.py peers --plot peers_bert.jsonl peers_llama.jsonl -o docs/peers.png     # the plot"""


def f(x, fmt="%.3f", none="-"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return fmt % x


def ms(x):
    return pc.fmt_ms(x)


def by_kind(records, kind):
    return [r for r in records if r.get("kind") == kind]


def env_lines(records):
    envs = [r for r in by_kind(records, "env") if not r.get("dry_run")]
    if not envs:
        return ["(no GPU run in these files)"]
    e = envs[0]
    out = ["- GPU: %s (%s SMs, compute capability %s), %s, driver %s (CUDA %s); SM clock max %s, power limit %s" % (
        e.get("gpu") or e.get("gpu_torch"), e.get("sm_count", "?"), e.get("capability", "?"), e.get("gpu_memory", "?"),
        e.get("driver", "?"), e.get("driver_cuda", "?"), e.get("sm_clock_max", "?"), e.get("power_limit", "?")),
        "- Software: %s; Python %s; PyTorch %s (CUDA runtime %s, cuDNN %s); Triton %s" % (
        e.get("os", "?"), e.get("python", "?"), e.get("torch", "?"), e.get("cuda_runtime", "?"), e.get("cudnn", "?"),
        e.get("triton", "?")),
        "- hkc: %s; nvrtc %s; commit %s; GPU machine CPU: %s (%s cores)" % (
        e.get("hkc_version", "?"), e.get("nvrtc", "?"), e.get("commit", "?"), e.get("cpu", "?"), e.get("cpu_count", "?"))]
    for e in envs:
        out.append("- %s, %s: `python3 %s`" % (e.get("spec"), e.get("date_utc"),
                                               " ".join(os.path.relpath(x) if os.path.isabs(x) else x
                                                        for x in e.get("argv", []))))
    return out


def latency_tables(records):
    out = []
    pts = {(p["spec"], p["batch"]): p for p in pc.points(records)}
    lat = {(r["spec"], r["batch"], r["system"]): r for r in by_kind(records, "latency") if not r.get("dry_run")}
    skips = {(r["spec"], r["batch"], r["system"]): r["reason"] for r in by_kind(records, "skip")}
    dtypes = {r.get("spec"): r.get("dtype") for r in by_kind(records, "env")}
    for spec in sorted({k[0] for k in pts}):
        out.append("")
        out.append("**%s** — median ms per call (p10–p90 below each), %s" % (spec, dtypes.get(spec) or "?"))
        out.append("")
        out.append("| batch | " + " | ".join(pc.LABEL[s] for s in pc.SYSTEMS) + " | best peer | hkc / best | bar | verdict |")
        out.append("|---:|" + "---:|" * len(pc.SYSTEMS) + "---|---:|---:|---|")
        for (sp, batch), p in sorted(pts.items()):
            if sp != spec:
                continue
            cells = []
            for s in pc.SYSTEMS:
                r = lat.get((spec, batch, s))
                if r:
                    cells.append("%s<br>%s–%s" % (ms(r["ms"]), ms(r.get("p10")), ms(r.get("p90"))))
                else:
                    cells.append("not measured" if (spec, batch, s) in skips else "-")
            if p["met"] is None:
                verdict = "not measured"
            else:
                verdict = "met" if p["met"] else "**missed**"
                if p["peers_missing"]:
                    verdict += " (without %s)" % ", ".join(pc.LABEL[s] for s in p["peers_missing"])
            out.append("| %d | %s | %s | %s | %g× | %s |" % (
                batch, " | ".join(cells), pc.LABEL.get(p["best_peer"], "-"), f(p["ratio"], "%.2f×"), p["bar"], verdict))
    return out


def numerics(records):
    cmp = [r for r in by_kind(records, "compare") if not r.get("dry_run")]
    if not cmp:
        return []
    out = ["", "| spec | system | max rel. error vs eager (all batches) | rel. error vs float64 (batch) | all within bounds |",
           "|---|---|---:|---:|---|"]
    for spec in sorted({r["spec"] for r in cmp}):
        for s in pc.SYSTEMS:
            rs = [r for r in cmp if r["spec"] == spec and r["system"] == s]
            if not rs:
                continue
            ve = [r["rel"] for r in rs if r["against"] == "eager"]
            vf = [r for r in rs if r["against"] == "float64"]
            out.append("| %s | %s | %s | %s | %s |" % (
                spec, pc.LABEL[s], f(max(ve), "%.2e") if ve else "(reference)",
                ", ".join("%.2e (%d)" % (r["rel"], r["batch"]) for r in vf) or "-",
                "yes" if all(r["ok"] for r in rs) else "**NO**"))
    return out


def compile_table(records):
    builds = by_kind(records, "build")
    lat = [r for r in by_kind(records, "latency") if r.get("compile_s") is not None]
    colds = by_kind(records, "cold_torch")
    specs = sorted({r["spec"] for r in builds if "error" not in r} | {r["spec"] for r in lat} | {r["spec"] for r in colds})
    if not specs:
        return []
    out = ["", "| spec | what | where | time |", "|---|---|---|---:|"]
    for spec in specs:
        for b in [r for r in builds if r["spec"] == spec]:
            if "error" in b:
                out.append("| %s | hkc build %s | %s | failed: %s |" % (spec, b["target"], b["where"], b["error"]))
                continue
            where = "%s, %s cores" % ("CPU machine" if b["where"] == "cpu" else "GPU machine's CPUs", b.get("cores"))
            bar = ""
            if b.get("bar_s"):
                bar = " (bar ≤ %g s: %s)" % (b["bar_s"], "met" if b["met"] else "**missed**")
            out.append("| %s | hkc build, %s, all %d buckets: cold / warm cache | %s | %.2f s / %.2f s%s |" % (
                spec, b["target"], len(b.get("batch_sizes") or []), where, b["cold_s"], b["warm_s"], bar))
        for s in ("compile", "max-autotune"):
            rs = sorted([r for r in lat if r["spec"] == spec and r["system"] == s], key=lambda r: r["batch"])
            if rs:
                out.append("| %s | %s, per batch (first call) | GPU machine | %s; total %.1f s |" % (
                    spec, pc.LABEL[s], ", ".join("%d: %.1f s" % (r["batch"], r["compile_s"]) for r in rs),
                    sum(r["compile_s"] for r in rs)))
        for c in [r for r in colds if r["spec"] == spec]:
            out.append("| %s | torch.compile first call in a fresh process, %s inductor cache (batch %d) | GPU machine "
                       "| %.2f s (+ import torch %.2f s, CUDA context %.2f s) |" % (
                           spec, c["cache"], c["batch"], c["first_call_s"], c["import_s"], c["ctx_s"]))
    return out


def cold_table(records):
    rs = [r for r in by_kind(records, "cold_hkc") if not r.get("dry_run")]
    if not rs:
        return []
    out = ["", "| spec | batch | CUDA context (own) | open → first result | of which upload of params/inputs | "
           "second run | whole process | bar ≤ %g ms beyond the context |" % pc.COLD_START_BAR_MS,
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rs:
        m = r["median"]
        bar = "-" if r.get("bar_ms") is None else ("met" if r["met"] else "**missed**")
        out.append("| %s | %d | %s ms | %s ms | %s ms | %s ms | %s s | %s |" % (
            r["spec"], r["batch"], f(m["ctx_ms"], "%.1f"), f(m["first_result_ms"], "%.2f"), f(m["upload_ms"], "%.2f"),
            f(m["second_run_ms"], "%.3f"), f(m["process_s"], "%.3f"), bar))
        same = {x.get("same_context") for x in r["runs"]}
        if False in same:
            out.append("| %s | | libhkrt made another context current: reported to the lead | | | | | |" % r["spec"])
    out.append("")
    out.append("Median of %s fresh processes of `build-dev/hk_bench_cold PACK --batch N` per spec." %
               "/".join(str(len(r["runs"])) for r in rs))
    return out


def sizes(records):
    out = []
    packs = {}
    for r in by_kind(records, "sizes"):
        if r.get("spec"):
            packs[r["spec"]] = r
    lib = [r for r in by_kind(records, "sizes") if r.get("libhkrt_stripped_bytes")]
    for spec, r in sorted(packs.items()):
        out.append("- %s pack (%s): %d bytes" % (spec, ", ".join(r.get("pack_targets", [])), r["pack_bytes"]))
    for b in by_kind(records, "build"):
        if "error" not in b:
            out.append("- %s pack built for %s alone (%s): %d bytes" % (b["spec"], b["target"], b["where"], b["pack_bytes"]))
    for r in lib[:1]:
        out.append("- libhkrt.so: %d bytes as built, %d stripped (zstd linked in statically)" % (
            r["libhkrt_bytes"], r["libhkrt_stripped_bytes"]))
    if not lib:
        for r in list(packs.values())[:1]:
            if r.get("libhkrt_bytes"):
                out.append("- libhkrt.so: %d bytes as built" % r["libhkrt_bytes"])
    return out


def verdicts(records):
    out = []
    for p in pc.points(records):
        if p["met"] is False:
            out.append("- %s batch %d: hkc %.3f ms against %s %.3f ms = %.2f× (bar %g×): **missed**" % (
                p["spec"], p["batch"], p["hkc_ms"], pc.LABEL[p["best_peer"]], p["best_peer_ms"], p["ratio"], p["bar"]))
        elif p["met"] is None:
            out.append("- %s batch %d: no verdict (hkc or every peer not measured)" % (p["spec"], p["batch"]))
    for r in by_kind(records, "cold_hkc"):
        if r.get("met") is False:
            out.append("- %s cold start: %.1f ms after opening the pack (bar %g ms): **missed**" % (
                r["spec"], r["median"]["first_result_ms"], pc.COLD_START_BAR_MS))
    for b in by_kind(records, "build"):
        if b.get("met") is False:
            out.append("- %s build for %s cold: %.1f s (bar %g s): **missed**" % (b["spec"], b["target"], b["cold_s"], pc.BUILD_BAR_S))
    for r in by_kind(records, "skip"):
        out.append("- not measured: %s batch %s, %s: %s" % (r["spec"], r["batch"], pc.LABEL.get(r["system"], r["system"]),
                                                           r["reason"]))
    for r in by_kind(records, "compare"):
        if not r["ok"]:
            out.append("- **mismatch**: %s batch %d, %s against %s: relative error %.2e%s" % (
                r["spec"], r["batch"], pc.LABEL.get(r["system"], r["system"]), r["against"], r["rel"],
                " (%s)" % r["error"] if r.get("error") else ""))
    return out or ["- every bar met, every figure measured"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--plot", default="peers.png", help="the plot's path relative to the document")
    a = ap.parse_args()
    records = pc.read_jsonl(a.files)
    out = ["### Results (%s)" % (min((r["date_utc"] for r in by_kind(records, "env") if r.get("date_utc")),
                                     default="no date")[:10]), ""]
    out += env_lines(records)
    out += ["", "Commands:", "", COMMANDS, ""]
    out += ["#### Latency", ""]
    out += ["![latency per batch size, one line per system](%s)" % a.plot]
    out += latency_tables(records)
    out += ["", "#### Bars and gaps", ""] + verdicts(records)
    out += ["", "#### Numerics"] + numerics(records)
    out += ["", "#### Build and compile times"] + compile_table(records)
    out += ["", "#### Cold start"] + cold_table(records)
    out += ["", "#### Sizes", ""] + sizes(records)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
