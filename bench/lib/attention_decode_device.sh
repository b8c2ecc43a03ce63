#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py attention --decode`: split-KV attention on the H200 (build-dev
# carried, prepared by `bench/run.py attention --decode --prepare`), under 4 minutes:
#   1. numerics of every split-KV pack (bench/lib/attn_bars.py --set skv numerics --twice): decode
#      steps, odd lengths, GQA, packed qkv, causal, key lengths and an additive mask, kvs 1/2/4/8,
#      128-row tiles split, GQA row packing (gp tags), attention_tma and the build's default,
#      against a float64 reference;
#      each pack runs twice and must give the same bytes. A pack that hangs ends the step with
#      "HANG <case>__<tag>" (or "FAULT ..."), and the step runs again without that tag (3 times);
#   2. timings (--set skv timing): decode shapes, hkc's tags against SDPA, both in CUDA graphs,
#      inputs rotated past L2; the tags that failed or hung in step 1 are skipped.
# Logs in $OUT: gpu.txt numerics.log numerics.jsonl bars.log bars.jsonl bad.json
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev
out=${OUT:-/tmp/hk-skv}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-225}
left() { echo $((budget - ($(date +%s) - start))); }
rc=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader \
  > "$out/gpu.txt" 2>&1

# runs step $1 (numerics or timing) hang-proof: again without a tag that hung or faulted
skip=""
step() {
  local mode=$1 reserve=$2 log=$3 extra=$4
  for attempt in 1 2 3; do
    local t=$(( $(left) - reserve )); [ "$t" -gt 20 ] || { echo "$mode: out of time"; return 1; }
    timeout -s KILL "$t" python3 bench/lib/attn_bars.py --set skv "$mode" --out "$out/$mode.jsonl" --bad "$out/bad.json" \
      --skip-tags "$skip" --hang-s 20 $extra >> "$log" 2>&1
    local r=$?
    local hung
    hung=$(grep -E "^(HANG|FAULT) " "$log" | tail -n 1 | grep -oE "__[A-Za-z0-9_]+" | sed 's/^__//')
    if { [ $r -eq 3 ] || [ $r -eq 4 ]; } && [ -n "$hung" ] && ! grep -qx "$hung" <<<"${skip//,/$'\n'}"; then
      echo "$mode: tag $hung hung or faulted; again without it"
      skip="$skip${skip:+,}$hung"
      continue
    fi
    return $r
  done
  return 1
}

step numerics 110 "$out/numerics.log" --twice || rc=1
echo "numerics: $(grep -c ' ok$' "$out/numerics.log") ok, $(grep -c 'NUMERICS FAIL' "$out/numerics.log") FAIL, $(grep -c ' ERROR ' "$out/numerics.log") ERROR, hung/faulted: ${skip:-none} ($(( $(date +%s) - start )) s)"
grep -E "NUMERICS FAIL| ERROR |^HANG|^FAULT" "$out/numerics.log" | head -n 20

step timing 5 "$out/bars.log" "" || rc=1
mv -f "$out/timing.jsonl" "$out/bars.jsonl" 2>/dev/null
sed -n '/^case .*best tag/,$p' "$out/bars.log"
echo "skv_device: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
