#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU half of the tensor-parallel benchmark (after bench/tp_prepare.sh, build-dev/ carried), for
# a machine of 2 or more GPUs (device kinds nvidia-h100-x2 / -x4): the Llama-3-8B config with
# random weights (Hugging Face from_config, seed 0, bf16, save_pretrained), then per pack (whole,
# and split over each of TP_RANKS that this machine has GPUs for) one `hkc generate` of a
# 1024-token prompt and 64 new tokens -- time to first token (the prefill of 1024) and ms per
# decode step at batch 1 -- the ids of each split pack against the whole pack's (bf16 sums in
# another order: the first divergence is printed), and the same model under PyTorch tensor
# parallelism (bench/tp_torch.py under torchrun: transformers' tp_plan "auto", static cache) in
# the same call. The ranks run as threads of one process, rank r on GPU r, their NCCL
# communicator made by ncclCommInitAll (hkc run / generate do this for a tensor-parallel pack).
# Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key}
out=${OUT:-/tmp/tp-out}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name --format=csv,noheader
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))")
export LD_LIBRARY_PATH=$PWD/build-dev:$nccl
python3 - <<'PY'
import json, os, torch
from transformers import AutoConfig, AutoModelForCausalLM
path = "/tmp/tp_llama-3-8b"
if not os.path.exists(os.path.join(path, "config.json")):
    cfg = json.load(open("bench/tp_configs/llama-3-8b.json"))
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), torch_dtype=torch.bfloat16)
    m.save_pretrained(path, safe_serialization=True, max_shard_size="100GB")
import numpy as np
np.save("/tmp/tp_p1024.npy", np.random.default_rng(0).integers(0, 128000, size=1024).astype(np.int32))
PY
w=/tmp/tp_llama-3-8b/model.safetensors
for n in 0 ${TP_RANKS:-2 4}; do
  name=llama-3-8b-tp$n
  [ "$n" = 0 ] && name=llama-3-8b
  [ "$n" -le "$gpus" ] || { echo "== $name: skipped ($gpus GPUs)"; continue; }
  timeout 300 build-dev/hkc generate "build-dev/tp/$name.hkpack" --weights "$w" --weights-map build-dev/tp/llama-3-8b.map \
    --ids /tmp/tp_p1024.npy -n 64 > "$out/$name.log" 2>&1
  echo "== $name (rc $?)"; cat "$out/$name.log"
done
for n in ${TP_RANKS:-2 4}; do
  [ -s "$out/llama-3-8b-tp$n.log" ] || continue
  python3 - "$out/llama-3-8b.log" "$out/llama-3-8b-tp$n.log" <<'PY'
import sys
ids = [next((l.split(":", 1)[1].split() for l in open(p) if l.startswith("prompt")), []) for p in sys.argv[1:]]
k = next((i for i, (a, b) in enumerate(zip(*ids)) if a != b), None)
print("%s: %s" % (sys.argv[2], "same ids as the whole pack" if k is None and ids[0] else "ids differ from step %s" % k))
PY
done
for n in ${TP_RANKS:-2 4}; do
  [ "$n" -le "$gpus" ] || continue
  timeout 600 torchrun --nproc_per_node "$n" bench/tp_torch.py /tmp/tp_llama-3-8b /tmp/tp_p1024.npy 2>&1 |
    tee "$out/torch_tp$n.log" | tail -5
done
