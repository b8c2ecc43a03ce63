#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The host target's GEMMs through OpenBLAS and through the C loops: tests/specs/host_blas.yaml
# (every gemm form, odd shapes) built for the host and run by reference.py (NumPy float64) with
# HK_HOST_BLAS=auto on 1 thread (whole row tiles merged into one sgemm) and on 3 (blocks shared
# out one by one), and with HK_HOST_BLAS=off; then the same spec in f16 and bf16 (f32 copies of
# the operands on the BLAS path) both ways. `hkc run` must name the path it takes; a bad
# HK_HOST_BLAS is refused. Where libopenblas.so.0 is missing, the C loops are checked, `hkc run`
# must say why, and the test exits 77 (skipped).
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
REF=$HK_SOURCE_DIR/tests/integration/reference.py
spec=$HK_SOURCE_DIR/tests/specs/host_blas.yaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

"$HKC" build "$spec" -o "$work/hb.hkpack" --target host -q
have_blas=1
"$PY" -c 'import ctypes; ctypes.CDLL("libopenblas.so.0")' 2> /dev/null || have_blas=0

# gemm_line MODE THREADS: the "host gemm:" line of hkc run
gemm_line() {
  HK_HOST_BLAS=$1 HK_HOST_THREADS=$2 "$HKC" run --allow-unsigned-native "$work/hb.hkpack" --random-params \
    --runs 1 --warmup 0 | grep '^host gemm: ' || true
}

# check MODE THREADS BATCH [DTYPE]: reference.py on the pack (hb, or hb-DTYPE built from the
# spec in DTYPE), every output within the dtype's bounds
check() {
  local pack=$work/hb.hkpack s=$spec dir=$work/$1-$2-$3-${4:-f32}
  if [ -n "${4:-}" ]; then pack=$work/hb-$4.hkpack s=$work/hb-$4.yaml; fi
  if HK_HOST_BLAS=$1 HK_HOST_THREADS=$2 "$PY" "$REF" "$HKC" "$pack" "$s" "$3" "$dir" > "$dir.log" 2>&1
  then
    echo "ok   ${4:-f32} HK_HOST_BLAS=$1 HK_HOST_THREADS=$2 batch $3 matches reference.py"
  else
    sed 's/^/     /' "$dir.log"
    echo "FAIL ${4:-f32} HK_HOST_BLAS=$1 HK_HOST_THREADS=$2 batch $3 against reference.py"
    fail=1
  fi
}
# the 16-bit packs: their kernels differ, hkc's side does not -- not again under the sanitizers
# (HK_SANITIZED=1), whose instrumentation never reaches the kernels
dtypes="f16 bf16"
[ "${HK_SANITIZED:-0}" = 1 ] && dtypes=""
for dt in $dtypes; do
  sed "s/^dtype: f32$/dtype: $dt/" "$spec" > "$work/hb-$dt.yaml"
  "$HKC" build "$work/hb-$dt.yaml" -o "$work/hb-$dt.hkpack" --target host -q
done

line=$(gemm_line off 2)
case "$line" in
  "host gemm: C loops: the session's option host_blas is 1") echo "ok   HK_HOST_BLAS=off: $line" ;;
  *) echo "FAIL HK_HOST_BLAS=off: hkc run says '$line'"; fail=1 ;;
esac
line=$(gemm_line auto 2)
if [ "$have_blas" = 1 ]; then
  case "$line" in
    "host gemm: "*"(libopenblas.so.0)") echo "ok   HK_HOST_BLAS=auto: $line" ;;
    *) echo "FAIL HK_HOST_BLAS=auto: hkc run says '$line' (OpenBLAS is installed)"; fail=1 ;;
  esac
else
  case "$line" in
    "host gemm: C loops: libopenblas.so.0 not found"*) echo "ok   HK_HOST_BLAS=auto without OpenBLAS: $line" ;;
    *) echo "FAIL HK_HOST_BLAS=auto without OpenBLAS: hkc run says '$line'"; fail=1 ;;
  esac
fi
if HK_HOST_BLAS=on "$HKC" run --allow-unsigned-native "$work/hb.hkpack" --random-params --runs 1 \
  > "$work/bad.out" 2>&1; then
  echo "FAIL HK_HOST_BLAS=on was accepted"
  fail=1
elif grep -q "HK_HOST_BLAS is 'on'; expected auto or off" "$work/bad.out"; then
  echo "ok   HK_HOST_BLAS=on is refused"
else
  echo "FAIL HK_HOST_BLAS=on: unexpected message: $(cat "$work/bad.out")"
  fail=1
fi

for b in 1 3; do check off 2 "$b"; done
for dt in $dtypes; do check off 2 3 "$dt"; done
if [ "$have_blas" = 0 ]; then
  [ "$fail" = 0 ] || exit 1
  echo "SKIP the OpenBLAS path: libopenblas.so.0 is not installed (Debian/Ubuntu: libopenblas0-pthread)"
  exit 77
fi
check auto 2 1
check auto 1 3
check auto 3 3
for dt in $dtypes; do check auto 3 3 "$dt"; done
exit "$fail"
