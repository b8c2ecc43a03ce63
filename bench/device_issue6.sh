#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call for the fusion / batch-bucket issue (after tests/device/prepare.sh and
# bench/fusion_prepare.sh on the CPU machine, build-dev carried):
#   1. numerics: every spec and op pack on sm_90 and on sm_90a against PyTorch (check.py),
#      every bucket plus one padded batch between buckets;
#   2. fused vs unfused latency for bert_layer and llama_block at every bucket (fusion.py);
#   3. `hkc run --profile` of the fused packs at small batches (each launch beside its floor).
# Logs into $OUT; a summary on stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/hk-issue6}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
rc=0
HK_GPU_TARGET=sm_90a bash tests/device/run.sh /tmp/hk-d90a > "$out/check90a.log" 2>&1 || rc=1
echo "numerics sm_90a: $(tail -n1 "$out/check90a.log")"
HK_GPU_TARGET=sm_90 bash tests/device/run.sh /tmp/hk-d90 > "$out/check90.log" 2>&1 || rc=1
echo "numerics sm_90:  $(tail -n1 "$out/check90.log")"
grep -hE "^FAIL" "$out/check90.log" "$out/check90a.log" | cut -c1-220 | head -30
for name in bert_layer llama_block; do
  python3 bench/fusion.py "build-dev/fusion/$name.yaml" "build-dev/fusion/${name}_auto.hkpack" \
    "build-dev/fusion/${name}_none.hkpack" --out "$out/fusion.jsonl" || rc=1
done 2>&1 | tee "$out/fusion.log"
{
  for b in 1 8; do build-dev/hkc run --random-params --allow-unsigned-native build-dev/fusion/bert_layer_auto.hkpack --batch $b --profile --repeats 50; done
  build-dev/hkc run --random-params --allow-unsigned-native build-dev/fusion/llama_block_auto.hkpack --batch 1 --profile --repeats 20
} > "$out/profile.log" 2>&1 || rc=1
cat "$out/profile.log"
exit $rc
