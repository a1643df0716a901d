"""What a gemm() call costs, whole: its median wall time with the
synchronisation, into a given out= and returning a new C (a torch tensor, as
torch's own call does; for FP16 also C in float16, as torch.matmul returns
it), and returning a new C with A at a new address each call (three A's in
turn, as a model's activations come), against plan.launch() and PyTorch's
own call on the same device arrays (torch.matmul for fp16, torch._int_mm for
int8).

    python scripts/host_overhead.py            # the shapes of issue 20's table

Each figure is the median of 200 calls after 20 warm-ups, each call followed
by torch.cuda.synchronize(); the kernel's own time is inside all three. The
default kernel for the shape (gemm()'s choice) is the one timed.
"""

import statistics
import sys
import time

import torch

import numgemm
from numgemm.precision import PRECISIONS

SHAPES = [("fp16", 512, 512, 512), ("int8", 512, 512, 512), ("fp16", 1, 8192, 8192), ("fp16", 16, 8192, 8192),
          ("int8", 64, 8192, 8192), ("int8", 2048, 2048, 2048)]


def wall_us(call, repeats=200, warmup=20):
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def main():
    print(f"{'shape':>22} {'gemm(out=) us':>14} {'gemm() us':>10} {'f16 C us':>9} {'new a us':>9} "
          f"{'launch us':>10} {'torch us':>9} {'gemm/torch':>10} {'gemm()/torch':>12} {'f16/torch':>9} "
          f"{'new a/torch':>11}  kernel")
    for precision, M, N, K in SHAPES:
        if PRECISIONS[precision].kind == "float":
            a = torch.randn(M, K, device="cuda", dtype=torch.float16)
            b = torch.randn(K, N, device="cuda", dtype=torch.float16)
            out = torch.empty(M, N, device="cuda", dtype=torch.float32)
            peer = lambda: torch.matmul(a, b)       # noqa: E731
            f16 = dict(out_dtype=torch.float16)
        else:
            a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
            b = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8).t()
            out = torch.empty(M, N, device="cuda", dtype=torch.int32)
            peer = (lambda: torch._int_mm(a, b)) if M > 16 else None
            f16 = None
        plan = numgemm.plan_gemm(a, b, out=out)
        g = wall_us(lambda: numgemm.gemm(a, b, out=out))
        new = wall_us(lambda: numgemm.gemm(a, b))
        half = wall_us(lambda: numgemm.gemm(a, b, **f16)) if f16 else float("nan")
        many, turn = [a.clone() for _ in range(3)], iter(range(1 << 30))
        moved = wall_us(lambda: numgemm.gemm(many[next(turn) % 3], b))
        p = wall_us(plan.launch)
        t = wall_us(peer) if peer is not None else float("nan")
        print(f"{precision + ' ' + f'{M}x{N}x{K}':>22} {g:14.1f} {new:10.1f} {half:9.1f} {moved:9.1f} {p:10.1f} "
              f"{t:9.1f} {g / t:10.2f} {new / t:12.2f} {half / t:9.2f} {moved / t:11.2f}  {plan.cfg.name}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
