#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The host target's AVX2 variants: tests/specs/llama_small.yaml (rmsnorm folded into the qkv,
# gate/up and rope gemms, causal grouped-query attention, SwiGLU, residuals; ops_test checks
# every gemm epilogue's variant) built for the host with the variants (the default on x86-64) and
# with HKC_HOST_VARIANTS=baseline; `hkc inspect` lists "isa baseline, avx2" and "isa baseline";
# `hkc run` says "host isa: avx2" on a CPU with AVX2 and FMA (else "baseline") and "baseline" for
# the baseline pack; reference.py checks both packs' outputs, which must be the same bits (the
# variants change the instruction set, not the arithmetic), with OpenBLAS and with the C loops.
# Not x86-64: exits 77 (skipped).
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
REF=$HK_SOURCE_DIR/tests/integration/reference.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
if [ "$(uname -m)" != x86_64 ]; then
  echo "SKIP the AVX2 variants: they are built on x86-64 only (this is $(uname -m))"
  exit 77
fi
cpu_isa=baseline
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && cpu_isa=avx2

for s in llama_small; do
  spec=$HK_SOURCE_DIR/tests/specs/$s.yaml
  sed 's/^targets:.*/targets: [host]/' "$spec" > "$work/$s.yaml"
  env -u HKC_HOST_VARIANTS "$HKC" build "$work/$s.yaml" -o "$work/$s-var.hkpack" --target host -q
  HKC_HOST_VARIANTS=baseline "$HKC" build "$work/$s.yaml" -o "$work/$s-base.hkpack" --target host -q
  for v in var base; do
    want="isa baseline, avx2"
    [ "$v" = base ] && want="isa baseline"
    report=$("$HKC" inspect "$work/$s-$v.hkpack")
    if grep -q "; $want\$" <<< "$report"; then
      echo "ok   $s ($v): hkc inspect lists $want"
    else
      echo "FAIL $s ($v): hkc inspect does not list '$want':"
      grep -A3 '^targets:' <<< "$report"
      fail=1
    fi
    want=$cpu_isa
    [ "$v" = base ] && want=baseline
    got=$("$HKC" run --allow-unsigned-native "$work/$s-$v.hkpack" --random-params --runs 1 --warmup 0 |
      sed -n 's/^host isa: //p')
    if [ "$got" = "$want" ]; then
      echo "ok   $s ($v): hkc run runs the $got code"
    else
      echo "FAIL $s ($v): hkc run says host isa '$got', expected '$want'"
      fail=1
    fi
  done
  b=$(grep -o '^batch_sizes: \[[0-9, ]*\]' "$spec" | grep -o '[0-9]*' | tail -1)
  for blas in auto off; do
    for v in var base; do
      if ! HK_HOST_BLAS=$blas HK_HOST_THREADS=2 "$PY" "$REF" "$HKC" "$work/$s-$v.hkpack" "$work/$s.yaml" "$b" \
        "$work/out-$s-$v-$blas" > "$work/$s-$v-$blas.log" 2>&1; then
        sed 's/^/     /' "$work/$s-$v-$blas.log"
        echo "FAIL $s ($v, HK_HOST_BLAS=$blas) against reference.py"
        fail=1
      fi
    done
    n=0 same=0
    for f in "$work/out-$s-var-$blas/out/"*.npy; do
      [ -e "$f" ] || continue
      n=$((n + 1))
      if cmp -s "$f" "$work/out-$s-base-$blas/out/$(basename "$f")"; then
        same=$((same + 1))
      else
        echo "FAIL $s HK_HOST_BLAS=$blas: output $(basename "$f" .npy) differs between the avx2 and the baseline code"
        fail=1
      fi
    done
    if [ "$n" -eq 0 ]; then
      echo "FAIL $s HK_HOST_BLAS=$blas: no outputs saved"
      fail=1
    elif [ "$same" -eq "$n" ]; then
      echo "ok   $s HK_HOST_BLAS=$blas: $n outputs within bounds, the same bits from both codes"
    fi
  done
done
exit "$fail"
