#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU half of the generation check and benchmark (the GPU half is bench/gen_device.py):
# build-dev/ as tests/device/prepare.sh configures it (static libyaml and zstd, vendor
# libraries dlopen'ed), then for each config in bench/gen_configs/ a generation spec
# (`hkc import hf --generate`), its weights name map and a pack for HK_GPU_TARGET (sm_90a)
# in build-dev/gen/, and for Llama-3.2-1B a second pack built with the kernel options GEN_ALT_OPTIONS
# (default "gemm_skinny=off": the tensor-core gemms at the few-row buckets too; space-separated
# NAME=VALUE) for an A/B in the same call (llama-3.2-1b-alt.hkpack), the decode-attention splits
# of GEN_KV_CFGS (below), and two with int8 weights (below).
# Knobs: GEN_MAX_SEQ (4224: context 4096 + the decoded tokens), GEN_SLOTS (32), HK_JOBS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key} # packs built on one machine run on the other: both trust this key (docs/CLI.md, "Signing")
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHKC_BUILD_TESTS=ON >/dev/null
cmake --build build-dev -j"${HK_JOBS:-2}" --target hkc hkrt
bash scripts/carry_libs.sh build-dev
mkdir -p build-dev/gen
for cfg in bench/gen_configs/*.json; do
  name=$(basename "$cfg" .json)
  max_seq=${GEN_MAX_SEQ:-4224}
  [ "$name" = tinyllama-1.1b ] && max_seq=2048 # its max_position_embeddings
  build-dev/hkc import hf "$cfg" --generate --max-seq "$max_seq" --slots "${GEN_SLOTS:-32}" \
    --token-buckets 1,2,4,8,16,32,64,128,256,512,1024 --dtype bf16 \
    -o "build-dev/gen/$name.yaml" --weights-map-out "build-dev/gen/$name.map" -q
  build-dev/hkc build "build-dev/gen/$name.yaml" -o "build-dev/gen/$name.hkpack" --target "${HK_GPU_TARGET:-sm_90a}" \
    --tuning-db specs/tuning/h200.db -q
done
alt=()
for o in ${GEN_ALT_OPTIONS:-gemm_skinny=off}; do alt+=(--kernel-option "$o"); done
build-dev/hkc build build-dev/gen/llama-3.2-1b.yaml -o build-dev/gen/llama-3.2-1b-alt.hkpack \
  --target "${HK_GPU_TARGET:-sm_90a}" --tuning-db specs/tuning/h200.db "${alt[@]}" -q
echo "${GEN_ALT_OPTIONS:-gemm_skinny=off}" > build-dev/gen/alt-options.txt
# GEN_KV_CFGS (space-separated kv_warp_cfg values): Llama-3.2-1B packs with the folded append and
# each forced decode-attention split, sw-f-<cfg>.hkpack (',' and '=' as '_' and '-'), for
# bench/gen_sweep.sh's SWEEP
for c in ${GEN_KV_CFGS:-}; do
  build-dev/hkc build build-dev/gen/llama-3.2-1b.yaml -o "build-dev/gen/sw-f-$(echo "$c" | tr ',=' '_-').hkpack" \
    --target "${HK_GPU_TARGET:-sm_90a}" --tuning-db specs/tuning/h200.db --kernel-option kv_fold=on \
    --kernel-option "kv_warp_cfg=$c" -q
done
cp build-dev/gen/llama-3.2-1b.map build-dev/gen/llama-3.2-1b-alt.map
rm -f build-dev/gen/llama-3.2-1b-base.*
# 8-bit weights (int8, per output channel, the LM head too), 8 slots: the LM head's gemm has a row
# per slot, and gemm_skinny reads 8-bit B for at most 8 rows. llama-3.2-1b-q8 reads the 8-bit
# weights in its decode steps' gemms (gemm_quant=on), llama-3.2-1b-q8-unfolded through dequant
# launches (gemm_quant=off: the same numbers in another order, the check of the folded kernels);
# llama-3.2-1b-s8-fast is the bf16 pack of the same 8 slots to time them against.
qflags=(--generate --max-seq "${GEN_MAX_SEQ:-4224}" --slots 8 --token-buckets 1,2,4,8,16,32,64,128,256,512,1024 --dtype bf16)
build-dev/hkc import hf bench/gen_configs/llama-3.2-1b.json "${qflags[@]}" --quantize int8 \
  -o build-dev/gen/llama-3.2-1b-q8.yaml --weights-map-out build-dev/gen/llama-3.2-1b-q8.map -q
build-dev/hkc import hf bench/gen_configs/llama-3.2-1b.json "${qflags[@]}" \
  -o build-dev/gen/llama-3.2-1b-s8.yaml --weights-map-out build-dev/gen/llama-3.2-1b-s8.map -q
for name in llama-3.2-1b-q8 llama-3.2-1b-q8-unfolded llama-3.2-1b-s8-fast; do
  spec=build-dev/gen/llama-3.2-1b-q8.yaml fold=on
  [ "$name" = llama-3.2-1b-q8-unfolded ] && fold=off
  [ "$name" = llama-3.2-1b-s8-fast ] && spec=build-dev/gen/llama-3.2-1b-s8.yaml
  build-dev/hkc build "$spec" -o "build-dev/gen/$name.hkpack" --target "${HK_GPU_TARGET:-sm_90a}" \
    --tuning-db specs/tuning/h200.db --kernel-option kv_warp=on --kernel-option kv_mma=on \
    --kernel-option gemm_quant=$fold -q
done
# Tensor parallelism over one rank (collectives that copy: NCCL with a communicator of one GPU,
# inside the captured graph): the tiny Llama of the CI test (bf16) whole and split, and
# Llama-3.2-1B split, to time against its whole pack (bench/gen_call.sh, GEN_T_TP).
tiny=tests/integration/gen_configs/llama.json
tflags=(--generate --max-seq 64 --slots 4 --token-buckets 1,4,16,64 --dtype bf16)
build-dev/hkc import hf "$tiny" "${tflags[@]}" -o build-dev/gen/tiny.yaml --weights-map-out build-dev/gen/tiny.map -q
build-dev/hkc import hf "$tiny" "${tflags[@]}" --tensor-parallel 1 -o build-dev/gen/tiny-tp1.yaml -q
build-dev/hkc import hf bench/gen_configs/llama-3.2-1b.json --generate --max-seq "${GEN_MAX_SEQ:-4224}" \
  --slots "${GEN_SLOTS:-32}" --token-buckets 1,2,4,8,16,32,64,128,256,512,1024 --dtype bf16 --tensor-parallel 1 \
  -o build-dev/gen/llama-3.2-1b-tp1.yaml -q
for name in tiny tiny-tp1 llama-3.2-1b-tp1; do
  build-dev/hkc build "build-dev/gen/$name.yaml" -o "build-dev/gen/$name.hkpack" --target "${HK_GPU_TARGET:-sm_90a}" \
    --tuning-db specs/tuning/h200.db -q
done
git rev-parse HEAD > build-dev/gen/commit.txt
ls -la build-dev/gen
