# Packs of commit 094ea33 (rope folded into kv_append, kv_attention_warp / _mma the defaults, the
# decode-weighted fusion planner of 6ba0a69, gemm_skinny at M <= 8), built by
#   GEN_ALT_OPTIONS="gemm_skinny=off gemm_norm=off" bash bench/gen_prepare.sh
# then on an H100 (2026-12-07):
export GEN_PACK_LOGS=0 GEN_Q8=0 GEN_POINTS=1x1024,8x1024,32x1024,1x128,4x1024 GEN_T_KV=0 GEN_T_CHECK=150 \
  GEN_MODELS=llama-3.2-1b,qwen2.5-0.5b,tinyllama-1.1b GEN_T_BENCH=230 GEN_T_NCU=40 GEN_T_NCU_DETAIL=15 \
  GEN_NCU_PACKS=llama-3.2-1b GEN_T_TP=0
timeout 560 bash bench/gen_call.sh
# 254 s. The "alt" column of bench.log is llama-3.2-1b-alt: gemm_skinny=off gemm_norm=off.
