#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s12/call6.sh from the repository root in the session; copied here next to its output)
# Session 12, device call 6: the rmsnorm form of the norm epilogue (a pre-norm layer's o_proj +
# residual + ffn norm: the gemm stores the residual stream h and rmsnorm(h)); build-dev from
# `bash bench/peers_prepare.sh` carried:
#   1. numerics against PyTorch: tests/specs/op_ln_gemm.yaml (now with two rmsnorm epilogues
#      that keep their input, and a layernorm that does) in bf16 and f16 with gemm_ln=on; its
#      narrower copy under mw 2, bn 64;
#   2. llama_block's graph at Qwen2.5-0.5B's sizes (hidden 896 = 7 x 128: rows a cluster of 7
#      holds; 14 heads of 64, 2 kv heads, ffn 4864), gemm_ln=on against the default plan: numerics,
#      whole graph interleaved (2 rounds), per-launch profiles, every batch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
res=/tmp/s12c6
mkdir -p "$res"
sed 's/^dtype: bf16/dtype: f16/; s/^name: op_ln_gemm/name: op_ln_gemm_f16/' tests/specs/op_ln_gemm.yaml > /tmp/op_ln_gemm_f16.yaml
sed 's/n1: 768, n2: 320/n1: 256, n2: 512/; s/^name: op_ln_gemm/name: op_ln_gemm_narrow/' tests/specs/op_ln_gemm.yaml \
  > /tmp/op_ln_gemm_narrow.yaml
sed 's/^dims: .*/dims: {seq: 512, hidden: 896, heads: 14, kv_heads: 2, head_dim: 64, ffn: 4864}/; s/^name: llama_block/name: qwen_block/' \
  specs/llama_block.yaml > /tmp/qwen_block.yaml
check() { # name spec options...
  local name=$1 spec=$2; shift 2
  if ! build-dev/hkc build "$spec" -o "/tmp/$name.hkpack" --target host,sm_90a -q "$@" > "$res/build_$name.log" 2>&1; then
    echo "$name: build FAILED: $(head -c 400 "$res/build_$name.log")"; return
  fi
  build-dev/hkc inspect "/tmp/$name.hkpack" | grep -oE "hk_gemm_[a-z0-9_]*_(ln|rms)[0-9]+[a-z0-9_]*" | sort -u | tr '\n' ' ' > "$res/norm_kernels_$name.txt"
  timeout 150 python3 tests/device/check.py build-dev/hkc "$spec" "/tmp/$name.hkpack" "/tmp/w_$name" --gpu-target sm_90a \
    > "$res/check_$name.log" 2>&1
  echo "$name: rc $? $(grep -c FAIL "$res/check_$name.log") FAIL rows; norm epilogue kernels: $(cat "$res/norm_kernels_$name.txt")"
}
check op_ln_gemm tests/specs/op_ln_gemm.yaml --kernel-option gemm_ln=on
check op_ln_gemm_f16 /tmp/op_ln_gemm_f16.yaml --kernel-option gemm_ln=on
check narrow_mw2 /tmp/op_ln_gemm_narrow.yaml --kernel-option gemm_ln=on --kernel-option gemm_tma_cfg=pp=0,mw=2,bn=64,st=4,sk=1,cm=1,ts=0
check qwen_ln /tmp/qwen_block.yaml --kernel-option gemm_ln=on --tuning-db specs/tuning/h200.db
build-dev/hkc build /tmp/qwen_block.yaml -o /tmp/q_ln.hkpack --target sm_90a -q --kernel-option gemm_ln=on --tuning-db specs/tuning/h200.db
build-dev/hkc build /tmp/qwen_block.yaml -o /tmp/q_def.hkpack --target sm_90a -q --tuning-db specs/tuning/h200.db --fusion-report \
  2> "$res/qwen_fusion_report.txt"
for b in 1 4 16; do
  for round in 1 2; do
    for v in ln def; do
      r=$(timeout 40 build-dev/hkc run "/tmp/q_$v.hkpack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
      echo "qwen b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$res/ab.log" | sed 's/target sm_90a, //; s/over 300 runs (30 warm-up)//'
for b in 1 4 16; do
  for v in ln def; do
    timeout 60 build-dev/hkc run "/tmp/q_$v.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
      --profile --repeats 30 > "$res/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'o_proj|ffn_norm|sum of|bubbles' "$res/profile_${v}_b$b.txt" | tr -s ' ' | tr '\n' ' ' | cut -c1-500)"
  done
done
tar -C /tmp -czf "$final/s12c6.tar.gz" s12c6
