#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Which launch to profile in detail, from an Nsight Compute metrics CSV of a whole run.

    ncu --csv --metrics gpu__time_duration.sum,... PROGRAM > RUN.csv
    python3 bench/lib/ncu_pick.py RUN.csv TAIL SUBSTRING...

For each kernel name that contains one of the SUBSTRINGs and has a launch among the run's last
TAIL launches (0: any), prints "NAME:SKIP", SKIP being the number of earlier launches of that
exact name before its last one (the last decode step's, in a `hkc generate` run), ready for `ncu --kernel-name NAME --launch-skip SKIP --launch-count 1`;
then, on stderr, each one's duration in that run."""
import csv
import sys


def main():
    path, tail, wanted = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    head = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if head is None:
        print("ncu_pick: no metrics table in %s" % path, file=sys.stderr)
        return 1
    launches = {}  # id -> (name, duration ns)
    for row in csv.DictReader(lines[head:]):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            launches[int(row["ID"])] = (row["Kernel Name"], row["Metric Value"].replace(",", ""))
    ids = sorted(launches)
    recent = {launches[i][0] for i in (ids[-tail:] if tail > 0 else ids)}
    count, last = {}, {}
    for i in ids:
        name, ns = launches[i]
        last[name] = (count.get(name, 0), ns)
        count[name] = count.get(name, 0) + 1
    for name, (skip, ns) in last.items():
        if name in recent and any(w in name for w in wanted):
            print("%s:%d" % (name, skip))
            print("  %s: launch %d of %d, %s ns" % (name, skip + 1, count[name], ns), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
