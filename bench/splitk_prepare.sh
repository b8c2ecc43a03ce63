#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of bench/splitk_device.sh: a release build in build-dev/ (hkc and libhkrt,
# static libyaml/zstd as tests/device/prepare.sh makes it, so it runs on the GPU machine), then
# the split-K / stream-K packs (bench/splitk.py prepare: sm_80, sm_90 and sm_90a numerics
# cases, sm_90 and sm_90a timing cases; every pack checked to hold the configuration it asked
# for, none spilling; all built with --kernel-option gemm_split=on, the opt-in these kernels
# need until this run proves them). Arguments go to bench/splitk.py prepare (--only REGEX).
# Then: run bench/splitk_device.sh on the H200 with build-dev carried.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHK_BUILD_TESTS=ON >/dev/null
cmake --build build-dev -j"$(nproc)" --target hkc hkrt >/dev/null
bash scripts/carry_libs.sh build-dev # what the GPU machine lacks (libcjson)
python3 bench/splitk.py prepare "$@"
du -sh build-dev
