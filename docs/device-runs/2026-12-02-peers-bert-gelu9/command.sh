#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s10/call3.sh from the repository root in the session; copied here next to its output)
# Session 10, device call 3 (build-dev from `bash bench/peers_prepare.sh` after call 2's
# revert carried; the packs are the same as call 1's, `hkc inspect` identical; the degree-5
# gelu of call 4 came after, so bert_layer's figures here are the degree-9 gelu's):
#   1. bert_layer peers, every system (bench/peers_device.sh, no device-side build timing, no
#      torch cold-start processes);
#   2. the per-launch profile and bubbles of every batch of both final packs.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=400 bash bench/peers_device.sh bert --no-torch-cold
rc=$?
prof=/tmp/profiles_final
mkdir -p "$prof"
for s in bert_layer:1,8,32,128 llama_block:1,4,16; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    timeout 40 build-dev/hkc run "build-dev/peers/$name.hkpack" --target sm_90a --batch "$b" --random-params \
      --runs 200 --warmup 20 --profile --repeats 50 > "$prof/profile_${name}_b$b.txt" 2>&1
    echo "$name b$b profile rc $? $(grep -E 'sum of launches|bubbles' "$prof/profile_${name}_b$b.txt" | tr '\n' ' ')"
  done
done
tar -C /tmp -czf "$final/profiles_final.tar.gz" profiles_final
exit $rc
