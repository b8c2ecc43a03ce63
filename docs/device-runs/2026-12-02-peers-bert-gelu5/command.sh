#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s10/call5.sh from the repository root in the session; copied here next to its output)
# Session 10, device call 5: call 3 again (bert_layer peers, every system, and the profiles) at the
# session's final kernels (the degree-5 gelu of templates/gpu/common.h); build-dev from
# `bash bench/peers_prepare.sh` carried:
#   1. bert_layer peers, every system (bench/peers_device.sh, no device-side build timing, no
#      torch cold-start processes);
#   2. the per-launch profile and bubbles of every batch of the bert_layer pack (llama_block has
#      no gelu: call 3's profiles stand).
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=400 bash bench/peers_device.sh bert --no-torch-cold
rc=$?
prof=/tmp/profiles_final5
mkdir -p "$prof"
for s in bert_layer:1,8,32,128; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    timeout 40 build-dev/hkc run "build-dev/peers/$name.hkpack" --target sm_90a --batch "$b" --random-params \
      --runs 200 --warmup 20 --profile --repeats 50 > "$prof/profile_${name}_b$b.txt" 2>&1
    echo "$name b$b profile rc $? $(grep -E 'sum of launches|bubbles' "$prof/profile_${name}_b$b.txt" | tr '\n' ' ')"
  done
done
tar -C /tmp -czf "$final/profiles_final5.tar.gz" profiles_final5
exit $rc
