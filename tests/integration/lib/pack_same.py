#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""pack_same.py A B: whether two .hkpack files hold the same pack but for their signatures and
the `merge.` lines of their provenance (hkc merge records its inputs there; docs/CLI.md): the
same header fields that do not depend on the layout, the same sections in the same order, each
of the same kind, flags and target with the same bytes (PROVENANCE compared without the merge
lines). Reads the layout of docs/FORMAT.md on its own, not through hkc. Exit status 0 when
they are the same, 1 naming the first difference."""
import struct
import sys

HEADER, ENTRY = 64, 48
PROVENANCE, SIGNATURE = 11, 14


def read(path):
    data = open(path, "rb").read()
    if len(data) < HEADER or data[:4] != b"\x89HKP":
        sys.exit("%s: not an hkpack" % path)
    fixed = data[8:24]  # version, endian tag, header and entry sizes
    count, = struct.unpack_from("<I", data, 24)
    table, = struct.unpack_from("<Q", data, 40)
    sections = []
    for i in range(count):
        kind, flags, offset, size, raw, _sum, target, _res = struct.unpack_from("<IIQQQQII", data, table + ENTRY * i)
        if kind == SIGNATURE:
            continue
        body = data[offset:offset + size]
        if kind == PROVENANCE:
            body = b"".join(l for l in body.splitlines(keepends=True) if not l.startswith(b"merge."))
            raw = len(body)
        sections.append((kind, flags, target, raw, body))
    return fixed, sections


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: pack_same.py A B")
    (fa, sa), (fb, sb) = read(sys.argv[1]), read(sys.argv[2])
    if fa != fb:
        print("header fields differ")
        return 1
    if len(sa) != len(sb):
        print("%d sections vs %d (signatures left out)" % (len(sa), len(sb)))
        return 1
    for i, (a, b) in enumerate(zip(sa, sb)):
        if a != b:
            print("section %d (kind %d vs %d) differs%s" % (i, a[0], b[0], " (provenance)" if a[0] == PROVENANCE else ""))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
