#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s10/call4.sh from the repository root in the session; copied here next to its output)
# Session 10, device call 4: a degree-5 polynomial in hk_act_gelu16 (common.h; 4 FMAs fewer
# per element than the degree-9 one, max relative error 5.7e-5 instead of 1.0e-5) built with
# HKC_TEMPLATE_DIR=/tmp/tpl5 on the CPU machine:
#   1. numerics harness on the gelu specs (op_elementwise, op_fused, bert_layer, fusion_forms;
#      build-dev/packs/ built from those templates), sm_90a and sm_90;
#   2. bert_layer whole graphs, degree 9 (old_) against degree 5 (g5_), interleaved, and
#      the profile of both at batch 32 and 128.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
for t in sm_90a sm_90; do
  HK_GPU_TARGET=$t timeout 150 bash tests/device/run.sh "/tmp/harness_$t" > "$final/harness_$t.log" 2>&1
  echo "harness $t rc $? $(grep -c 'FAIL' "$final/harness_$t.log") FAIL rows; $(tail -n 1 "$final/harness_$t.log")"
done
for b in 128 32 8 1; do
  for round in 1 2 3; do
    for v in old g5; do
      r=$(timeout 30 build-dev/hkc run "build-dev/s10/${v}_bert_layer.hkpack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
      echo "bert_layer b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$final/ab.log"
for b in 128 32; do
  for v in old g5; do
    timeout 40 build-dev/hkc run "build-dev/s10/${v}_bert_layer.hkpack" --batch "$b" --random-params --runs 200 --warmup 20 \
      --profile --repeats 50 > "$final/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'ffn_up' "$final/profile_${v}_b$b.txt" | head -n 1)"
  done
done
