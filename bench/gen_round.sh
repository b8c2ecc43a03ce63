#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The batch-1 decode work as one command on the GPU machine (after, on the CPU machine,
#   GEN_ALT_OPTIONS="kv_fold=on" GEN_KV_CFGS="w=2,p=32 w=1,p=16,s=64 w=8,p=128,s=16" bash bench/gen_prepare.sh
# with build-dev/ copied to the GPU machine), in about 9 minutes:
#   1. tests/device/kv_attention_check.py with the folded append (warp and portable kernels);
#   2. bench/gen_sweep.sh: the default pack, the folded one (-alt) and the forced splits (sw-f-*)
#      at batch 1 x 1024 (graph replay, launches, greedy ids), the CUPTI traces of the first two,
#      the three-model check with the batch-1 logit bound, ms/token against Hugging Face at
#      1x1024 and 8x1024;
#   3. bench/gen_ncu.sh on the default pack (the decode step's launches, kv_attention and the
#      gemms in detail and by SASS line).
# Every log goes into one archive, $OUT/logs.tgz (default /tmp/gen-round/logs.tgz).
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build-dev HKC_KEY=$PWD/build-dev/signing.key PYTHONPATH=$PWD/python
export HKRT_LIBRARY=$PWD/build-dev/libhkrt.so PYTHONUNBUFFERED=1
back=${OUT:-/tmp/gen-round}
logs=/tmp/gen-round-logs
rm -rf "$logs" && mkdir -p "$logs" "$back"
export OUT=$logs
KV_CHECK_OPTIONS="kv_fold=on,kv_fold=on+kv_warp=off+kv_mma=off" timeout 80 \
  python3 tests/device/kv_attention_check.py build-dev/hkc sm_90a > "$logs/kv_check.log" 2>&1
echo "kv_check: rc $?"; tail -2 "$logs/kv_check.log"
sweep="llama-3.2-1b llama-3.2-1b-alt"
for p in build-dev/gen/sw-f-*.hkpack; do [ -e "$p" ] && sweep+=" $(basename "$p" .hkpack)"; done
RUN_SECONDS=${GEN_ROUND_SWEEP_SECONDS:-320} SWEEP="$sweep" GEN_TRACE="llama-3.2-1b llama-3.2-1b-alt" \
  GEN_CHECK_SINGLE=1 GEN_POINTS=${GEN_POINTS:-1x1024,8x1024} bash bench/gen_sweep.sh
NCU_T=50 NCU_KERNELS="kv_attention silu_dual nrm_tb" timeout "${GEN_ROUND_NCU_SECONDS:-160}" bash bench/gen_ncu.sh
(cd "$logs" && tar czf "$back/logs.tgz" .) && echo "logs: $back/logs.tgz ($(ls "$logs" | wc -l) files)"
