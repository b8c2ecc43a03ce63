#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s11/call1.sh from the repository root in the session; copied here next to its output)
# Session 11, device call 1: rope in the q|k|v projection's epilogue (gemm_tma, sm_90a).
# build-dev from `bash bench/peers_prepare.sh` carried, plus build-dev/packs/{op_rope_gemm,
# fusion_forms,llama_small}.hkpack built for host,sm_90a:
#   1. the device harness on those packs (sm_90a; the rope gemm against PyTorch);
#   2. hkc tune of the rope gemm's launch classes (specs/tuning/llama_qkv_rope.yaml);
#   3. llama_block with rope in the epilogue (tuned) against rope apart (gemm_rope=off),
#      whole graph interleaved, then the per-launch profile of both, every batch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
HK_DEVICE_SPECS='^(op_rope_gemm|fusion_forms|llama_small)$' HK_GPU_TARGET=sm_90a timeout 120 \
  bash tests/device/run.sh /tmp/harness > "$final/harness_sm_90a.log" 2>&1
echo "harness rc $? $(grep -c 'FAIL' "$final/harness_sm_90a.log") FAIL rows; $(tail -n 1 "$final/harness_sm_90a.log")"
timeout 240 build-dev/hkc tune specs/tuning/llama_qkv_rope.yaml -t sm_90a -o "$final/rope.db" --top 10 \
  --report "$final/rope_tune.md" > "$final/tune.log" 2>&1
echo "tune rc $?"; cat "$final/rope.db" | grep -v "^#"
db=specs/tuning/h200.db
[ -s "$final/rope.db" ] && db2="--tuning-db $final/rope.db" || db2=""
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_rope.hkpack --target sm_90a $db2 --tuning-db "$db" -q
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_apart.hkpack --target sm_90a --tuning-db "$db" -q \
  --kernel-option gemm_rope=off
build-dev/hkc inspect /tmp/ll_rope.hkpack | grep -E "rope|fusion" | head -8
for b in 1 4 16; do
  for round in 1 2 3; do
    for v in rope apart; do
      r=$(timeout 40 build-dev/hkc run "/tmp/ll_$v.hkpack" --batch "$b" --random-params --runs 200 --warmup 20 2>&1 | grep -E "median" | tail -n 1)
      echo "llama b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$final/ab.log"
for b in 1 4 16; do
  for v in rope apart; do
    timeout 60 build-dev/hkc run "/tmp/ll_$v.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
      --profile --repeats 30 > "$final/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'qkv|rope|sum of|bubbles' "$final/profile_${v}_b$b.txt" | tr '\n' ' ')"
  done
done
