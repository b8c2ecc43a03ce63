#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU half of `bench/run.py attention --mma-tiles`: a kernel-level check and benchmark of the
# attention_mma variant's tile configurations against torch SDPA, outside hkc's runtime.
#   bash bench/lib/attention_mma/gen.sh DUMP OUTDIR    (DUMP: the hk_attn_dump program, CMake target)
# writes OUTDIR/k_<warps>_<bkv>_<minb>_t<dtype 1=f16 2=bf16>_d<dh>.cu: the hkc-generated sm_90 source
# of each tile configuration (HKC_ATTN_TUNE) plus a small host launcher (wrapper.cu.inc); the GPU
# half (run.py OUTDIR) compiles them with nvcc, checks numerics against a float64 reference (odd
# seq, GQA, causal, cross, packed qkv, column offsets) and prints TFLOP/s next to SDPA for batch 8,
# 16 heads, seq 1024/4096, dh 64/128, causal and not.
set -euo pipefail
dump=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for cfg in 8,64,1 8,64,2 4,64,1 4,64,2; do
  for dt in 1 2; do
    for d in 64 128; do
      [ "$cfg" = 8,64,2 ] && [ $d = 128 ] && continue # spills (128-register cap)
      n=$out/k_${cfg//,/_}_t${dt}_d$d.cu
      HKC_ATTN_TUNE=$cfg "$dump" sm_90 $dt $d >"$n"
      cat "$here/wrapper.cu.inc" >>"$n"
    done
  done
done
ls "$out"
