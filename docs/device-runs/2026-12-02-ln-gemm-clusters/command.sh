#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s12/call2.sh from the repository root in the session; copied here next to its output)
# Session 12, device call 2: the layernorm epilogue launched as one cluster per row tile (call 1's
# persistent grid of clusters of 6 ran at half speed) and bn 192 (clusters of 4) by default.
# build-dev from `bash bench/peers_prepare.sh` carried:
#   1. numerics against PyTorch: op_ln_gemm (bf16, f16) and bert_layer with gemm_ln=on;
#   2. hkc tune of the layernorm gemms' launch classes (specs/tuning/bert_ln.yaml, gemm_ln=on);
#   3. bert_layer: gemm_ln=on (tuned) against the default plan, whole graph interleaved (3
#      rounds), then the per-launch profile of each, every batch;
#   4. ncu of bert's ffn up + gelu at batch 128 (16384 x 3072 x 768) in two schedules:
#      cooperative 128 x 256 (the tuned one) and ping-pong 64 x 256.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
res=/tmp/s12c2
mkdir -p "$res"
sed 's/^dtype: bf16/dtype: f16/; s/^name: op_ln_gemm/name: op_ln_gemm_f16/' tests/specs/op_ln_gemm.yaml > /tmp/op_ln_gemm_f16.yaml
check() { # name spec options...
  local name=$1 spec=$2; shift 2
  if ! build-dev/hkc build "$spec" -o "/tmp/$name.hkpack" --target host,sm_90a -q --kernel-option gemm_ln=on "$@" \
      > "$res/build_$name.log" 2>&1; then
    echo "$name: build FAILED: $(head -c 400 "$res/build_$name.log")"; return
  fi
  build-dev/hkc inspect "/tmp/$name.hkpack" | grep -E "_ln[0-9]" | grep -o "cfg=[^ ]*" | sort | uniq -c | tr '\n' ' ' > "$res/ln_cfgs_$name.txt"
  timeout 120 python3 tests/device/check.py build-dev/hkc "$spec" "/tmp/$name.hkpack" "/tmp/w_$name" --gpu-target sm_90a \
    > "$res/check_$name.log" 2>&1
  echo "$name: rc $? $(grep -c FAIL "$res/check_$name.log") FAIL rows; ln configurations: $(cat "$res/ln_cfgs_$name.txt")"
}
check op_ln_gemm tests/specs/op_ln_gemm.yaml
check op_ln_gemm_f16 /tmp/op_ln_gemm_f16.yaml
check bert_layer_ln specs/bert_layer.yaml --tuning-db specs/tuning/h200.db
check bert_layer_ln128 specs/bert_layer.yaml --kernel-option gemm_tma_cfg=pp=0,mw=1,bn=128,st=5,sk=1,cm=1,ts=0
timeout 150 build-dev/hkc tune specs/tuning/bert_ln.yaml -t sm_90a -o "$res/ln.db" --top 12 --kernel-option gemm_ln=on \
  --report "$res/ln_tune.md" > "$res/tune.log" 2>&1
echo "tune rc $?"; grep -v "^#" "$res/ln.db"
db="--tuning-db specs/tuning/h200.db"
[ -s "$res/ln.db" ] && db="--tuning-db $res/ln.db $db"
build-dev/hkc build specs/bert_layer.yaml -o /tmp/b_ln.hkpack --target sm_90a $db -q --kernel-option gemm_ln=on
build-dev/hkc build specs/bert_layer.yaml -o /tmp/b_def.hkpack --target sm_90a --tuning-db specs/tuning/h200.db -q
for b in 1 8 32 128; do
  for round in 1 2 3; do
    for v in ln def; do
      r=$(timeout 40 build-dev/hkc run "/tmp/b_$v.hkpack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
      echo "bert b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$res/ab.log" | sed 's/target sm_90a, //; s/over 300 runs (30 warm-up)//'
for b in 1 8 32 128; do
  for v in ln def; do
    timeout 60 build-dev/hkc run "/tmp/b_$v.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
      --profile --repeats 30 > "$res/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'ln|sum of|bubbles' "$res/profile_${v}_b$b.txt" | tr -s ' ' | tr '\n' ' ' | cut -c1-500)"
  done
done
for cfg in pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=1 pp=1,mw=1,bn=256,st=5,sk=1,cm=1,ts=0; do
  build-dev/hkc build docs/device-runs/2026-12-02-ln-gemm-clusters/bert_gemms.yaml -o /tmp/g.hkpack --target sm_90a -q --kernel-option "gemm_tma_cfg=$cfg"
  timeout 150 ncu --clock-control none -k regex:gelu -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    build-dev/hkc run /tmp/g.hkpack --batch 128 --random-params --runs 1 --warmup 0 > "$res/ncu_gelu_$cfg.txt" 2>&1
  echo "ncu $cfg rc $?: $(grep -E 'Duration|Issue Slots Busy|Compute \(SM\) Throughput|Executed Ipc Active' "$res/ncu_gelu_$cfg.txt" | tr -s ' ' | tr '\n' ' ')"
done
tar -C /tmp -czf "$final/s12c2.tar.gz" s12c2
