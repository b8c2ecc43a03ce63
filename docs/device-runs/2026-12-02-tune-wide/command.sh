#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s9/call1.sh from the repository root in the session; copied here next to its output)
# Session 9, device call 1 (build-dev carried; build-dev/ab/ holds bert_layer and llama_block
# for sm_90a built with specs/tuning/h200.db by this commit's hkc with the epilogue's L2
# prefetch of residual rows off (old_*) and on (new_*)):
#   1. the prefetch A/B: hkc run --profile of both packs, per batch, interleaved;
#   2. hkc tune of bert_layer and llama_block's GEMM launches for sm_90a with a wider top
#      (the ping-pong candidates the model ranks below 12 get measured; llama's dual GEMM at
#      batch 4 and 16 had no entry).
# Output: $OUT/device-run.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
out=/tmp/device-run
mkdir -p "$out"
start=$(date +%s)
t() { echo "[$(( $(date +%s) - start )) s] $*"; }
finish() { tar -C /tmp -czf "$final/device-run.tar.gz" device-run; t "done"; }
trap finish EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
t "prefetch A/B"
for s in llama_block:16,4,1 bert_layer:128,32,8; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    for round in 1 2; do
      for v in old new; do
        f="$out/ab_${name}_b${b}_${v}_$round.txt"
        timeout 60 build-dev/hkc run "build-dev/ab/${v}_$name.hkpack" --batch "$b" --random-params \
          --runs 200 --warmup 20 --profile --repeats 30 > "$f" 2>&1
        echo "$name b$b $v#$round: $(grep -E 'whole graph \(hk' "$f" | sed 's/.*whole graph/graph/') | $(grep -E 'gemm' "$f" | awk '{printf "%s %s; ", $2, $4}')"
      done
    done
  done
done
t "tune llama_block"
timeout 240 build-dev/hkc tune specs/llama_block.yaml --target sm_90a -o "$out/llama.db" --top 30 --report "$out/tune_llama.md" \
  > "$out/tune_llama.log" 2>&1; echo "tune rc $?"
grep -E "^\| gemm" "$out/tune_llama.md" | cut -c1-220
t "tune bert_layer"
timeout 200 build-dev/hkc tune specs/bert_layer.yaml --target sm_90a -o "$out/bert.db" --top 40 --report "$out/tune_bert.md" \
  > "$out/tune_bert.log" 2>&1; echo "tune rc $?"
grep -E "^\| gemm" "$out/tune_bert.md" | cut -c1-220
