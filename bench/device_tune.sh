#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call for the tuning issue (after tests/device/prepare.sh on the CPU machine,
# build-dev carried). Steps in priority order; later ones are skipped when the call's
# time (DEVICE_BUDGET_S, default 540 s) would run out:
#   1. hkc tune on the GEMM launches of bert_layer and llama_block (sm_90a), merged into
#      h200.db (commit it as specs/tuning/h200.db);
#   2. bert_layer and llama_block rebuilt with that database (fused and unfused), numerics
#      against PyTorch at every bucket and one padded batch, fused vs unfused latency, and
#      profiles at small batches;
#   3. the whole numerics harness on sm_90a (packs built with the model's choices).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/hk-tune}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-540}
left() { echo $((budget - ($(date +%s) - start))); }
rc=0
HKC=build-dev/hkc
for s in bert_layer_bf16 llama_gemms; do
  $HKC tune "specs/tuning/$s.yaml" --target sm_90a -o "/tmp/$s.db" --top "${TUNE_TOP:-8}" --report "$out/tune_$s.md" \
    >> "$out/tune.log" 2>&1 || { rc=1; echo "tune $s failed"; }
  echo "tune $s: $(grep -i geomean "$out/tune_$s.md" | head -2 | tr '\n' ' ') ($(( $(date +%s) - start )) s)"
done
$HKC tune --merge /tmp/bert_layer_bf16.db /tmp/llama_gemms.db -o "$out/h200.db" >> "$out/tune.log" 2>&1 || rc=1
mkdir -p /tmp/tuned
for name in bert_layer llama_block; do
  for mode in auto none; do
    $HKC build "specs/$name.yaml" -o "/tmp/tuned/${name}_$mode.hkpack" --target sm_90a --fusion "$mode" \
      --tuning-db "$out/h200.db" -q -j 16 || rc=1
  done
  [ "$(left)" -gt 60 ] || continue
  python3 tests/device/check.py "$HKC" "specs/$name.yaml" "/tmp/tuned/${name}_auto.hkpack" "/tmp/tuned/w_$name" \
    --gpu-target sm_90a >> "$out/check_tuned.log" 2>&1 || rc=1
  grep -E "^(ok|FAIL)" "$out/check_tuned.log" | grep "$name"
  [ "$(left)" -gt 60 ] || continue
  python3 bench/fusion.py "specs/$name.yaml" "/tmp/tuned/${name}_auto.hkpack" "/tmp/tuned/${name}_none.hkpack" \
    2>&1 | tee -a "$out/fusion_tuned.log" || rc=1
done
if [ "$(left)" -gt 60 ]; then
  { for b in 1 8; do $HKC run --random-params /tmp/tuned/bert_layer_auto.hkpack --batch $b --profile --repeats 50; done
    $HKC run --random-params /tmp/tuned/llama_block_auto.hkpack --batch 1 --profile --repeats 20; } > "$out/profile_tuned.log" 2>&1 || rc=1
  grep -E "sum of launches|^target" "$out/profile_tuned.log"
fi
if [ "$(left)" -gt 150 ]; then
  HK_GPU_TARGET=sm_90a timeout $(( $(left) - 20 )) bash tests/device/run.sh /tmp/hk-d90a > "$out/check90a_model.log" 2>&1 || rc=1
  echo "numerics sm_90a (model's choices): $(tail -n1 "$out/check90a_model.log")"
  grep -E "^FAIL" "$out/check90a_model.log" | cut -c1-200 | head
else
  echo "numerics sm_90a (model's choices): SKIPPED, $(left) s left"
fi
echo "device_tune: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
