#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stress check for AMD compiles in worker processes (docs/DESIGN.md, "Compile workers"):
# N cold builds (--no-cache) of a multi-kernel spec for gfx90a,gfx1030 at -j2 and N at -j8,
# each pack compared byte for byte with the -j1 build; then N runs of `hkc targets`, each
# output compared with the first. Before the workers, ROCm 5.2's hiprtc crashed or
# produced different code in such loops.
#
#   bench/run.py amd-workers [HKC [N [SPEC]]]   (= bash bench/lib/amd_workers_stress.sh [HKC] [N] [SPEC])
#     HKC   the hkc binary (default build/hkc), N runs per kind (default 50),
#     SPEC  default specs/bert_layer.yaml (7 kernels x 4 batch buckets)
# Prints one line per failure and a closing 'N passed, M failed' line; exit 1 on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
hkc=${1:-build/hkc}
n=${2:-50}
spec=${3:-specs/bert_layer.yaml}
targets=gfx90a,gfx1030
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

build() { # jobs out -> exit status; stderr kept in $out.err
  "$hkc" build "$spec" --target "$targets" -j "$1" --no-cache -q -o "$2" 2>"$2.err" >/dev/null
}

if ! build 1 "$work/ref.hkpack"; then
  echo "the -j1 reference build failed:"; cat "$work/ref.hkpack.err"; exit 1
fi
echo "reference: $spec for $targets at -j1, $(stat -c %s "$work/ref.hkpack") bytes"

for jobs in 2 8; do
  t0=$(date +%s.%N)
  for i in $(seq 1 "$n"); do
    out="$work/j$jobs.hkpack"
    rm -f "$out"
    build "$jobs" "$out"
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "FAIL -j$jobs run $i: hkc build exited $rc: $(tail -n 3 "$out.err" | tr '\n' ' ')"
      failed=$((failed + 1))
    elif ! cmp -s "$out" "$work/ref.hkpack"; then
      echo "FAIL -j$jobs run $i: the pack differs from the -j1 build"
      failed=$((failed + 1))
    else
      passed=$((passed + 1))
    fi
  done
  t1=$(date +%s.%N)
  echo "-j$jobs: $n cold builds in $(echo "$t1 - $t0" | bc) s"
done

"$hkc" targets >"$work/targets.ref" 2>&1 || { echo "the first hkc targets failed"; cat "$work/targets.ref"; exit 1; }
for i in $(seq 1 "$n"); do
  "$hkc" targets >"$work/targets.out" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL hkc targets run $i: exit $rc: $(tail -n 2 "$work/targets.out" | tr '\n' ' ')"
    failed=$((failed + 1))
  elif ! cmp -s "$work/targets.out" "$work/targets.ref"; then
    echo "FAIL hkc targets run $i: output differs from the first run"
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done
echo "hkc targets: $n runs"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
