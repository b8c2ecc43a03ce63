#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s11/call6.sh from the repository root in the session; copied here next to its output)
# Session 11, device call 6: the whole device harness on sm_90a at the session's final commit
# (every spec in specs/ and tests/specs/, packs for host + sm_90a from
# `HK_GPU_TARGETS=sm_90a bash tests/device/prepare.sh`): gemm_tma's epilogue refactor (rope,
# folded norm) against PyTorch on every gemm form of every spec.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
HK_GPU_TARGET=sm_90a timeout 300 bash tests/device/run.sh /tmp/harness > "$final/harness_sm_90a.log" 2>&1
echo "harness sm_90a rc $? $(grep -c 'FAIL' "$final/harness_sm_90a.log") FAIL rows; $(tail -n 1 "$final/harness_sm_90a.log")"
