#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU side: generated sm_90 sources and launch dims for bench/lib/rows/bench.py (GPU side).
# usage: bash bench/lib/rows/gen.sh TOOL OUTDIR   (TOOL: build-dev/hk_rows_tool; bench/run.py rows --prepare)
set -euo pipefail
tool=$1; out=$2; mkdir -p "$out"
shapes_rows="16384x4096 37x8 37x264 37x4096 37x12288 5x40960 5x20480 1x8 64x1024"
shapes_ew="67108864 4096x16384 1000x264 8x264"
echo "[" > "$out/cases.json"; first=1
emit() { if [ $first = 0 ]; then echo "," >> "$out/cases.json"; fi; first=0; echo "$1" >> "$out/cases.json"; }
for d in bf16 f16 f32; do
  for op in layernorm rmsnorm softmax; do
    for al in 8 1; do
      name=k_${op}_${d}_a$al
      "$tool" src sm_90 $op $d $al $name > "$out/$name.cu"
      for s in $shapes_rows; do r=${s%x*}; c=${s#*x}
        [ $al = 1 ] && [ $s != 16384x4096 ] && continue
        dims=$("$tool" dims sm_90 $op $d $al $r $c)
        emit "{\"kernel\":\"$name\",\"op\":\"$op\",\"dtype\":\"$d\",\"align\":$al,\"rows\":$r,\"cols\":$c,\"dims\":\"$dims\"}"
      done
    done
  done
  for op in add mul relu gelu silu; do
    for al in 8 1; do
      name=k_${op}_${d}_a$al
      "$tool" src sm_90 $op $d $al $name > "$out/$name.cu"
      for s in $shapes_ew; do
        if [[ $s == *x* ]]; then n=$(( ${s%x*} * ${s#*x} )); nb=${s#*x}; else n=$s; nb=$s; fi
        [ $al = 1 ] && [ $s != 67108864 ] && continue
        if [ $op = add ] || [ $op = mul ]; then dims=$("$tool" dims sm_90 $op $d $al $n $n $nb); else dims=$("$tool" dims sm_90 $op $d $al $n); [ $nb != $n ] && continue; fi
        emit "{\"kernel\":\"$name\",\"op\":\"$op\",\"dtype\":\"$d\",\"align\":$al,\"n\":$n,\"nb\":$nb,\"dims\":\"$dims\"}"
      done
    done
  done
done
echo "]" >> "$out/cases.json"
