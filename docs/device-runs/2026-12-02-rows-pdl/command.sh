#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s10/call2.sh from the repository root in the session; copied here next to its output)
# Session 10, device call 2 (build-dev carried: hkc and libhkrt at the session's commit,
# build-dev/packs/ for the harness specs below, build-dev/s10/{old,new}_*.hkpack):
#   1. the numerics harness on the kernels that now start with hk_pdl_enter (row kernels,
#      element-wise kernels, rope) and the layers that use them, sm_90a and sm_90;
#   2. whole graphs, packs built before (old_: row, element-wise and rope launches not
#      marked pdl) and after (new_), `hkc run --runs 300` medians, rounds interleaved;
#   3. the new packs' per-launch profiles and bubbles at every batch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
specs='^(op_rows_aligned|op_rows_aligned_bf16|op_norms|op_elementwise|op_fused|op_rope|op_rope_bf16|op_rope_shapes|bert_layer|llama_small|fusion_forms)$'
for t in sm_90a sm_90; do
  HK_DEVICE_SPECS=$specs HK_GPU_TARGET=$t timeout 200 bash tests/device/run.sh "/tmp/harness_$t" > "$final/harness_$t.log" 2>&1
  echo "harness $t rc $? $(grep -c ' ok' "$final/harness_$t.log") ok rows, $(grep -c 'FAIL' "$final/harness_$t.log") FAIL rows; $(tail -n 1 "$final/harness_$t.log")"
done
for s in bert_layer:1,8,32,128 llama_block:1,4,16; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    for round in 1 2 3; do
      for v in old new; do
        r=$(timeout 30 build-dev/hkc run "build-dev/s10/${v}_$name.hkpack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
        echo "$name b$b $v#$round: $r"
      done
    done
  done
done 2>&1 | tee "$final/ab.log"
prof=/tmp/profiles_s10
mkdir -p "$prof"
for s in bert_layer:1,8,32,128 llama_block:1,4,16; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    timeout 40 build-dev/hkc run "build-dev/s10/new_$name.hkpack" --target sm_90a --batch "$b" --random-params \
      --runs 200 --warmup 20 --profile --repeats 50 > "$prof/profile_${name}_b$b.txt" 2>&1
    echo "$name b$b profile rc $? $(grep -E 'sum of launches|bubbles' "$prof/profile_${name}_b$b.txt" | tr '\n' ' ')"
  done
done
tar -C /tmp -czf "$final/profiles_s10.tar.gz" profiles_s10
