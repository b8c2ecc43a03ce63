#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernel-level device check and benchmark of the attention_mma variant against torch SDPA.
#   CPU machine (after a build in build/):  bash bench/attention_mma/gen.sh
#   GPU machine:                            python3 bench/attention_mma/run.py
# gen.sh writes bench/attention_mma/gen/k_<warps>_<bkv>_<minb>_t<dtype 1=f16 2=bf16>_d<dh>.cu:
# the hkc-generated sm_90 source of each tile configuration (HKC_ATTN_TUNE) plus a small
# host launcher; run.py compiles them with nvcc, checks numerics against a float64
# reference (odd seq, GQA, causal, cross, packed qkv, column offsets) and prints TFLOP/s
# next to SDPA for batch 8, 16 heads, seq 1024/4096, dh 64/128, causal and not.
# CHECK_PREFIX (default k_8_64_1) picks the configs whose numerics are checked, CHECK_ALL=1 all.
set -euo pipefail
cd "$(dirname "$0")"
root=../..
mkdir -p gen
cc -O1 -o gen/dump dump.c -I$root/compiler -I$root/loader/include $root/build/libhkc_core.a -lyaml -lzstd -lm -ldl -lpthread
for cfg in 8,64,1 8,64,2 4,64,1 4,64,2; do
  for dt in 1 2; do
    for d in 64 128; do
      [ "$cfg" = 8,64,2 ] && [ $d = 128 ] && continue # spills (128-register cap)
      n=gen/k_${cfg//,/_}_t${dt}_d$d.cu
      HKC_ATTN_TUNE=$cfg gen/dump sm_90 $dt $d >$n
      cat wrapper.cu.inc >>$n
    done
  done
done
ls gen
