#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s8/call5.sh from the repository root in the session; copied here next to its output)
# Session 8, device call 5: ncu stall reasons and tensor-pipe use of the short GEMMs below
# their bar (build-dev carried; python3 bench/gemm_bars.py prepare --only small_).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
out=/tmp/device-run
mkdir -p "$out"
trap 'tar -C /tmp -czf "$final/device-run.tar.gz" device-run' EXIT
for c in 128x768x768 128x2304x768 1024x768x768 1024x2304x768 1024x768x3072 512x1024x4096; do
  timeout -s KILL 25 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes.sum \
    --launch-count 1 build-dev/hkc run --random-params "build-dev/bench/gemm/small_bf16_$c.hkpack" --batch 1 --runs 1 --warmup 0 \
    > "$out/ncu_$c.txt" 2>&1
  echo "$c rc $? $(grep -E '^    Duration' "$out/ncu_$c.txt" | sed 's/  */ /g')"
done
