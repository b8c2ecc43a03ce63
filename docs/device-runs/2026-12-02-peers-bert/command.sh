#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s12/call4.sh from the repository root in the session; copied here next to its output)
# Session 12, device call 4: bert_layer peers at the session's final commit (the default plan:
# the layernorm epilogue is built but the planner's clock keeps BERT's layernorms apart, so the
# pack's kernels are the earlier run's); build-dev from `bash bench/peers_prepare.sh` carried:
#   1. bert_layer peers, every system (bench/peers_device.sh, no device-side build timing, no
#      torch cold-start processes);
#   2. the per-launch profile and bubbles of every batch of the bert_layer pack.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=420 bash bench/peers_device.sh bert --no-torch-cold
rc=$?
prof=/tmp/profiles_s12
mkdir -p "$prof"
for b in 1 8 32 128; do
  timeout 40 build-dev/hkc run build-dev/peers/bert_layer.hkpack --target sm_90a --batch "$b" --random-params \
    --runs 200 --warmup 20 --profile --repeats 50 > "$prof/profile_bert_layer_b$b.txt" 2>&1
  echo "bert b$b profile rc $? $(grep -E 'sum of launches|bubbles' "$prof/profile_bert_layer_b$b.txt" | tr '\n' ' ')"
done
tar -C /tmp -czf "$final/profiles_s12_bert.tar.gz" profiles_s12
exit $rc
