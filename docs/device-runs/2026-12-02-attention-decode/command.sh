#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s8/call4.sh from the repository root in the session; copied here next to its output)
# Session 8, device call 4 (build-dev carried; bench/skv_prepare.sh): split-KV and grouped-query
# row packing (attention_mma kvs / gp) numerics and timing against SDPA, and the harness on
# repeat_layers (sm_90a). Output in $OUT/device-run.tar.gz.
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
t "split-KV + gp"
OUT=$out/skv DEVICE_BUDGET_S=205 bash bench/skv_device.sh > "$out/skv.out" 2>&1; echo "skv rc $?"
tail -n 40 "$out/skv.out"
t "harness repeat_layers sm_90a"
HK_DEVICE_SPECS='^repeat_layers$' HK_GPU_TARGET=sm_90a timeout 30 bash tests/device/run.sh /tmp/s8-rep > "$out/harness_repeat.log" 2>&1; echo "rc $?"
echo "ok $(grep -c '^ok' "$out/harness_repeat.log") FAIL $(grep -c '^FAIL' "$out/harness_repeat.log")"
