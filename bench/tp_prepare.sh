#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU half of the tensor-parallel benchmark (the GPU half: bench/tp_call.sh, on a machine of 2 or
# more GPUs, build-dev/ carried): the Llama-3-8B config (bench/tp_configs/) imported for
# generation (bf16, 8 slots, 2048 positions) and built for HK_GPU_TARGET (sm_90a) whole and
# split over each of TP_RANKS (default "2 4"), in build-dev/tp/. The split packs come from the
# same spec (`hkc import hf --tensor-parallel`; `hkc build --tensor-parallel N`) and bind the
# same unsplit checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key}
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHKC_BUILD_TESTS=ON >/dev/null
cmake --build build-dev -j"${HK_JOBS:-2}" --target hkc hkrt
bash scripts/carry_libs.sh build-dev
mkdir -p build-dev/tp
cfg=bench/tp_configs/llama-3-8b.json
build-dev/hkc import hf "$cfg" --generate --max-seq 2048 --slots 8 --token-buckets 1,2,4,8,16,32,64,128,256,512,1024 \
  --dtype bf16 --tensor-parallel 2 -o build-dev/tp/llama-3-8b.yaml --weights-map-out build-dev/tp/llama-3-8b.map -q
for n in 0 ${TP_RANKS:-2 4}; do # 0: whole (the shard marks ignored)
  name=llama-3-8b-tp$n
  [ "$n" = 0 ] && name=llama-3-8b
  tp=()
  [ "$n" != 0 ] && tp=(--tensor-parallel "$n")
  if [ "$n" = 0 ]; then # whole: the same spec without `parallel:`
    grep -v '^parallel:' build-dev/tp/llama-3-8b.yaml > build-dev/tp/llama-3-8b-whole.yaml
    build-dev/hkc build build-dev/tp/llama-3-8b-whole.yaml -o "build-dev/tp/$name.hkpack" \
      --target "${HK_GPU_TARGET:-sm_90a}" --tuning-db specs/tuning/h200.db -q
  else
    build-dev/hkc build build-dev/tp/llama-3-8b.yaml "${tp[@]}" -o "build-dev/tp/$name.hkpack" \
      --target "${HK_GPU_TARGET:-sm_90a}" --tuning-db specs/tuning/h200.db -q
  fi
done
ls -la build-dev/tp
