#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s11/call2.sh from the repository root in the session; copied here next to its output)
# Session 11, device call 2: the rope epilogue with per-block column constants (one sin/cos
# per column and row pair). build-dev from `bash bench/peers_prepare.sh` carried, plus
# build-dev/packs/{op_rope_gemm,fusion_forms,llama_small}.hkpack (host,sm_90a):
#   1. the device harness on those packs, then tests/specs/op_rope_gemm.yaml in bf16 and in f16
#      under forced gemm_tma configurations (ping-pong / cooperative, mw 1 / 2, bn 64..256,
#      split-K 2, TMA stores) against PyTorch;
#   2. hkc tune of the rope gemm's launch classes (specs/tuning/llama_qkv_rope.yaml);
#   3. llama_block with rope in the epilogue (tuned) against rope apart (gemm_rope=off),
#      whole graph interleaved (4 rounds), then the per-launch profile of both, every batch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
res=/tmp/s11c2
mkdir -p "$res"
HK_DEVICE_SPECS='^(op_rope_gemm|fusion_forms|llama_small)$' HK_GPU_TARGET=sm_90a timeout 120 \
  bash tests/device/run.sh /tmp/harness > "$res/harness_sm_90a.log" 2>&1
echo "harness rc $? $(grep -c 'FAIL' "$res/harness_sm_90a.log") FAIL rows; $(tail -n 1 "$res/harness_sm_90a.log")"
sed 's/^dtype: bf16/dtype: f16/; s/^name: op_rope_gemm/name: op_rope_gemm_f16/' tests/specs/op_rope_gemm.yaml > /tmp/op_rope_gemm_f16.yaml
for spec in tests/specs/op_rope_gemm.yaml /tmp/op_rope_gemm_f16.yaml; do
  for cfg in pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=1 pp=1,mw=1,bn=256,st=4,sk=1,cm=1,ts=0 pp=0,mw=2,bn=128,st=4,sk=1,cm=1,ts=0 \
             pp=1,mw=2,bn=128,st=6,sk=1,cm=1,ts=0 pp=1,mw=1,bn=64,st=8,sk=1,cm=1,ts=0 pp=0,mw=1,bn=128,st=5,sk=2,cm=1,ts=0 \
             pp=1,mw=1,bn=128,st=7,sk=1,cm=2,ts=0; do
    name=$(basename "$spec" .yaml)
    if ! build-dev/hkc build "$spec" -o /tmp/cfg.hkpack --target host,sm_90a -q --kernel-option "gemm_tma_cfg=$cfg" \
        > "$res/build_cfg.log" 2>&1; then
      echo "$name $cfg: build FAILED: $(head -c 300 "$res/build_cfg.log")"; continue
    fi
    timeout 60 python3 tests/device/check.py build-dev/hkc "$spec" /tmp/cfg.hkpack /tmp/cfgwork --gpu-target sm_90a \
      > "$res/check_${name}_$cfg.log" 2>&1
    echo "$name $cfg: rc $? $(grep -c FAIL "$res/check_${name}_$cfg.log") FAIL rows; $(grep -E 'y1|y2' "$res/check_${name}_$cfg.log" | grep sm_90a | head -n 2 | tr -s ' ' | tr '\n' ' ')"
  done
done
timeout 200 build-dev/hkc tune specs/tuning/llama_qkv_rope.yaml -t sm_90a -o "$res/rope.db" --top 10 \
  --report "$res/rope_tune.md" > "$res/tune.log" 2>&1
echo "tune rc $?"; grep -v "^#" "$res/rope.db"
db2=""; [ -s "$res/rope.db" ] && db2="--tuning-db $res/rope.db"
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_rope.hkpack --target sm_90a $db2 --tuning-db specs/tuning/h200.db -q
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_apart.hkpack --target sm_90a --tuning-db specs/tuning/h200.db -q \
  --kernel-option gemm_rope=off
for b in 1 4 16; do
  for round in 1 2 3 4; do
    for v in rope apart; do
      r=$(timeout 40 build-dev/hkc run "/tmp/ll_$v.hkpack" --batch "$b" --random-params --runs 200 --warmup 20 2>&1 | grep -E "median" | tail -n 1)
      echo "llama b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$res/ab.log"
for b in 1 4 16; do
  for v in rope apart; do
    timeout 60 build-dev/hkc run "/tmp/ll_$v.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
      --profile --repeats 30 > "$res/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'qkv|rope|sum of|bubbles' "$res/profile_${v}_b$b.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done
tar -C /tmp -czf "$final/s11c2.tar.gz" s11c2
