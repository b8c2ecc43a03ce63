#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The generation call's essentials for a short device window (after bench/gen_prepare.sh, with
# build-dev/ carried), most important first, each stage with its own time limit: the default
# NVIDIA cache kernels against NumPy (kv_attention_warp, kv_attention_mma), the Llama-3.2-1B decode
# step's per-launch profile (context 1024: the default pack at batch 1, the -alt pack -- built with
# GEN_ALT_OPTIONS -- at batch 1 and 8), greedy tokens and logits against Hugging Face (GEN_MODELS,
# default llama-3.2-1b-alt), then
# ms/token and time to first token against Hugging Face (GEN_POINTS, default 1x1024,8x1024).
# Logs in $OUT as one archive (gen-logs.tgz).
set -uo pipefail
cd "$(dirname "$0")/.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key}
export LD_LIBRARY_PATH=$PWD/build-dev PYTHONPATH=$PWD/python HKRT_LIBRARY=$PWD/build-dev/libhkrt.so PYTHONUNBUFFERED=1
out=${OUT:-/tmp/gen-out}
mkdir -p "$out/logs"
log=$out/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
KV_CHECK_OPTIONS=${KV_CHECK_OPTIONS:-kv_warp=auto} timeout "${GEN_T_KV:-45}" \
  python3 tests/device/kv_attention_check.py build-dev/hkc sm_90a > "$log/kv_check.log" 2>&1
echo "kv check: rc $?"; grep -E "^FAIL|failure" "$log/kv_check.log" | head -20
timeout 90 python3 bench/gen_device.py weights > "$log/weights.log" 2>&1
python3 -c "import numpy as np; [np.save('/tmp/p1024_%d.npy' % i, np.random.default_rng(i).integers(0, 128000, size=1024).astype(np.int32)) for i in range(8)]"
w=(--weights /tmp/gen_llama-3.2-1b/model.safetensors --weights-map build-dev/gen/llama-3.2-1b.map)
for pb in llama-3.2-1b:1 llama-3.2-1b-alt:1 llama-3.2-1b-alt:8; do
  p=${pb%:*} b=${pb#*:}
  ids=(); for ((i = 0; i < b; i++)); do ids+=(--ids "/tmp/p1024_$i.npy"); done
  timeout 60 build-dev/hkc generate "build-dev/gen/$p.hkpack" "${w[@]}" "${ids[@]}" -n 32 --profile \
    > "$log/profile_${p}_b$b.log" 2>&1
  echo "== profile $p b$b (rc $?)"; grep -v '^prompt' "$log/profile_${p}_b$b.log" | head -16
done
GEN_MODELS=${GEN_MODELS:-llama-3.2-1b-alt} timeout "${GEN_T_CHECK:-90}" python3 bench/gen_device.py check \
  > "$log/gen_check.log" 2>&1
echo "check: rc $?"; grep -E "tokens equal|bf16 bounds" "$log/gen_check.log" | cut -c1-260
GEN_POINTS=${GEN_POINTS:-1x1024,8x1024} OUT=$log timeout "${GEN_T_BENCH:-150}" python3 bench/gen_device.py bench \
  > "$log/bench.log" 2>&1
echo "bench: rc $?"; grep -E "^b[0-9]|copy bandwidth" "$log/bench.log"
tar czf "$out/gen-logs.tgz" -C "$log" . && rm -rf "$log"
