# Packs of commit 6f40867 (gemm_stream on the tensor cores, its A staged one element a thread at
# a time, which the next commit replaced; the greedy sampler's 16 loads in flight), built by
#   GEN_ALT_OPTIONS="gemm_stream=off" bash bench/gen_prepare.sh
#   hkc build tests/specs/op_gemm_few_rows.yaml -o build-dev/fr/stream.hkpack --target sm_90a --kernel-option gemm_skinny=on
#   hkc build tests/specs/op_gemm_few_rows.yaml -o build-dev/fr/skinny.hkpack --target sm_90a \
#     --kernel-option gemm_skinny=on --kernel-option gemm_stream=off
# then on an H100 (2026-12-07), two commands on the same machine:
export GEN_PACK_LOGS=0 GEN_Q8=0 GEN_POINTS=1x1024,8x1024 GEN_T_KV=0 GEN_T_CHECK=125 GEN_T_BENCH=90 GEN_T_NCU=0 \
  GEN_NCU_PACKS=llama-3.2-1b GEN_T_TP=0
timeout 380 bash bench/gen_call.sh                       # 173 s: call.log, bench.log, profiles
export LD_LIBRARY_PATH=$PWD/build-dev HKC_KEY=$PWD/build-dev/signing.key
for p in stream skinny; do                                # fr_*.log: every batch, every output ok
  python3 tests/device/check.py build-dev/hkc tests/specs/op_gemm_few_rows.yaml build-dev/fr/$p.hkpack /tmp/fr_$p \
    --gpu-target sm_90a
done
# det_*.log, src_*.csv.gz: one decode-step launch under Nsight Compute (SourceCounters, WarpStateStats,
# SpeedOfLight), the source page's hottest lines by bench/lib/ncu_hot.py
for ks in 'kv_attention_bf16_a8_d64$:0' 'gemm_bf16_res_tb_a8_t31cbf03c:0'; do
  k=${ks%:*}; n=${k//[^A-Za-z0-9_]/}
  ncu --clock-control none --kernel-name "regex:$k" --launch-skip "${ks#*:}" --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --export /tmp/r_$n -f build-dev/hkc generate \
    build-dev/gen/llama-3.2-1b.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
    --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 2
  ncu -i /tmp/r_$n.ncu-rep --page source --csv --print-source sass > src_$n.csv
  ncu -i /tmp/r_$n.ncu-rep > det_$n.log
  python3 bench/lib/ncu_hot.py src_$n.csv 22
done
