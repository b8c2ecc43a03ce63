#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One device call of the generation check and benchmark (after bench/gen_prepare.sh on the CPU
# machine, with build-dev/ carried): kv_append + kv_attention against NumPy, greedy tokens
# against Hugging Face, the decode step's per-launch profile (Llama-3.2-1B, batch 1, context
# 1024), then ms/token and time to first token against Hugging Face at GEN_POINTS. Logs in
# $OUT (default /tmp/gen-out). Each stage has a time limit (seconds: GEN_T_KV, GEN_T_CHECK,
# GEN_T_BENCH; 0 skips the stage; GEN_Q8=0 skips the 8-bit packs) so the whole call ends inside one
# device command.
set -uo pipefail
cd "$(dirname "$0")/.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key} # packs built on one machine run on the other: both trust this key (docs/CLI.md, "Signing")
out=${OUT:-/tmp/gen-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/build-dev PYTHONPATH=$PWD/python HKRT_LIBRARY=$PWD/build-dev/libhkrt.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
[ "${GEN_T_KV:-120}" -gt 0 ] &&
  timeout "${GEN_T_KV:-120}" python3 tests/device/kv_attention_check.py build-dev/hkc sm_90a 2>&1 | tee "$out/kv_check.log"
if [ "${GEN_T_CHECK:-200}" -gt 0 ]; then
  timeout "${GEN_T_CHECK:-200}" python3 bench/gen_device.py check 2>&1 | tee "$out/gen_check.log"
else # the checkpoint the profiles below bind
  timeout 120 python3 bench/gen_device.py weights 2>&1 | tee "$out/gen_weights.log"
fi
python3 -c "import numpy as np; np.save('/tmp/p1024.npy', np.random.default_rng(0).integers(0, 128000, size=1024).astype(np.int32))"
timeout 60 build-dev/hkc generate build-dev/gen/llama-3.2-1b.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
  --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 64 --profile > "$out/profile_b1.log" 2>&1
head -60 "$out/profile_b1.log"
timeout 60 build-dev/hkc generate build-dev/gen/llama-3.2-1b-alt.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
  --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 64 --profile > "$out/profile_b1_alt.log" 2>&1
head -30 "$out/profile_b1_alt.log"
# the decode step at batch 8 (8 prompts of 1024 tokens, the pack's bucket of 8 rows)
python3 -c "import numpy as np; [np.save('/tmp/p1024_%d.npy' % i, np.random.default_rng(10 + i).integers(0, 128000, size=1024).astype(np.int32)) for i in range(8)]"
timeout 60 build-dev/hkc generate build-dev/gen/llama-3.2-1b.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
  --weights-map build-dev/gen/llama-3.2-1b.map $(for i in 0 1 2 3 4 5 6 7; do printf -- '--ids /tmp/p1024_%d.npy ' $i; done) \
  -n 16 --profile > "$out/profile_b8.log" 2>&1
grep -v '^prompt' "$out/profile_b8.log" | head -24
timeout 60 build-dev/hkc generate build-dev/gen/llama-3.2-1b-alt.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
  --weights-map build-dev/gen/llama-3.2-1b.map $(for i in 0 1 2 3 4 5 6 7; do printf -- '--ids /tmp/p1024_%d.npy ' $i; done) \
  -n 16 --profile > "$out/profile_b8_alt.log" 2>&1
grep -v '^prompt' "$out/profile_b8_alt.log" | head -24
# 8-bit weights: the checkpoint quantized here (int8, per output channel); the folded pack (its
# decode gemms read the 8-bit bytes: gemm_skinny) against the unfolded one (dequant launches, the
# same products) -- the same greedy ids expected -- then its decode step beside the bf16 packs'
if [ "${GEN_Q8:-1}" != 0 ] && [ -f build-dev/gen/llama-3.2-1b-q8.hkpack ]; then
  timeout 120 build-dev/hkc quantize /tmp/gen_llama-3.2-1b/model.safetensors -o /tmp/gen_llama-3.2-1b/model_q8.safetensors \
    --dtype int8 -q
  for p in llama-3.2-1b-q8 llama-3.2-1b-q8-unfolded llama-3.2-1b-s8-fast; do
    w=/tmp/gen_llama-3.2-1b/model_q8.safetensors map=build-dev/gen/llama-3.2-1b-q8.map
    [ $p = llama-3.2-1b-s8-fast ] && w=/tmp/gen_llama-3.2-1b/model.safetensors map=build-dev/gen/llama-3.2-1b-s8.map
    timeout 60 build-dev/hkc generate build-dev/gen/$p.hkpack --weights $w --weights-map $map --ids /tmp/p1024.npy -n 64 \
      --profile > "$out/profile_b1_$p.log" 2>&1
    echo "== $p (rc $?)"; head -60 "$out/profile_b1_$p.log"
  done
  grep '^prompt' "$out/profile_b1_llama-3.2-1b-q8.log" > /tmp/q8_ids.txt
  grep '^prompt' "$out/profile_b1_llama-3.2-1b-q8-unfolded.log" > /tmp/q8u_ids.txt
  cmp -s /tmp/q8_ids.txt /tmp/q8u_ids.txt && [ -s /tmp/q8_ids.txt ] && echo "8-bit: folded and unfolded packs, same ids" ||
    { echo "8-bit: folded and unfolded ids differ"; cat /tmp/q8_ids.txt /tmp/q8u_ids.txt; }
fi
# sampling on the device: the same seed twice gives the same ids; the time per step beside greedy's
for i in 1 2; do
  timeout 60 build-dev/hkc generate build-dev/gen/llama-3.2-1b.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
    --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 32 --temperature 0.8 --top-k 50 --top-p 0.9 \
    --sample-seed 3 > "$out/sample_$i.log" 2>&1
done
cat "$out/sample_1.log"; cmp -s <(grep '^prompt' "$out/sample_1.log") <(grep '^prompt' "$out/sample_2.log") && echo "sampling: same seed, same output" ||
  { echo "sampling: runs differ"; cat "$out/sample_2.log"; }
# the decode step's kernels under Nsight Compute (prompt 1024, one decode step after the prefill;
# the decode kernels are the last launches): time, DRAM bytes and bandwidth share per kernel
if command -v ncu >/dev/null && [ "${GEN_T_NCU:-150}" -gt 0 ]; then
  for p in ${GEN_NCU_PACKS:-llama-3.2-1b llama-3.2-1b-alt}; do
    timeout "${GEN_T_NCU:-150}" ncu --clock-control none --csv --metrics \
      gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread \
      build-dev/hkc generate build-dev/gen/$p.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
      --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 2 > "$out/ncu_$p.csv" 2>&1
    echo "ncu $p: rc $? $(grep -c gpu__time_duration "$out/ncu_$p.csv") kernel rows"
  done
  # one decode-step launch of each kind in detail, the pack GEN_NCU_DETAIL_PACK (default
  # llama-3.2-1b; kernel:launches skipped -- a layer kernel's 16 of the prefill; the skinny GEMMs,
  # mb=1, run in decode steps only): throughput, memory, warp stalls, occupancy
  detail="kv_attention:17 gemm_bf16_res_tb_a8_t0be467e2:2 gemm_bf16_silu_dual_nrm_tb_a8_t0be467e2:1"
  detail+=" gemm_bf16_nrm_tb_a8_t0be467e2:1 kv_append:17"
  for ks in ${GEN_NCU_DETAIL:-$detail}; do
    k=${ks%:*}
    timeout "${GEN_T_NCU_DETAIL:-30}" ncu --clock-control none --kernel-name "regex:$k" --launch-skip "${ks#*:}" --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats build-dev/hkc generate build-dev/gen/${GEN_NCU_DETAIL_PACK:-llama-3.2-1b}.hkpack \
      --weights /tmp/gen_llama-3.2-1b/model.safetensors --weights-map build-dev/gen/llama-3.2-1b.map \
      --ids /tmp/p1024.npy -n 2 > "$out/ncu_detail_$k.log" 2>&1
    echo "ncu detail $k: rc $?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Registers|Achieved Occupancy|Stall|Warp Cycles Per Issued" "$out/ncu_detail_$k.log" | head -12
  done
  # GEN_NCU_SOURCE ("regex:skip ..."): the hottest SASS lines of those launches by stall samples
  for ks in ${GEN_NCU_SOURCE:-}; do
    k=${ks%:*} rep=/tmp/ncu_src_$$
    timeout "${GEN_T_NCU_DETAIL:-30}" ncu --clock-control none --kernel-name "regex:$k" --launch-skip "${ks#*:}" \
      --launch-count 1 --section SourceCounters --section WarpStateStats --export "$rep" -f \
      build-dev/hkc generate build-dev/gen/${GEN_NCU_DETAIL_PACK:-llama-3.2-1b}.hkpack \
      --weights /tmp/gen_llama-3.2-1b/model.safetensors --weights-map build-dev/gen/llama-3.2-1b.map \
      --ids /tmp/p1024.npy -n 2 > /dev/null 2>&1
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/ncu_source_${k//[^A-Za-z0-9_]/}.csv" 2>&1
    echo "ncu source $k:"; python3 bench/lib/ncu_hot.py "$out/ncu_source_${k//[^A-Za-z0-9_]/}.csv" 25
  done
fi
# decode ms/token and time to first token against Hugging Face (last: the stage that gets what time is left)
[ "${GEN_T_BENCH:-300}" -gt 0 ] && timeout "${GEN_T_BENCH:-300}" python3 bench/gen_device.py bench 2>&1 | tee "$out/bench.log"
# tensor parallelism over one rank: NCCL (PyTorch's libnccl.so.2) with a communicator of this
# GPU, the collectives inside the captured graph: the tiny Llama split equals its whole pack
# token for token; Llama-3.2-1B split against whole, ms per decode step (the all_reduce copies)
if [ "${GEN_T_TP:-0}" -gt 0 ] && [ -f build-dev/gen/tiny-tp1.hkpack ]; then
  nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null ||
         dirname "$(find / -name 'libnccl.so.2' 2>/dev/null | head -1)")
  echo "NCCL: $nccl"
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$nccl
  python3 tests/integration/gen_reference.py weights tests/integration/gen_configs/llama.json /tmp/tiny.safetensors > /dev/null
  python3 -c "import numpy as np; [np.save('/tmp/t%d.npy' % n, np.random.default_rng(n).integers(0, 200, size=n).astype(np.int32)) for n in (3, 11, 29)]"
  for p in tiny tiny-tp1; do
    timeout "${GEN_T_TP}" build-dev/hkc generate build-dev/gen/$p.hkpack --weights /tmp/tiny.safetensors \
      --weights-map build-dev/gen/tiny.map --ids /tmp/t3.npy --ids /tmp/t11.npy --ids /tmp/t29.npy -n 16 \
      > "$out/tp_$p.log" 2>&1
    echo "== $p (rc $?)"; cat "$out/tp_$p.log"
  done
  cmp -s <(grep '^prompt' "$out/tp_tiny.log") <(grep '^prompt' "$out/tp_tiny-tp1.log") && [ -s "$out/tp_tiny.log" ] &&
    echo "tensor parallel (1 rank, NCCL): same ids as the whole pack" || echo "tensor parallel (1 rank, NCCL): ids differ"
  for p in llama-3.2-1b llama-3.2-1b-tp1; do
    timeout "${GEN_T_TP}" build-dev/hkc generate build-dev/gen/$p.hkpack --weights /tmp/gen_llama-3.2-1b/model.safetensors \
      --weights-map build-dev/gen/llama-3.2-1b.map --ids /tmp/p1024.npy -n 64 > "$out/tp_$p.log" 2>&1
    echo "== $p (rc $?)"; tail -3 "$out/tp_$p.log"
  done
fi
# at most 8 files come back from a device call: the logs travel as one archive
if [ -n "${GEN_PACK_LOGS:-1}" ] && [ "${GEN_PACK_LOGS:-1}" != 0 ]; then
  tar czf /tmp/gen-logs.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/gen-logs.tgz "$out/"
fi
