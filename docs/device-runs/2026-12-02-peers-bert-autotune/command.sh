#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s9/call2.sh from the repository root in the session; copied here next to its output)
# Session 9, device calls 2 and 3 (build-dev from `bash bench/peers_prepare.sh` carried): the
# peers benchmark of one spec with every system, max-autotune included (bench/peers_device.sh,
# no device-side build timing, no torch cold-start processes), then the per-launch profile and
# bubbles of every batch of the same pack, in the same call.
#   bash bench/s9/call2.sh bert|llama
# Output: $OUT/peers_PART.{jsonl,log,md,png} and $OUT/profiles_PART.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
part=${1:?bert|llama}
case $part in bert) name=bert_layer batches="1 8 32 128" ;; llama) name=llama_block batches="1 4 16" ;; esac
final=${OUT:-/tmp}
PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=${PEERS_BUDGET_S:-490} bash bench/peers_device.sh "$part" --no-torch-cold
rc=$?
prof=/tmp/profiles_$part
mkdir -p "$prof"
for b in $batches; do
  timeout 40 build-dev/hkc run "build-dev/peers/$name.hkpack" --target sm_90a --batch "$b" --random-params \
    --runs 200 --warmup 20 --profile --repeats 50 > "$prof/profile_${name}_b$b.txt" 2>&1
  echo "$name b$b profile rc $? $(grep -E 'sum of launches|bubbles' "$prof/profile_${name}_b$b.txt" | tr '\n' ' ')"
done
if [ "$part" = bert ] && [ -f build-dev/s9/rows_small.hkpack ]; then
  # the row kernels at 128 and 1024 rows against their floor plus a launch,
  # the launch measured the same way on a relu over 8 elements (build-dev/s9/*.yaml)
  for b in 1 8; do
    timeout 40 build-dev/hkc run build-dev/s9/rows_small.hkpack --batch "$b" --random-params --runs 200 --warmup 20 \
      --profile --repeats 50 > "$prof/profile_rows_small_b$b.txt" 2>&1; echo "rows_small b$b rc $?"
  done
  timeout 40 build-dev/hkc run build-dev/s9/launch_floor.hkpack --batch 1 --random-params --runs 200 --warmup 20 \
    --profile --repeats 50 > "$prof/profile_launch_floor.txt" 2>&1; echo "launch_floor rc $?"
  cp build-dev/s9/*.yaml "$prof/"
fi
tar -C /tmp -czf "$final/profiles_$part.tar.gz" "profiles_$part"
exit $rc
