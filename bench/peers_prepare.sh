#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of the peers benchmark (issue 8; the GPU half is bench/peers_device.sh):
#   1. build-dev/ as tests/device/prepare.sh configures it (Release, static libyaml and
#      zstd, vendor libraries dlopen'ed): hkc, libhkrt.so, hk_bench_cold;
#   2. one pack per spec for the GPU target (default sm_90a: the wgmma kernels, fastest on
#      the H200), every batch bucket, into build-dev/peers/NAME.hkpack, with the spec it was
#      built from beside it (build-dev/peers/NAME.yaml: the device run reads that copy, so
#      pack and spec cannot drift apart) and the commit in build-dev/peers/commit.txt;
#   3. with PEERS_BUILD_TIMES=1, bench/build_times.sh on this machine (cold/warm build
#      times for sm_90 and sm_90a, pack and libhkrt sizes) into build-dev/peers/.
# Then carry build-dev/ to the GPU machine. Knobs: HK_GPU_TARGET (sm_90a), PEERS_SPECS
# (default: specs/bert_layer.yaml specs/llama_block.yaml, those present), HK_JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${HK_GPU_TARGET:-sm_90a}
specs=${PEERS_SPECS:-specs/bert_layer.yaml specs/llama_block.yaml}
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHKC_BUILD_TESTS=ON >/dev/null
cmake --build build-dev -j"${HK_JOBS:-2}" --target hkc hkrt hk_bench_cold
bash scripts/carry_libs.sh build-dev # what the GPU machine lacks (libcjson)
mkdir -p build-dev/peers
built="" failed=0
for spec in $specs; do
  if [ ! -f "$spec" ]; then echo "peers_prepare: $spec does not exist (yet): no pack for it"; continue; fi
  name=$(basename "$spec" .yaml)
  rm -f "build-dev/peers/$name.hkpack" "build-dev/peers/$name.yaml"
  # the measured kernel choices (specs/tuning/h200.db; PEERS_TUNING_DB= for the model's)
  db=${PEERS_TUNING_DB-specs/tuning/h200.db}
  if ! build-dev/hkc build "$spec" -o "build-dev/peers/$name.hkpack" --target "$target" ${db:+--tuning-db "$db"}; then
    echo "peers_prepare: FAILED to build $spec for $target (the other specs go on)"
    failed=1
    continue
  fi
  cp "$spec" "build-dev/peers/$name.yaml"
  built="$built $spec"
done
{ git rev-parse HEAD 2>/dev/null || echo unknown; } | tr -d '\n' > build-dev/peers/commit.txt
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then echo -n "+dirty" >> build-dev/peers/commit.txt; fi
if [ "${PEERS_BUILD_TIMES:-0}" = 1 ] && [ -n "$built" ]; then
  rm -f build-dev/peers/build_times.jsonl
  bash bench/build_times.sh --specs "$built" --out build-dev/peers/build_times.jsonl
fi
ls -la build-dev/peers
du -sh build-dev | sed 's/$/  (build-dev, carried to the GPU machine; the limit is 64 MiB with the tree)/'
exit $failed
