#!/usr/bin/env python3
"""PyTorch CPU matmul, single thread, f32 and bf16, at N x N x N (the
reference for bench_bf16_gemm; same sizes, best of several calls).
Usage: bf16_torch.py [N]   Prints GFLOP/s lines and the bf16/f32 ratio."""
import sys
import time

import torch

torch.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
reps = 5
flops = 2.0 * n * n * n
res = {}
for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    g = torch.Generator().manual_seed(1)
    a = (torch.rand(n, n, generator=g) - 0.5).to(dt)
    b = (torch.rand(n, n, generator=g) - 0.5).to(dt)
    torch.matmul(a, b)
    best = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t0)
    res[name] = best
    print("  torch %-4s matmul  %8.2f GFLOP/s  %8.2f ms" % (name, flops / best * 1e-9, best * 1e3))
print("torch %s, mkldnn bf16 %s; ratio torch bf16/f32 throughput %.2f"
      % (torch.__version__, torch.backends.mkldnn.is_available(), res["f32"] / res["bf16"]))
