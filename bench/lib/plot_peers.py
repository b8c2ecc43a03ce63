#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The peers plot for docs/BENCHMARKS.md: median latency per batch size, one line per
system, one panel per spec (log-log axes), from bench/lib/peers.py's JSON lines. A dry run's
figures (CPU host target) are left out. Needs matplotlib (a documentation step, not a test).

usage: plot_peers.py FILE.jsonl [FILE.jsonl ...] [-o docs/peers.png]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402

STYLE = {"eager": ("#7f7f7f", "o", "--"), "cudagraph": ("#1f77b4", "s", "--"), "compile": ("#ff7f0e", "^", "--"),
         "max-autotune": ("#d62728", "v", "--"), "hkc": ("#2ca02c", "D", "-")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--out", default="docs/peers.png")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = pc.read_jsonl(a.files)
    lat = [r for r in records if r.get("kind") == "latency" and not r.get("dry_run")]
    if not lat:
        print("plot_peers.py: no GPU latency records in %s" % ", ".join(a.files))
        return 1
    env = next((r for r in records if r.get("kind") == "env" and not r.get("dry_run")), {})
    specs = sorted({r["spec"] for r in lat})
    fig, axes = plt.subplots(1, len(specs), figsize=(6.2 * len(specs), 4.6), squeeze=False)
    for ax, spec in zip(axes[0], specs):
        batches = sorted({r["batch"] for r in lat if r["spec"] == spec})
        for s in pc.SYSTEMS:
            # one point per batch: a later file's figure replaces an earlier one (as in the report)
            pts = sorted({r["batch"]: r["ms"] for r in lat if r["spec"] == spec and r["system"] == s}.items())
            if not pts:
                continue
            color, marker, ls = STYLE[s]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, color=color, marker=marker,
                    linewidth=2.2 if s == "hkc" else 1.4, label=pc.LABEL[s])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(batches)
        ax.set_xticklabels([str(b) for b in batches])
        ax.set_xlabel("batch size")
        ax.set_ylabel("median latency per call (ms)")
        ax.set_title(spec)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    title = "hkc vs PyTorch, bf16"
    if env:
        title += " — %s, driver %s, torch %s, triton %s" % (env.get("gpu") or env.get("gpu_torch", "?"),
                                                           env.get("driver", "?"), env.get("torch", "?"),
                                                           env.get("triton", "?"))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
