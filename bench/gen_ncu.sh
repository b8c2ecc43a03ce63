#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Nsight Compute on a generation pack's decode step (after bench/gen_prepare.sh, with build-dev/
# carried, on the GPU machine): `hkc generate PACK` with a 1024-token prompt and one decode step
# (-n 2), then
#   1. every launch's time, DRAM bytes, bandwidth share, grid and registers (ncu_PACK.csv);
#   2. the last decode step's launch of each kernel naming one of NCU_KERNELS, in detail:
#      speed of light, memory, warp states, occupancy, launch (ncu_detail_NAME.log);
#   3. for those naming one of NCU_SOURCE, the hottest SASS lines by warp stall samples
#      (ncu_source_NAME.csv; bench/lib/ncu_hot.py prints the top 25).
# The weights: bench/gen_device.py weights (Llama-3.2-1B's config, random, /tmp/gen_llama-3.2-1b).
#   NCU_PACKS="llama-3.2-1b" NCU_KERNELS="kv_attention silu_dual" NCU_SOURCE="kv_attention" bash bench/gen_ncu.sh
# Logs in $OUT (default /tmp/gen-out). NCU_T (per ncu run, seconds; default 120).
set -uo pipefail
cd "$(dirname "$0")/.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key}
export LD_LIBRARY_PATH=$PWD/build-dev PYTHONPATH=$PWD/python HKRT_LIBRARY=$PWD/build-dev/libhkrt.so PYTHONUNBUFFERED=1
out=${OUT:-/tmp/gen-out}
mkdir -p "$out"
command -v ncu >/dev/null || { echo "gen_ncu: no ncu on this machine"; exit 1; }
[ -f /tmp/gen_llama-3.2-1b/model.safetensors ] || timeout 120 python3 bench/gen_device.py weights > "$out/weights.log" 2>&1
[ -f /tmp/p1024.npy ] || python3 -c "import numpy as np; np.save('/tmp/p1024.npy', np.random.default_rng(0).integers(0, 128000, size=1024).astype(np.int32))"
t=${NCU_T:-120}
for p in ${NCU_PACKS:-llama-3.2-1b}; do
  gen=(build-dev/hkc generate "build-dev/gen/$p.hkpack" --weights /tmp/gen_llama-3.2-1b/model.safetensors
       --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 2)
  timeout "$t" ncu --clock-control none --csv --metrics \
    gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread \
    "${gen[@]}" > "$out/ncu_$p.csv" 2>&1
  echo "ncu $p: rc $? $(grep -c gpu__time_duration "$out/ncu_$p.csv") kernel rows"
  # the decode step: at most ~110 launches (Llama-3.2-1B: 101) end the run
  picks=$(python3 bench/lib/ncu_pick.py "$out/ncu_$p.csv" 110 ${NCU_KERNELS:-kv_attention silu_dual nrm_tb res_tb kv_append})
  for ks in $picks; do
    k=${ks%:*}
    timeout "$t" ncu --clock-control none --kernel-name "$k" --launch-skip "${ks##*:}" --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats --section SchedulerStats "${gen[@]}" > "$out/ncu_detail_${p}_$k.log" 2>&1
    echo "ncu detail $p $k: rc $?"
    grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp|No Eligible|Block Limit|Waves Per SM" \
      "$out/ncu_detail_${p}_$k.log" | head -14
    for s in ${NCU_SOURCE:-kv_attention}; do
      [[ $k == *"$s"* ]] || continue
      rep=/tmp/ncu_src_$$
      timeout "$t" ncu --clock-control none --kernel-name "$k" --launch-skip "${ks##*:}" --launch-count 1 \
        --section SourceCounters --section WarpStateStats --import-source no --export "$rep" -f "${gen[@]}" > /dev/null 2>&1
      ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/ncu_source_${p}_$k.csv" 2>&1
      echo "ncu source $p $k:"; python3 bench/lib/ncu_hot.py "$out/ncu_source_${p}_$k.csv" 25
      # the stall reasons of the whole launch
      ncu -i "$rep.ncu-rep" --page details --section WarpStateStats --print-details all 2>/dev/null | grep -iE "stall|cycles" | head -30
    done
  done
done
