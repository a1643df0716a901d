"""gemm()'s FP16 kernel and cuBLAS's at the same shapes, for Nsight Compute to read.

    ncu --profile-from-start off --metrics gpu__time_duration.sum,launch__grid_size,... \
        python scripts/ncu_vs_cublas.py 64x4096x4096 256x4096x4096
        python scripts/ncu_vs_cublas.py 8192x8192x8192 8192x8192x8192=fp16_wgmma:stream_k=True

For each M x N x K: torch.matmul (cuBLAS) and the plan gemm() makes (its
choice printed; after "=", a kernel variant as scripts/variants.py takes it), each launched once between cudaProfilerStart and Stop
after a warm-up, so that ncu profiles those launches only: the kernels'
names (cuBLAS's say its tile, stages and cluster), launch shapes and
counters side by side. ncu locks the clocks to base and serialises the
launches: its durations compare kernels with each other, not with
bench.py's times.
"""

import sys

import torch
from variants import variant

import numgemm


def main(argv):
    work = []
    for arg in argv:
        shape, _, spec = arg.partition("=")
        M, N, K = map(int, shape.split("x"))
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        plan = numgemm.plan_gemm(a, b, precision="fp16", kernel=variant(spec)[2] if spec else None)
        print(M, N, K, "numgemm runs" if spec else "numgemm picks", plan.cfg.name, flush=True)
        work.append((a, b, plan))
    for a, b, plan in work:
        torch.matmul(a, b)
        plan.launch()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for a, b, plan in work:
        torch.matmul(a, b)
        torch.cuda.synchronize()
        plan.launch()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
