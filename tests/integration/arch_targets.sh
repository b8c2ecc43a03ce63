#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `hkc targets` and `hkc build` agree: every name `hkc targets` prints as buildable (AMD and
# NVIDIA "builds:" lines) is accepted by `hkc build --target` and built into one pack of a
# small spec (tests/specs/arch_tiny.yaml), with registers reported per kernel; a pinned
# feature variant (gfx90a:xnack-, gfx906:sramecc+) builds too; a name the toolchain builds
# but hkc has no target table row for is refused with a message naming what hkc knows.
# The matrix paths per arch: mma.sync kernels on sm_80+ (Blackwell included), no wgmma off
# sm_90a, the simple kernels on sm_75. Exits 77 (ctest: skipped) with no GPU toolchain.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
spec=$HK_SOURCE_DIR/tests/specs/arch_tiny.yaml

"$HKC" targets > "$work/targets.txt"
names=$(awk '/^(AMD \(gfx\)|NVIDIA \(sm\)):/ {vendor=1} /^ +builds:/ && vendor {sub(/^ +builds:/, ""); print}' \
  "$work/targets.txt" | tr ' ' '\n' | grep -v '^$' || true)
if [ -z "$names" ]; then echo "SKIPPED: no GPU toolchain builds anything here"; exit 77; fi
echo "buildable: $(echo $names | tr '\n' ' ')"

# Feature variants: pinned features of ISAs that have them, when listed.
extra=""
echo "$names" | grep -qx gfx90a && extra="$extra gfx90a:xnack-"
echo "$names" | grep -qx gfx906 && extra="$extra gfx906:sramecc+"
list=$(echo $names | tr ' ' ',')
if "$HKC" build "$spec" --target "$list" -o "$work/all.hkpack" > "$work/build.txt" 2>&1; then
  echo "ok   hkc build --target <every buildable name>"
else
  echo "FAIL hkc build --target $list"; cat "$work/build.txt"; fail=1
fi
if [ $fail -eq 0 ]; then
  "$HKC" inspect "$work/all.hkpack" > "$work/inspect.txt"
  for t in $names; do
    # each target: its kernel table, two kernels, each with a register count
    rows=$(awk -v t="kernels for $t:" '$0 == t {on=1; next} /^kernels for|^  graph/ {on=0} on && /kernel=|src=/' \
      "$work/inspect.txt")
    n=$(printf '%s\n' "$rows" | grep -c . || true)
    zero=$(printf '%s\n' "$rows" | awk '$2 == 0' | grep -c . || true)
    if [ "$n" -ne 2 ] || [ "$zero" -ne 0 ]; then
      echo "FAIL $t: $n kernel row(s), $zero without registers"; printf '%s\n' "$rows"; fail=1
    fi
    case $t in
      sm_75) want="kernel=simple"; avoid="gemm_mma|wgmma|tma" ;;
      sm_90a) want="kernel=gemm_tma"; avoid="" ;;
      sm_*) want="kernel=gemm_mma"; avoid="wgmma|tma" ;;
      *) want=""; avoid="" ;;
    esac
    if [ -n "$want" ] && ! printf '%s\n' "$rows" | grep -Eq "$want"; then
      echo "FAIL $t: no kernel matching $want"; printf '%s\n' "$rows"; fail=1
    fi
    if [ -n "$avoid" ] && printf '%s\n' "$rows" | grep -Eq "$avoid"; then
      echo "FAIL $t: a kernel matching $avoid"; printf '%s\n' "$rows"; fail=1
    fi
  done
  [ $fail -eq 0 ] && echo "ok   every target in the pack, 2 kernels each with registers, matrix paths as expected"
fi

# The feature variants, in a pack of their own (a pack holds one gfx90a).
if [ -n "$extra" ]; then
  flist=$(echo $extra | tr ' ' ',')
  if "$HKC" build "$spec" --target "$flist" -o "$work/feat.hkpack" > "$work/build.txt" 2>&1 &&
     "$HKC" inspect "$work/feat.hkpack" | grep -Eq "xnack-|sramecc\+"; then
    echo "ok   hkc build --target $flist"
  else
    echo "FAIL hkc build --target $flist"; cat "$work/build.txt"; fail=1
  fi
fi

# A name the toolchain builds without a target table row: refused, naming what hkc knows.
norow=$(sed -n 's/^ *[a-z]* builds, hkc has no target table row: *//p' "$work/targets.txt" | head -1 | cut -d' ' -f1)
if [ -n "$norow" ]; then
  set +e; "$HKC" build "$spec" --target "$norow" -o "$work/norow.hkpack" > "$work/out" 2>&1; rc=$?; set -e
  if [ $rc -ne 0 ] && grep -q "unknown target $norow (hkc knows:" "$work/out" && [ ! -e "$work/norow.hkpack" ]; then
    echo "ok   $norow (no table row) refused: $(head -1 "$work/out" | cut -c1-120)"
  else
    echo "FAIL $norow (no table row): rc=$rc"; cat "$work/out"; fail=1
  fi
fi
exit $fail
