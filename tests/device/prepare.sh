#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of the device harness: a release build with static libyaml/zstd
# (vendor libraries are dlopen'ed, so it runs on the GPU machine's newer glibc), and a
# pack for every spec for host + sm_90 + sm_90a (HK_GPU_TARGETS) (nvrtc is installed here; no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHKC_BUILD_TESTS=ON >/dev/null
cmake --build build-dev -j"$(nproc)" --target hkc hkrt hk_example hk_bench_launch
bash scripts/carry_libs.sh build-dev # what the GPU machine lacks (libcjson)
mkdir -p build-dev/packs
for spec in specs/*.yaml tests/specs/*.yaml; do
  name=$(basename "$spec" .yaml)
  build-dev/hkc build "$spec" -o "build-dev/packs/$name.hkpack" --target "host,${HK_GPU_TARGETS:-sm_90,sm_90a}" -q \
    ${HK_BUILD_FLAGS---tuning-db specs/tuning/h200.db} # HK_BUILD_FLAGS="--tune default": untuned kernels
done
mkdir -p build-dev/bench
bash bench/lib/chain.sh 200 build-dev/bench/chain200.yaml
build-dev/hkc build build-dev/bench/chain200.yaml -o build-dev/bench/chain200.hkpack --target "${HK_GPU_TARGET:-sm_90}" -q
ls -la build-dev/packs build-dev/bench
