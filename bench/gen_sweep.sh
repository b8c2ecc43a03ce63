#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A short GPU run for the decode step's kernel options (after bench/gen_prepare.sh, with
# build-dev/ copied to the GPU machine): each pack of SWEEP (names in build-dev/gen/; default: the pack and three
# gemm_skinny_cfg forms, built on the CPU machine as below) profiled at batch 1 x 1024, then
# bench/gen_device.py check of GEN_MODELS and bench at GEN_POINTS in whatever time is left of
# RUN_SECONDS (540); before those, the traces of GEN_TRACE's packs and the 8-bit packs of GEN_Q8 (below).
# Logs in $OUT: sweep.log (each pack's graph replay and launches), profile_b1.log (the default
# pack's), trace_b1.log, q8.log, bench.log, gen_check.log.
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
  grep -E '^prompt|^ +[1-6] |^ +(97|98|99|100) |sum of launches' /tmp/prof.log >> $out/sweep.log
  [ $p = llama-3.2-1b ] && cp /tmp/prof.log $out/profile_b1.log
done
grep "^== " $out/sweep.log
# GEN_TRACE: packs whose batch-1 decode step is traced inside the replayed graph (bench/gen_trace.py)
for p in ${GEN_TRACE:-}; do
  timeout $(left 60) python3 bench/gen_trace.py build-dev/gen/$p.hkpack --steps 8 > /tmp/trace.log 2>&1
  { echo "== trace $p (rc $?)"; cat /tmp/trace.log; } >> $out/trace_b1.log
done
# GEN_Q8: 8-bit packs (bench/gen_prepare.sh's, and any built like them) on the checkpoint quantized
# here (int8, per output channel); llama-3.2-1b-s8-fast, the bf16 pack of the same 8 slots, on the
# bf16 weights; each one's greedy ids beside the unfolded 8-bit pack's (the same products)
if [ -n "${GEN_Q8:-}" ]; then
  timeout $(left 120) build-dev/hkc quantize /tmp/gen_llama-3.2-1b/model.safetensors \
    -o /tmp/gen_llama-3.2-1b/model_q8.safetensors --dtype int8 -q
  for p in $GEN_Q8; do
    w=/tmp/gen_llama-3.2-1b/model_q8.safetensors map=build-dev/gen/llama-3.2-1b-q8.map
    [ $p = llama-3.2-1b-s8-fast ] && w=/tmp/gen_llama-3.2-1b/model.safetensors map=build-dev/gen/llama-3.2-1b-s8.map
    timeout $(left 60) build-dev/hkc generate build-dev/gen/$p.hkpack --weights $w --weights-map $map --ids /tmp/p1024.npy \
      -n 64 --profile > /tmp/prof.log 2>&1
    echo "== $p (rc $?): $(grep -m1 'graph replay alone' /tmp/prof.log)" >> $out/q8.log
    grep -E '^prompt|^ +[1-6] |sum of launches' /tmp/prof.log >> $out/q8.log
  done
  grep "^== " $out/q8.log
fi
GEN_MODELS=${GEN_MODELS:-llama-3.2-1b,qwen2.5-0.5b,tinyllama-1.1b} timeout $(left 200) python3 bench/gen_device.py check > $out/gen_check.log 2>&1
echo "check: rc $?"; grep -E "tokens equal|bounds" $out/gen_check.log | sed 's/logits vs f32.*divergence: //' | tail -40
GEN_POINTS=${GEN_POINTS:-1x1024,8x1024,1x4096,32x1024,1x128} GEN_FAST=${GEN_FAST:-0} timeout $(left 250) python3 bench/gen_device.py bench > $out/bench.log 2>&1
echo "bench: rc $?"; grep -vi "warn" $out/bench.log | tail -25
