#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of bench/fusion.py: bert_layer and llama_block built twice for the GPU
# target (default sm_90a), `--fusion auto` and `--fusion none`, into build-dev/fusion/
# (run tests/device/prepare.sh first: it builds build-dev/hkc). Extra hkc build flags
# (e.g. --tuning-db specs/tuning/h200.db) come from HKC_BUILD_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${HK_GPU_TARGET:-sm_90a}
mkdir -p build-dev/fusion
for name in bert_layer llama_block; do
  for mode in auto none; do
    # shellcheck disable=SC2086
    build-dev/hkc build "specs/$name.yaml" -o "build-dev/fusion/${name}_$mode.hkpack" --target "$target" \
      --fusion "$mode" -q ${HKC_BUILD_FLAGS:-}
  done
  cp "specs/$name.yaml" "build-dev/fusion/$name.yaml"
done
ls -la build-dev/fusion
