#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares two .hkpack files section by section (loader/include/hk/pack_format.h):
prints each section kind whose stored bytes differ, and the provenance lines that differ.
Exit 0 when every section except those named with --ignore (kind numbers; 11 = PROVENANCE)
is byte-identical, else 1. Usage: pack_diff.py A.hkpack B.hkpack [--ignore 11]"""
import struct, sys, difflib

def sections(path):
    data = open(path, "rb").read()
    (magic, vmaj, vmin, endian, hsize, esize, count, _r, fsize, toff, _tc, _hc) = struct.unpack_from("<8sHHIIIIIQQQQ", data, 0)
    out = []
    for i in range(count):
        kind, flags, off, size, raw, csum, target, _ = struct.unpack_from("<IIQQQQII", data, toff + i * esize)
        out.append((kind, target, data[off:off + size]))
    return out

def main():
    args = [a for a in sys.argv[1:] if a != "--ignore"]
    ignore = {11} if "--ignore" in sys.argv else set()
    a, b = sections(args[0]), sections(args[1])
    bad = 0
    if [(k, t) for k, t, _ in a] != [(k, t) for k, t, _ in b]:
        print("section tables differ"); return 1
    for (k, t, da), (_, _, db) in zip(a, b):
        if da == db: continue
        print(f"section kind {k} (target {t if t != 0xffffffff else '-'}) differs: {len(da)} vs {len(db)} bytes")
        if k == 11:
            for l in difflib.unified_diff(da.decode().splitlines(), db.decode().splitlines(), lineterm="", n=0):
                if not l.startswith(("---", "+++", "@@")): print("  " + l)
        if k not in ignore: bad = 1
    return bad

sys.exit(main())
