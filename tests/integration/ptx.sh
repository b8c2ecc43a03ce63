#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PTX alongside SASS (docs/FORMAT.md, "PTX"), without a GPU: by default the newest sm_XY of a
# build without an arch-specific suffix stores its kernels' PTX (hkc inspect says so per
# target, provenance records it); --ptx LIST picks others (sm_90a's own PTX included),
# --no-ptx none; a name that is not an NVIDIA target of the build is refused. The stored PTX
# is the virtual architecture's text (.target sm_80 for sm_80). Skips (77) without nvrtc.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
spec=$HK_SOURCE_DIR/tests/specs/arch_tiny.yaml
if "$HKC" targets --no-probe | grep -q "^NVIDIA (sm):   unavailable"; then echo "SKIPPED: nvrtc unavailable"; exit 77; fi
check() { # check DESCRIPTION REGEX FILE [! (must not match)]
  if [ "${4:-}" = "!" ]; then
    if grep -Eq -- "$2" "$3"; then echo "FAIL $1"; cat "$3"; fail=1; else echo "ok   $1"; fi
  elif grep -Eq -- "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1"; cat "$3"; fail=1; fi
}

"$HKC" build "$spec" --target sm_80,sm_86,sm_90a -o "$work/d.hkpack" > "$work/build.txt"
"$HKC" inspect "$work/d.hkpack" > "$work/d.txt"
check "default: the build says which target stores PTX" "^PTX \(compute_86\) of sm_86: 2 kernel" "$work/build.txt"
check "default: sm_86 (the newest without a suffix) has PTX" "^  sm_86 .*; PTX compute_86 " "$work/d.txt"
check "default: sm_80 has none" "^  sm_80 .*; no PTX$" "$work/d.txt"
check "default: sm_90a has none" "^  sm_90a .*; no PTX$" "$work/d.txt"
check "format 1.11 (PTX since 1.3)" "format 1\.11," "$work/d.txt"
check "provenance: sm_86's target line names its PTX" "target\.sm_86=sm_86 built with .*, PTX compute_86$" "$work/d.txt"

"$HKC" build "$spec" --target sm_80,sm_90a --ptx sm_80,sm_90a -o "$work/l.hkpack" > /dev/null
"$HKC" inspect "$work/l.hkpack" > "$work/l.txt"
check "--ptx sm_80,sm_90a: sm_80" "^  sm_80 .*; PTX compute_80 " "$work/l.txt"
check "--ptx sm_80,sm_90a: sm_90a (arch-specific PTX)" "^  sm_90a .*; PTX compute_90a " "$work/l.txt"

"$HKC" build "$spec" --target sm_80,host --no-ptx -o "$work/n.hkpack" > "$work/nbuild.txt"
"$HKC" inspect "$work/n.hkpack" > "$work/n.txt"
check "--no-ptx: none stored" "PTX compute" "$work/n.txt" !
check "--no-ptx: no PTX line" "^PTX" "$work/nbuild.txt" !

set +e
"$HKC" build "$spec" --target sm_80,host --ptx host -o "$work/bad.hkpack" > "$work/bad.txt" 2>&1; rc=$?
set -e
if [ $rc -ne 0 ] && [ ! -e "$work/bad.hkpack" ]; then echo "ok   --ptx host refused (rc $rc)"; else echo "FAIL --ptx host"; fail=1; fi
check "--ptx host: the message" "--ptx host: not an NVIDIA \(sm_\*\) target of this build" "$work/bad.txt"

# The stored text is PTX for the virtual architecture: cut each PTX section's zstd frame out
# (python3) and decompress it (zstd).
if command -v python3 > /dev/null && command -v zstd > /dev/null; then
  python3 - "$work/l.hkpack" "$work" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
count, table = struct.unpack_from("<I", b, 24)[0], struct.unpack_from("<Q", b, 40)[0]
for i in range(count):
    kind, flags, off, size, raw, _, target, _ = struct.unpack_from("<IIQQQQII", b, table + 48 * i)
    if kind == 16:
        open("%s/ptx%d.zst" % (sys.argv[2], target), "wb").write(b[off:off + size])
PY
  for t in 0 1; do zstd -dcq "$work/ptx$t.zst" | tr '\0' '\n' | grep '^\.target' | sed "s/^/$t /"; done > "$work/ptx.txt"
  check "sm_80's PTX says .target sm_80" "^0 \.target sm_80$" "$work/ptx.txt"
  check "sm_90a's PTX says .target sm_90a" "^1 \.target sm_90a$" "$work/ptx.txt"
else
  echo "SKIPPED (PTX text check): python3 or zstd not installed"
fi

# hkc merge: parts built with --merge-targets choose PTX as one build of all would, and the
# merged pack is that build's bytes (the PTX frame kept as it is), but for the signature and
# the merge's provenance lines.
all=host,sm_80,sm_86
for t in host sm_80 sm_86; do "$HKC" build "$spec" --target $t --merge-targets $all -o "$work/part-$t.hkpack" -q; done
"$HKC" build "$spec" --target $all -o "$work/all.hkpack" -q
"$HKC" merge "$work/part-host.hkpack" "$work/part-sm_80.hkpack" "$work/part-sm_86.hkpack" -o "$work/m.hkpack" > /dev/null
# (but for the signature and the merge's own provenance lines: lib/pack_same.py)
if /usr/bin/python3 "$HK_SOURCE_DIR/tests/integration/lib/pack_same.py" "$work/m.hkpack" "$work/all.hkpack"; then
  echo "ok   merge of parts with PTX == one build"; else
  echo "FAIL merge of parts with PTX differs from one build"; fail=1; fi

# hkc run says which code it chose (here, with no GPU: the host's code object).
"$HKC" run "$work/n.hkpack" --target host-$(uname -m) --allow-unsigned-native --random-params --runs 1 --warmup 0 > "$work/run.txt" 2>&1
check "hkc run names the code" "^code: code object of target host-" "$work/run.txt"
exit $fail
