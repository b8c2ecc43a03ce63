# 2026-12-07, NVIDIA H100 80GB HBM3 (driver 580.159.04, torch 2.11.0+cu130, transformers 5.17.0),
# packs built by `bash bench/gen_prepare.sh` at commit e6cb9a8 (build-dev/gen/commit.txt) and carried.
# The device time left allowed a shortened call (no Hugging Face timing, no ncu):
export GEN_PACK_LOGS=0 GEN_POINTS=1x1024 GEN_T_KV=30 GEN_T_CHECK=100 GEN_T_BENCH=0 GEN_T_NCU=0 GEN_T_TP=20
timeout 200 bash bench/gen_call.sh > $OUT/call.log 2>&1
# then, on the same warm machine, the greedy check of the two configs the first call's time cut:
GEN_MODELS=qwen2.5-0.5b,tinyllama-1.1b timeout 105 python3 bench/gen_device.py check   # -> gen_check_2.log
