# gemm_skinny with K split over warps (gemm_skinny_cfg), packs built on the CPU machine by
#   GEN_ALT_OPTIONS="gemm_skinny_cfg=ks=4" bash bench/gen_prepare.sh
#   for c in ks=2 ks=4 ks=4,u=4 ks=8,u=2,nw=2,w=8 ks=2,u=8,nw=1 ks=1,u=8,nw=2,w=8; do
#     hkc build build-dev/gen/llama-3.2-1b.yaml -o build-dev/gen/sw-$(echo $c | tr ',=' '_-').hkpack \
#       --target sm_90a --tuning-db specs/tuning/h200.db --kernel-option gemm_skinny_cfg=$c; done
#   for c in "" ks=2 ks=4 ks=8,u=2,nw=2,w=8 ks=2,u=16,nw=1,w=2; do
#     hkc build tests/specs/op_gemm_few_rows.yaml -o build-dev/fr/$(echo ${c:-base} | tr ',=' '_-').hkpack \
#       --target sm_90a --kernel-option gemm_skinny=on ${c:+--kernel-option gemm_skinny_cfg=$c}; done
# old-pdl.hkpack: the default pack of commit 62878c6, before kv_append let the attention on before
# its wait, the attention prefetched its keys and the sampler split its greedy rows (the packs
# above: commit bd42b37).
# then on the GPU machine (logs in $OUT):
set -u
export LD_LIBRARY_PATH=$PWD/build-dev HKC_KEY=$PWD/build-dev/signing.key PYTHONPATH=$PWD/python HKRT_LIBRARY=$PWD/build-dev/libhkrt.so
out=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for p in ks-4 ks-8_u-2_nw-2_w-8; do
  timeout 40 python3 tests/device/check.py build-dev/hkc tests/specs/op_gemm_few_rows.yaml build-dev/fr/$p.hkpack /tmp/fr_$p \
    --gpu-target sm_90a > $out/fr_$p.log 2>&1
  echo "few rows $p: rc $? $(grep -c ' ok' $out/fr_$p.log) ok, $(grep -ci 'fail\|mismatch' $out/fr_$p.log) bad"
done
timeout 60 python3 tests/device/kv_attention_check.py build-dev/hkc sm_90a > $out/kv_check.log 2>&1
echo "kv check: rc $?"; tail -3 $out/kv_check.log
GEN_MODELS=llama-3.2-1b timeout 150 python3 bench/gen_device.py check > $out/gen_check.log 2>&1
echo "gen check: rc $?"; grep -E "prompt|bounds" $out/gen_check.log | tail -8
[ -f /tmp/gen_llama-3.2-1b/model.safetensors ] || timeout 120 python3 bench/gen_device.py weights > $out/weights.log 2>&1
python3 -c "import numpy as np; np.save('/tmp/p1024.npy', np.random.default_rng(0).integers(0, 128000, size=1024).astype(np.int32))"
for p in llama-3.2-1b old-pdl sw-ks-2 sw-ks-4 sw-ks-4_u-4 sw-ks-8_u-2_nw-2_w-8 sw-ks-2_u-8_nw-1 sw-ks-1_u-8_nw-2_w-8 llama-3.2-1b; do
  timeout 40 build-dev/hkc generate build-dev/gen/$p.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
    --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 64 --profile > $out/profile_b1_$p.log 2>&1
  echo "== $p: $(grep -m1 'graph replay alone' $out/profile_b1_$p.log)"
  grep -E '^ +[1-6] ' $out/profile_b1_$p.log
  grep -E 'sum of launches' $out/profile_b1_$p.log
done
for p in llama-3.2-1b old-pdl sw-ks-4; do
  timeout 90 python3 bench/gen_trace.py build-dev/gen/$p.hkpack --steps 8 > $out/trace_b1_$p.log 2>&1
  echo "trace $p: rc $?"; head -12 $out/trace_b1_$p.log; sed -n '/^per kernel/,$p' $out/trace_b1_$p.log
done
timeout 60 python3 bench/gen_trace.py build-dev/gen/llama-3.2-1b.hkpack --batch 8 --steps 6 > $out/trace_b8.log 2>&1
echo "trace b8: rc $?"; sed -n '/^per kernel/,$p' $out/trace_b8.log
