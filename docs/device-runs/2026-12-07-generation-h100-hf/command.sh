# Packs of commit ac6c914 (bench/gen_prepare.sh on the CPU machine), then on an H100 (2026-12-07):
export GEN_PACK_LOGS=0 GEN_Q8=0 GEN_POINTS=1x1024,8x1024,32x1024,1x128 GEN_T_KV=40 GEN_T_CHECK=170 \
  GEN_T_BENCH=210 GEN_T_NCU=45 GEN_T_TP=0
timeout 575 bash bench/gen_call.sh
# The check reached llama-3.2-1b and llama-3.2-1b-fast (the opt-in kernels) inside its 170 s; the
# bench, b1 and b8 at context 1024 inside its 210 s (b32 and 1x128 not reached).
