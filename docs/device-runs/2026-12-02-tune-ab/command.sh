#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s9/call4.sh from the repository root in the session; copied here next to its output)
# Session 9, device call 4: whole-graph A/B of the tuning database before (olddb_*) and after
# (newdb_*) call 1's re-measured entries, bert_layer and llama_block for sm_90a, interleaved.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for s in bert_layer:128,32,8,1 llama_block:1,4; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    for round in 1 2 3; do
      for v in olddb newdb; do
        r=$(timeout 30 build-dev/hkc run "build-dev/s9/${v}_$name.hkpack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
        echo "$name b$b $v#$round: $r"
      done
    done
  done
done
