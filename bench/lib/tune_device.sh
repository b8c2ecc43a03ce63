#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py tune` (build-dev carried): hkc tune on this GPU, then optionally the
# tuned layers checked and timed. Steps in priority order; later ones are skipped when the call's
# time (DEVICE_BUDGET_S, default 540 s) would run out:
#   1. hkc tune over each spec of TUNE_SPECS (default: the GEMM launches of bert_layer and
#      llama_block, specs/tuning/bert_layer_bf16.yaml and specs/tuning/llama_gemms.yaml) for
#      TUNE_TARGET (sm_90a), the model's TUNE_TOP (8) best-ranked candidates of each launch
#      measured, TUNE_OPTIONS (e.g. "gemm_tma=on": only that kernel in the space) as kernel
#      options; the databases merged (with TUNE_BASE_DB too, when set) into $OUT/h200.db --
#      commit it as specs/tuning/h200.db; the reports in $OUT/tune_NAME.md;
#   2. with TUNE_CHECK=1: bert_layer and llama_block rebuilt with that database (fused and
#      unfused), numerics against PyTorch at every bucket and one padded batch, fused vs unfused
#      latency, and profiles at small batches;
#   3. with TUNE_CHECK=1: the whole numerics harness on sm_90a (packs built with the model's
#      choices: tests/device/prepare.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${OUT:-/tmp/hk-tune}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-540}
left() { echo $((budget - ($(date +%s) - start))); }
rc=0
HKC=build-dev/hkc
target=${TUNE_TARGET:-sm_90a}
opts=()
for o in ${TUNE_OPTIONS:-}; do opts+=(--kernel-option "$o"); done
dbs=()
for s in ${TUNE_SPECS:-specs/tuning/bert_layer_bf16.yaml specs/tuning/llama_gemms.yaml}; do
  n=$(basename "$s" .yaml)
  if $HKC tune "$s" --target "$target" "${opts[@]}" -o "/tmp/tune_$n.db" --top "${TUNE_TOP:-8}" -j "$(nproc)" \
      --report "$out/tune_$n.md" >> "$out/tune.log" 2>&1; then
    dbs+=("/tmp/tune_$n.db")
  else
    rc=1; echo "tune $n failed"
  fi
  echo "tune $n: $(grep -i geomean "$out/tune_$n.md" 2>/dev/null | head -2 | tr '\n' ' ') ($(( $(date +%s) - start )) s)"
done
[ "${#dbs[@]}" -gt 0 ] && $HKC tune --merge ${TUNE_BASE_DB:+"$TUNE_BASE_DB"} "${dbs[@]}" -o "$out/h200.db" >> "$out/tune.log" 2>&1 || rc=1
if [ "${TUNE_CHECK:-0}" = 1 ]; then
  mkdir -p /tmp/tuned
  for name in bert_layer llama_block; do
    for mode in auto none; do
      $HKC build "specs/$name.yaml" -o "/tmp/tuned/${name}_$mode.hkpack" --target "$target" --fusion "$mode" \
        --tuning-db "$out/h200.db" -q -j "$(nproc)" || rc=1
    done
    [ "$(left)" -gt 60 ] || continue
    python3 tests/device/check.py "$HKC" "specs/$name.yaml" "/tmp/tuned/${name}_auto.hkpack" "/tmp/tuned/w_$name" \
      --gpu-target "$target" >> "$out/check_tuned.log" 2>&1 || rc=1
    grep -E "^(ok|FAIL)" "$out/check_tuned.log" | grep "$name"
    [ "$(left)" -gt 60 ] || continue
    python3 bench/lib/fusion.py "specs/$name.yaml" "/tmp/tuned/${name}_auto.hkpack" "/tmp/tuned/${name}_none.hkpack" \
      2>&1 | tee -a "$out/fusion_tuned.log" || rc=1
  done
  if [ "$(left)" -gt 60 ]; then
    { for b in 1 8; do $HKC run --random-params /tmp/tuned/bert_layer_auto.hkpack --batch $b --profile --repeats 50; done
      $HKC run --random-params /tmp/tuned/llama_block_auto.hkpack --batch 1 --profile --repeats 20; } > "$out/profile_tuned.log" 2>&1 || rc=1
    grep -E "sum of launches|^target" "$out/profile_tuned.log"
  fi
  if [ "$(left)" -gt 150 ]; then
    HK_GPU_TARGET=$target timeout $(( $(left) - 20 )) bash tests/device/run.sh /tmp/hk-d90a > "$out/check_model.log" 2>&1 || rc=1
    echo "numerics $target (model's choices): $(tail -n1 "$out/check_model.log")"
    grep -E "^FAIL" "$out/check_model.log" | cut -c1-200 | head
  else
    echo "numerics $target (model's choices): SKIPPED, $(left) s left"
  fi
fi
echo "tune_device: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
