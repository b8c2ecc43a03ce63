#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The hottest instructions of one kernel in an Nsight Compute report, by warp stall samples.

    ncu --section SourceCounters --section WarpStateStats ... --export REPORT PROGRAM
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SOURCE.csv
    python3 bench/lib/ncu_hot.py SOURCE.csv [N]

Prints the N (default 30) SASS lines with the most stall samples (all samples), each with its
share of the kernel's samples and the not-issued samples, then the total. The CSV's columns are
found by name (they vary across ncu versions): a "Source" column and "Warp Stall Sampling"
columns."""
import csv
import sys


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    head = next((i for i, l in enumerate(lines) if "Source" in l and "Sampling" in l), None)
    if head is None:
        print("ncu_hot: no source table with stall samples in %s" % path)
        return 1
    rows = list(csv.DictReader(lines[head:]))
    cols = rows[0].keys() if rows else []
    src = next(c for c in cols if c.strip('"') == "Source")
    addr = next((c for c in cols if c.startswith("Address")), None)
    alls = next((c for c in cols if "Sampling" in c and "All" in c), None)
    notis = next((c for c in cols if "Sampling" in c and "Not" in c), None)
    if alls is None:
        print("ncu_hot: no 'Warp Stall Sampling (All Samples)' column: %s" % ", ".join(cols))
        return 1

    def num(r, c):
        try:
            return float((r.get(c) or "0").replace(",", ""))
        except ValueError:
            return 0.0

    total = sum(num(r, alls) for r in rows) or 1.0
    hot = sorted(rows, key=lambda r: -num(r, alls))[:top]
    for r in hot:
        print("%6.1f%% %6d %6d  %s  %s" % (100 * num(r, alls) / total, num(r, alls), num(r, notis) if notis else 0,
                                        (r.get(addr) or "") if addr else "", r[src].strip()[:110]))
    print("total samples %d over %d instructions" % (total, len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
