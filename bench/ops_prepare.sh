#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of the op benchmark: writes one spec per benchmark case into
# build-dev/bench/ops/ and builds its pack for the GPU target (default sm_90a: wgmma;
# HK_GPU_TARGET=sm_90 for the mma.sync kernels). Then, on the GPU machine:
#   python3 bench/ops.py            (all cases)      python3 bench/ops.py 'gemm_*'
set -euo pipefail
cd "$(dirname "$0")/.."
target=${HK_GPU_TARGET:-sm_90a}
dir=${HK_OPS_DIR:-build-dev/bench/ops}   # several directories = several tunings, one device call
only=${HK_OPS_ONLY:-.}                   # regex: build only the matching cases
mkdir -p "$dir"
rm -f "$dir"/*.yaml "$dir"/*.hkpack
head() { printf 'hkc: 1\nname: %s\ndtype: %s\nbatch_sizes: [1]\n' "$1" "$2"; }

gemm() { # name dtype M N K [epilogue]
  local name=$1 dt=$2 m=$3 n=$4 k=$5 epi=${6:-}
  { head "$name" "$dt"
    if [ -n "$epi" ]; then
      echo "inputs: {x: [$m, $k], r: [$m, $n]}"; echo "params: {w: [$k, $n], b: [$n]}"
      echo "graph:"; echo "  - {name: g, op: gemm, in: [x, w], bias: b, act: gelu, residual: r, out: y}"
    else
      echo "inputs: {x: [$m, $k]}"; echo "params: {w: [$k, $n]}"
      echo "graph:"; echo "  - {name: g, op: gemm, in: [x, w], out: y}"
    fi
    echo "outputs: [y]"; } > "$dir/$name.yaml"
}
for dt in bf16 f16; do
  gemm gemm_${dt}_4096x4096x4096 $dt 4096 4096 4096
  gemm gemm_${dt}_8192x8192x8192 $dt 8192 8192 8192
done
gemm gemm_bf16_4096x4096x4096_epi bf16 4096 4096 4096 epi
for nk in "768 768" "2304 768" "3072 768" "768 3072" "4096 4096" "14336 4096" "4096 14336"; do
  set -- $nk
  gemm gemm_bf16_4096x${1}x${2} bf16 4096 "$1" "$2"
done

rows() { # name dtype op rows cols
  local name=$1 dt=$2 op=$3 r=$4 c=$5
  { head "$name" "$dt"; echo "inputs: {x: [$r, $c]}"
    case $op in
      layernorm) echo "params: {g: [$c], b: [$c]}"; echo "graph:"; echo "  - {name: n, op: layernorm, in: [x], gamma: g, beta: b, out: y}" ;;
      rmsnorm) echo "params: {g: [$c]}"; echo "graph:"; echo "  - {name: n, op: rmsnorm, in: [x], gamma: g, out: y}" ;;
      softmax|gelu|silu|relu) echo "graph:"; echo "  - {name: n, op: $op, in: [x], out: y}" ;;
      add) echo "params: {z: [$r, $c]}"; echo "graph:"; echo "  - {name: n, op: add, in: [x, z], out: y}" ;;
    esac
    echo "outputs: [y]"; } > "$dir/$name.yaml"
}
for op in layernorm rmsnorm softmax add gelu; do
  rows mem_${op}_bf16_16384x4096 bf16 $op 16384 4096
done
rows mem_layernorm_f32_16384x4096 f32 layernorm 16384 4096

attn() { # name dtype S dh causal
  local name=$1 dt=$2 s=$3 dh=$4 causal=$5
  { head "$name" "$dt"
    echo "inputs: {q: [8, $s, 16*$dh], k: [8, $s, 16*$dh], v: [8, $s, 16*$dh]}"
    echo "graph:"; echo "  - {name: a, op: attention, in: [q, k, v], heads: 16, causal: $causal, out: y}"
    echo "outputs: [y]"; } > "$dir/$name.yaml"
}
for s in 1024 4096; do for dh in 64 128; do for c in false true; do
  attn attn_bf16_b8h16_s${s}_d${dh}_$([ $c = true ] && echo causal || echo full) bf16 $s $dh $c
done; done; done
attn attn_f16_b8h16_s4096_d128_full f16 4096 128 false

for spec in "$dir"/*.yaml; do
  if ! basename "$spec" .yaml | grep -Eq "$only"; then rm -f "$spec"; continue; fi
  # tuning: the H200's measured choices, the model's elsewhere (HK_BUILD_FLAGS="--tune default": the fixed defaults)
  build-dev/hkc build "$spec" -o "${spec%.yaml}.hkpack" --target "$target" -q ${HK_BUILD_FLAGS---tuning-db specs/tuning/h200.db}
done
ls "$dir" | wc -l
