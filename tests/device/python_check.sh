#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hkrt Python package on the H200: tests/device/python_gpu.py (torch tensors bound
# through __cuda_array_interface__ and DLPack, runs on torch's stream, profile, launch
# modes) and the benchmarks that now drive libhkrt through it (gemm_bars, attn_bars: one
# small case each, numerics against float64 and timing against torch in the same run).
#   bash tests/device/python_check.sh prepare    # CPU machine: build-dev/ and the packs
#   bash tests/device/python_check.sh run        # GPU machine (build-dev carried)
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${HK_GPU_TARGET:-sm_90a}
gemm_only='^(small_bf16_128x768x768|swiglu_bf16_77x776x1000|odd_bf16_77x776x1000_nt)$'
attn_only='^(odd_s77_d64_full|gqa_s77_d128_causal|bar_s1024_d64_causal_f16)$'
case ${1:-} in
prepare)
  cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHKC_BUILD_TESTS=ON >/dev/null
  cmake --build build-dev -j"$(nproc)" --target hkc hkrt
  bash scripts/carry_libs.sh build-dev
  mkdir -p build-dev/pycheck
  for s in op_elementwise op_rows_aligned_bf16; do
    build-dev/hkc build "tests/specs/$s.yaml" -o "build-dev/pycheck/$s.hkpack" --target "host,$target" -q
  done
  python3 bench/lib/gemm_bars.py prepare --only "$gemm_only"
  python3 bench/lib/attn_bars.py prepare --only "$attn_only"
  ;;
run)
  export LD_LIBRARY_PATH=$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export HKRT_LIBRARY=$PWD/build-dev/libhkrt.so HKRT_LIB=$PWD/build-dev/libhkrt.so
  rc=0
  echo "== tests/device/python_gpu.py ($target)"
  PYTHONPATH=python python3 tests/device/python_gpu.py build-dev/pycheck/op_elementwise.hkpack \
    build-dev/pycheck/op_rows_aligned_bf16.hkpack "$target" || rc=1
  echo "== bench/lib/gemm_bars.py run --only $gemm_only"
  python3 bench/lib/gemm_bars.py run --only "$gemm_only" --reps 10 || rc=1
  echo "== bench/lib/attn_bars.py numerics + timing --only $attn_only"
  python3 bench/lib/attn_bars.py numerics --only "$attn_only" || rc=1
  python3 bench/lib/attn_bars.py timing --only "$attn_only" --reps 10 || rc=1
  echo "python_check: exit $rc"
  exit $rc
  ;;
*) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
