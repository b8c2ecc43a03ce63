#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call for the GEMM issue's tuning (after tests/device/prepare.sh, build-dev
# carried): hkc tune over the GEMM launches of bert_layer and llama_block (the specs in
# specs/tuning/) with only gemm_tma in the space (kernel option gemm_tma=on), merged into
# OUT/h200.db -- commit it as specs/tuning/h200.db. Reports in OUT/tune_*.md.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${OUT:-/tmp/hk-tune}
mkdir -p "$out"
start=$(date +%s)
rc=0
for s in bert_layer_bf16 llama_gemms; do
  build-dev/hkc tune "specs/tuning/$s.yaml" --target sm_90a --kernel-option gemm_tma=on -o "/tmp/$s.db" \
    --top "${TUNE_TOP:-6}" -j "$(nproc)" --report "$out/tune_$s.md" >> "$out/tune.log" 2>&1 || { rc=1; echo "tune $s failed"; }
  echo "tune $s: $(grep -i geomean "$out/tune_$s.md" | head -2 | tr '\n' ' ') ($(( $(date +%s) - start )) s)"
done
build-dev/hkc tune --merge /tmp/bert_layer_bf16.db /tmp/llama_gemms.db -o "$out/h200.db" >> "$out/tune.log" 2>&1 || rc=1
echo "gemm_tune_device: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
