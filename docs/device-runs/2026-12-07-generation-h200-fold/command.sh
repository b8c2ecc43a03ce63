# Packs of commit 1622754 (per-bucket rmsnorm folds up to the clock's range: both norms of each
# layer folded at <= 32 / 128 rows; gemm_skinny at one row), built by
#   GEN_ALT_OPTIONS="gemm_norm=off" bash bench/gen_prepare.sh
# then on an H200 (2026-12-07; the call's device time ran out before the batch-32 point):
export GEN_PACK_LOGS=0 GEN_Q8=0 GEN_POINTS=8x1024,32x1024,1x1024 GEN_T_KV=0 GEN_T_CHECK=70 \
  GEN_MODELS=llama-3.2-1b GEN_T_BENCH=125 GEN_FAST=0 GEN_T_NCU=0 GEN_T_TP=0
timeout 215 bash bench/gen_call.sh
# 198 s. profile_b*_alt.log: llama-3.2-1b-alt (gemm_norm=off: no folds).
