#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s11/call4.sh from the repository root in the session; copied here next to its output)
# Session 11, device call 4: rmsnorm folded into the gemm that reads it (gemm_tma, sm_90a), transformed by the consumers.
# build-dev from `bash bench/peers_prepare.sh` carried, plus build-dev/packs/{op_norm_gemm,
# op_rope_gemm,fusion_forms,llama_small}.hkpack (host,sm_90a) and build-dev/s11/rope.db (call 2's
# tuning of the rope gemm):
#   1. the device harness on those packs, then tests/specs/op_norm_gemm.yaml in bf16 and f16
#      under forced gemm_tma configurations (rows per transform thread 1, 2, 4; ping-pong,
#      cooperative, multicast pairs, TMA stores) against PyTorch;
#   2. hkc tune of the folded gemms' launch classes (specs/tuning/llama_fused.yaml);
#   3. llama_block: norms and rope folded (auto) / rope only (gemm_norm=off) / neither
#      (gemm_norm=off, gemm_rope=off), whole graph interleaved (3 rounds), then the per-launch
#      profile of each, every batch; tuned (2., call 2's rope.db, specs/tuning/h200.db).
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
res=/tmp/s11c4
mkdir -p "$res"
HK_DEVICE_SPECS='^(op_norm_gemm|op_rope_gemm|fusion_forms|llama_small)$' HK_GPU_TARGET=sm_90a timeout 150 \
  bash tests/device/run.sh /tmp/harness > "$res/harness_sm_90a.log" 2>&1
echo "harness rc $? $(grep -c 'FAIL' "$res/harness_sm_90a.log") FAIL rows; $(tail -n 1 "$res/harness_sm_90a.log")"
sed 's/^dtype: bf16/dtype: f16/; s/^name: op_norm_gemm/name: op_norm_gemm_f16/' tests/specs/op_norm_gemm.yaml > /tmp/op_norm_gemm_f16.yaml
for spec in tests/specs/op_norm_gemm.yaml /tmp/op_norm_gemm_f16.yaml; do
  for cfg in pp=0,mw=1,bn=128,st=3,sk=1,cm=1,ts=1 pp=1,mw=1,bn=128,st=5,sk=1,cm=1,ts=0 pp=0,mw=2,bn=64,st=4,sk=1,cm=1,ts=0 \
             pp=1,mw=2,bn=64,st=5,sk=1,cm=1,ts=0 pp=1,mw=1,bn=64,st=8,sk=1,cm=1,ts=0; do
    name=$(basename "$spec" .yaml)
    if ! build-dev/hkc build "$spec" -o /tmp/cfg.hkpack --target host,sm_90a -q --kernel-option "gemm_tma_cfg=$cfg" \
        > "$res/build_cfg.log" 2>&1; then
      echo "$name $cfg: build FAILED: $(head -c 300 "$res/build_cfg.log")"; continue
    fi
    timeout 60 python3 tests/device/check.py build-dev/hkc "$spec" /tmp/cfg.hkpack /tmp/cfgwork --gpu-target sm_90a \
      > "$res/check_${name}_$cfg.log" 2>&1
    echo "$name $cfg: rc $? $(grep -c FAIL "$res/check_${name}_$cfg.log") FAIL rows"
  done
done
timeout 240 build-dev/hkc tune specs/tuning/llama_fused.yaml -t sm_90a -o "$res/fused.db" --top 8 \
  --report "$res/fused_tune.md" > "$res/tune.log" 2>&1
echo "tune rc $?"; grep -v "^#" "$res/fused.db"
db="--tuning-db build-dev/s11/rope.db --tuning-db specs/tuning/h200.db"
[ -s "$res/fused.db" ] && db="--tuning-db $res/fused.db $db"
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_fold.hkpack --target sm_90a $db -q
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_rope.hkpack --target sm_90a $db -q --kernel-option gemm_norm=off
build-dev/hkc build specs/llama_block.yaml -o /tmp/ll_apart.hkpack --target sm_90a $db -q --kernel-option gemm_norm=off \
  --kernel-option gemm_rope=off
build-dev/hkc inspect /tmp/ll_fold.hkpack | grep -E "nrm|fusion" | head -6
for b in 1 4 16; do
  for round in 1 2 3; do
    for v in fold rope apart; do
      r=$(timeout 40 build-dev/hkc run "/tmp/ll_$v.hkpack" --batch "$b" --random-params --runs 200 --warmup 20 2>&1 | grep -E "median" | tail -n 1)
      echo "llama b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$res/ab.log" | sed 's/target sm_90a, //; s/over 200 runs (20 warm-up)//'
for b in 1 4 16; do
  for v in fold apart; do
    timeout 60 build-dev/hkc run "/tmp/ll_$v.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
      --profile --repeats 30 > "$res/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'nrm|sum of|bubbles' "$res/profile_${v}_b$b.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done
tar -C /tmp -czf "$final/s11c4.tar.gz" s11c4
