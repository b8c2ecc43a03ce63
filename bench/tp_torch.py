#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch peer of the tensor-parallel benchmark (bench/tp_call.sh), one process per GPU under
torchrun: the checkpoint loaded with transformers' tensor-parallel plan (tp_plan="auto": the
Llama projections split column / row over the ranks, NCCL all-reduces), greedy generate with
the static cache; time to first token for the prompt and ms per decode token as
(t(64 new) - t(16 new)) / 48, medians of 3 after a warm-up, printed by rank 0.

    torchrun --nproc_per_node 2 bench/tp_torch.py CHECKPOINT_DIR PROMPT.npy
"""
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM


def timed(model, ids, n):
    times = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, cache_implementation="static")
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def main():
    path, prompt = sys.argv[1], sys.argv[2]
    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.bfloat16, tp_plan="auto").eval()
    model.generation_config.pad_token_id = 0
    rank = dist.get_rank()
    ids = torch.tensor(np.load(prompt)[None, :], device="cuda", dtype=torch.long)
    with torch.no_grad():
        model.generate(ids, max_new_tokens=16, do_sample=False, cache_implementation="static")  # warm-up
        t1 = timed(model, ids, 1)
        t16 = timed(model, ids, 16)
        t64 = timed(model, ids, 64)
    if rank == 0:
        print("torch tp%d: time to first token %.3f ms, decode %.3f ms per token" %
              (dist.get_world_size(), t1 * 1e3, (t64 - t16) / 48 * 1e3))


if __name__ == "__main__":
    main()
