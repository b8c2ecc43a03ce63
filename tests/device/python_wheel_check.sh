#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hkrt wheel (build/hkrt-*.whl: python/hkrt with libhkrt and libcjson inside) on the GPU
# machine, which has no libcjson of its own: pip-installed into a scratch folder, with no
# HKRT_LIBRARY or LD_LIBRARY_PATH, it runs tests/device/python_run_gpu.py (the wheel's
# libraries loaded; Session.run(**inputs) with torch tensors, f32 and bf16; the real ml_dtypes
# where installed) and tests/device/python_gpu.py (bind, DLPack, profile).
#   bash tests/device/python_wheel_check.sh prepare   # CPU machine: build/ (its wheel) and the packs
#   bash tests/device/python_wheel_check.sh run       # GPU machine (carry build/hkrt-*.whl, build/pycheck)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${HK_GPU_TARGET:-sm_90a}
case ${1:-} in
prepare)
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target hkc python_wheel
  mkdir -p build/pycheck
  for s in op_elementwise op_rows_aligned_bf16; do
    build/hkc build "tests/specs/$s.yaml" -o "build/pycheck/$s.hkpack" --target "host,$target" -q
  done
  ls build/hkrt-*.whl build/pycheck
  ;;
run)
  unset HKRT_LIBRARY HKRT_LIB LD_LIBRARY_PATH
  site=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$site" build/hkrt-*.whl
  echo "libcjson on this machine: $(ldconfig -p | grep -c libcjson) entries (ldconfig -p)"
  rc=0
  packs=(build/pycheck/op_elementwise.hkpack build/pycheck/op_rows_aligned_bf16.hkpack "$target")
  echo "== tests/device/python_run_gpu.py ($target)"
  (cd / && PYTHONPATH=$site python3 "$OLDPWD/tests/device/python_run_gpu.py" "${packs[@]/#build/$OLDPWD/build}") || rc=1
  echo "== tests/device/python_gpu.py ($target)"
  (cd / && PYTHONPATH=$site python3 "$OLDPWD/tests/device/python_gpu.py" "${packs[@]/#build/$OLDPWD/build}") || rc=1
  echo "python_wheel_check: exit $rc"
  exit $rc
  ;;
*) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
