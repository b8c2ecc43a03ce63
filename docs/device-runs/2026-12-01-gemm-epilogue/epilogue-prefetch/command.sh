python3 bench/gemm_bars.py prepare --configs "0,1,256,3,1,1,1;0,1,256,4,1,1,1;1,1,256,4,1,1,0;1,1,256,4,1,1,1;1,1,128,7,1,1,1" --only "epi|big_bf16_4096x4096x4096|odd|big_bf16_4096x3072"
# device:
python3 bench/gemm_bars.py run --out $OUT/bars.jsonl > $OUT/bars.log
