# Packs of commit c24c50a (gemm_stream's A staged in 16-byte loads, 8 in flight a thread), built by
#   GEN_ALT_OPTIONS="gemm_stream=off" bash bench/gen_prepare.sh
#   hkc build tests/specs/op_gemm_few_rows.yaml -o build-dev/fr/stream.hkpack --target sm_90a --kernel-option gemm_skinny=on
# then on an H100 (2026-12-07; 40 s):
export LD_LIBRARY_PATH=$PWD/build-dev HKC_KEY=$PWD/build-dev/signing.key
python3 tests/device/check.py build-dev/hkc tests/specs/op_gemm_few_rows.yaml build-dev/fr/stream.hkpack /tmp/fr_s \
  --gpu-target sm_90a > fr_stream.log
python3 bench/gen_device.py weights
python3 -c "import numpy as np; np.save('/tmp/p1024.npy', np.random.default_rng(0).integers(0, 128000, size=1024).astype(np.int32))"
for p in llama-3.2-1b llama-3.2-1b-alt; do   # -alt: gemm_stream=off
  build-dev/hkc generate build-dev/gen/$p.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
    --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 64 --profile > profile_b1_$p.log
done
