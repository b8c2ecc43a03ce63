# here:
python3 bench/gemm_bars.py prepare --configs "1,2,128,6,1,2;1,1,256,4,1,2;0,1,256,4,1,1,1" --only "epi|big_bf16_4096x4096x4096|odd_f16|swiglu_bf16_77"
set -u
python3 bench/gemm_bars.py run --out $OUT/bars.jsonl > $OUT/bars.log 2>&1; echo "bars rc=$? numerics fails: $(grep -c 'NUMERICS FAIL' $OUT/bars.log)"
cat $OUT/bars.log
for c in big_bf16_4096x4096x4096 epi_bf16_4096x4096x4096; do
  timeout 90 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --launch-count 1 \
    build-dev/hkc run "build-dev/bench/gemm/$c.hkpack" --batch 1 --runs 1 --warmup 0 > "$OUT/ncu_$c.txt" 2>&1
  grep -E "Duration|Executed Instructions |Issue Slots Busy|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Stall|Warp Cycles Per Issued" "$OUT/ncu_$c.txt" | head -20
done
