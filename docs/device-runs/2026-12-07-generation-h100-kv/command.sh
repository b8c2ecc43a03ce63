# Packs of commit f830d93 (bench/gen_prepare.sh on the CPU machine; llama-3.2-1b-fast = the default
# pack plus --kernel-option kv_warp=on --kernel-option kv_mma=on), then on an H100 (2026-12-07):
export GEN_PACK_LOGS=0 GEN_Q8=0 GEN_POINTS=1x1024,8x1024,32x1024,1x128 GEN_T_KV=70 GEN_T_CHECK=200 \
  GEN_T_BENCH=200 GEN_T_NCU=40 GEN_T_NCU_DETAIL=15 GEN_NCU_PACKS=llama-3.2-1b-fast GEN_T_TP=0
timeout 575 bash bench/gen_call.sh
# 332 s. bench.log's "opt-in attention kernels" column is the -fast pack (the bench script of then).
