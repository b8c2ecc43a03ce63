#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s12/call5.sh from the repository root in the session; copied here next to its output)
# Session 12, device call 5: llama_block peers at the session's final commit (plan and kernels
# as the earlier run's: rope in the q|k|v projection's epilogue; both rmsnorms kept apart by the
# planner's clock; specs/tuning/h200.db with the rope gemm's entries); build-dev from `bash bench/peers_prepare.sh` carried:
#   1. llama_block peers, every system (bench/peers_device.sh, no device-side build timing, no
#      torch cold-start processes);
#   2. the per-launch profile and bubbles of every batch of the llama_block pack.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=400 bash bench/peers_device.sh llama --no-torch-cold
rc=$?
prof=/tmp/profiles_s12_llama
mkdir -p "$prof"
for b in 1 4 16; do
  timeout 50 build-dev/hkc run build-dev/peers/llama_block.hkpack --target sm_90a --batch "$b" --random-params \
    --runs 200 --warmup 20 --profile --repeats 50 > "$prof/profile_llama_block_b$b.txt" 2>&1
  echo "llama b$b profile rc $? $(grep -E 'sum of launches|bubbles' "$prof/profile_llama_block_b$b.txt" | tr '\n' ' ')"
done
tar -C /tmp -czf "$final/profiles_s12_llama.tar.gz" profiles_s12_llama
exit $rc
