#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A short GPU run for the decode step's kernel options (after bench/gen_prepare.sh, with
# build-dev/ copied to the GPU machine): each pack of SWEEP (names in build-dev/gen/; default: the pack and three
# gemm_skinny_cfg forms, built on the CPU machine as below) profiled at batch 1 x 1024, then
# bench/gen_device.py bench at GEN_POINTS and check of GEN_MODELS in whatever time is left of
# RUN_SECONDS (540). Logs in $OUT: sweep.log (each pack's graph replay and launches), profile_b1.log
# (the default pack's), bench.log, gen_check.log.
#   GEN_ALT_OPTIONS="gemm_skinny_cfg=ks=1" bash bench/gen_prepare.sh
#   for c in ks=1 ks=4 ks=2,u=4; do
#     build-dev/hkc build build-dev/gen/llama-3.2-1b.yaml -o build-dev/gen/sw-$(echo $c | tr ',=' '_-').hkpack \
#       --target sm_90a --tuning-db specs/tuning/h200.db --kernel-option gemm_skinny_cfg=$c; done
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build-dev HKC_KEY=$PWD/build-dev/signing.key PYTHONPATH=$PWD/python HKRT_LIBRARY=$PWD/build-dev/libhkrt.so
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
end=$(( $(date +%s) + ${RUN_SECONDS:-540} )) # each stage gets at most what is left of the run
left() { local l=$(( end - $(date +%s) )); [ $l -lt $1 ] && echo $(( l > 5 ? l : 5 )) || echo $1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 python3 bench/gen_device.py weights > $out/weights.log 2>&1 || tail -5 $out/weights.log
python3 -c "import numpy as np; np.save('/tmp/p1024.npy', np.random.default_rng(0).integers(0, 128000, size=1024).astype(np.int32))"
for p in ${SWEEP:-llama-3.2-1b sw-ks-1 sw-ks-4 sw-ks-2_u-4}; do
  timeout 40 build-dev/hkc generate build-dev/gen/$p.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
    --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 64 --profile > /tmp/prof.log 2>&1
  echo "== $p: $(grep -m1 'graph replay alone' /tmp/prof.log)" >> $out/sweep.log
  grep -E '^ +[1-6] |^ +(97|98|99|100) |sum of launches' /tmp/prof.log >> $out/sweep.log
  [ $p = llama-3.2-1b ] && cp /tmp/prof.log $out/profile_b1.log
done
grep "^== " $out/sweep.log
GEN_POINTS=${GEN_POINTS:-1x1024,8x1024,1x4096,32x1024,1x128} GEN_FAST=0 timeout $(left 250) python3 bench/gen_device.py bench > $out/bench.log 2>&1
echo "bench: rc $?"; grep -vi "warn" $out/bench.log | tail -25
GEN_MODELS=${GEN_MODELS:-llama-3.2-1b,qwen2.5-0.5b,tinyllama-1.1b} timeout $(left 150) python3 bench/gen_device.py check > $out/gen_check.log 2>&1
echo "check: rc $?"; grep -E "tokens equal|bounds" $out/gen_check.log | sed 's/logits vs f32.*divergence: //' | tail -24
