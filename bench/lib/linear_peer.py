#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""F.linear (cuBLAS) on gemm_short.yaml's launches, bf16, each captured 20 times in one CUDA
graph and replayed (GPU time only), median of 50 replays after warm-up: the peer for
`hkc run gemm_short.hkpack --profile`, measured in the same device call."""
import torch
import torch.nn.functional as F

SHAPES = [("bert_qkv", 128, 2304, 768), ("bert_o", 128, 768, 768), ("bert_ffn_up", 128, 3072, 768),
          ("bert_ffn_down", 128, 768, 3072), ("llama_q", 512, 4096, 4096), ("llama_k", 512, 1024, 4096),
          ("llama_up", 512, 14336, 4096), ("llama_down", 512, 4096, 14336)]
REPS = 20
for name, m, n, k in SHAPES:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    for _ in range(3):
        F.linear(x, w)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            y = F.linear(x, w)
    for _ in range(5):
        g.replay()
    times = []
    for _ in range(50):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / REPS)
    times.sort()
    us = times[len(times) // 2]
    print("%-14s M=%-4d N=%-5d K=%-5d F.linear %8.2f us  %6.1f TFLOP/s" % (name, m, n, k, us, 2 * m * n * k / us / 1e6))
