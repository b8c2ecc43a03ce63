# Packs of commit f34738e (kv_attention_warp with 8 lanes per key, argmax / sample greedy rows and
# the embedding in 16-byte loads; gemm_stream in its first form, 16-byte shared-memory loads
# multiplied on the CUDA cores), built by
#   GEN_ALT_OPTIONS="gemm_stream=off" bash bench/gen_prepare.sh
# then on an H100 (2026-12-07):
export GEN_PACK_LOGS=0 GEN_Q8=0 GEN_POINTS=1x1024,8x1024 GEN_T_KV=90 GEN_T_CHECK=130 \
  GEN_MODELS=llama-3.2-1b,qwen2.5-0.5b,tinyllama-1.1b GEN_T_BENCH=100 GEN_T_NCU=45 GEN_T_NCU_DETAIL=25 \
  GEN_NCU_PACKS=llama-3.2-1b GEN_T_TP=0 \
  GEN_NCU_DETAIL='kv_attention_bf16_a8_d64$:0 gemm_bf16_res_tb_a8_t31cbf03c:0 gemm_bf16_silu_dual_nrm_tb_a8_t31cbf03c:0 sample:1'
timeout 570 bash bench/gen_call.sh
# 246 s; the bench stage's time ran out after batch 1. "alt" in bench.log: gemm_stream=off.
