#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of bench/gemm_final_device.sh: build-dev/ and the harness packs
# (tests/device/prepare.sh), the GEMM bars' packs (bench/gemm_bars.py prepare, the tuning
# database; `@old` = gemm_tma=off for comparison), sm_90a-only packs of the specs with a
# SwiGLU (build-dev/dual/: fusion makes it a dual gemm there), and the peers' packs
# (build-dev/peers/, sm_90a, tuning database).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/device/prepare.sh > /dev/null
python3 bench/gemm_bars.py prepare
for y in build-dev/bench/gemm/big_*.yaml build-dev/bench/gemm/small_*.yaml build-dev/bench/gemm/epi_*.yaml; do
  build-dev/hkc build "$y" --target sm_90a -q --tuning-db specs/tuning/h200.db --kernel-option gemm_tma=off \
    -o "${y%.yaml}@old.hkpack"
done
mkdir -p build-dev/dual build-dev/peers
for s in specs/llama_block.yaml tests/specs/fusion_forms.yaml; do
  build-dev/hkc build "$s" --target sm_90a -q --tuning-db specs/tuning/h200.db -o "build-dev/dual/$(basename "$s" .yaml).hkpack"
done
for s in bert_layer llama_block; do
  build-dev/hkc build "specs/$s.yaml" --target sm_90a -q --tuning-db specs/tuning/h200.db -o "build-dev/peers/$s.hkpack"
  cp "specs/$s.yaml" "build-dev/peers/$s.yaml"
done
cmake --build build-dev -j"$(nproc)" --target hk_bench_cold > /dev/null
bash scripts/carry_libs.sh build-dev # what the GPU machine lacks (libcjson)
du -sh build-dev
