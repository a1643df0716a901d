"""Where the host time of a repeated gemm() goes: each piece of its path
timed alone (median of 2000 calls, no synchronisation, so a figure is host
time only), then a cProfile of gemm() calls returning a new C with A at a
new address each call (the path a model's layers take).

    python scripts/call_costs.py [fp16|int8] [M N K]
"""

import cProfile
import pstats
import statistics
import sys
import time

import torch

import numgemm
from numgemm import api, driver, frameworks
from numgemm.precision import PRECISIONS


def host_us(call, n=2000):
    for _ in range(50):
        call()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        call()
        samples.append(time.perf_counter_ns() - t0)
    torch.cuda.synchronize()
    return statistics.median(samples) / 1e3


def main(argv):
    precision = argv[0] if argv else "fp16"
    M, N, K = map(int, argv[1:4]) if len(argv) >= 4 else (512, 512, 512)
    floating = PRECISIONS[precision].kind == "float"
    if floating:
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(N, K, device="cuda", dtype=torch.float16).t()
    else:
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8).t()
    out = numgemm.gemm(a, b)
    many = [a.clone() for _ in range(3)]
    turn = iter(range(1 << 40))
    dev = a.device.index
    key, addresses, handle, _, _ = api._call(a, b, None, None, (None, None, "tuned", None, "None"))
    repeat = api._REPEATS[key]
    spare = torch.empty_like(out)
    binds = iter(range(1 << 40))
    c_at = (addresses[2] if addresses[2] else repeat.bound[2], spare.data_ptr())
    pieces = {
        "frameworks.describe(a)": lambda: frameworks.describe(a),
        "frameworks.current_stream": lambda: frameworks.current_stream("torch", dev),
        "driver.current_context": driver.current_context,
        "driver.capturing": lambda: driver.capturing(0),
        "api._call(a, b, None)": lambda: api._call(a, b, None, None, (None, None, "tuned", None, "None")),
        "api._REPEATS[key]": lambda: api._REPEATS[key],
        "Repeat.new_c (C from torch)": lambda: repeat.new_c("torch", dev, handle, True),
        "Repeat._bind (C moved)": lambda: repeat._bind((*addresses[:2], c_at[next(binds) % 2]), handle),
        "Launch() alone": lambda: repeat.launch(handle),
        "torch.empty(C)": lambda: torch.empty((M, N), dtype=out.dtype, device=dev),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b) if floating else torch._int_mm(a, b),
        "gemm(a, b, out=)": lambda: numgemm.gemm(a, b, out=out),
        "gemm(a, b)": lambda: numgemm.gemm(a, b),
        "gemm(a at a new address, b)": lambda: numgemm.gemm(many[next(turn) % 3], b),
    }
    print(f"# {torch.cuda.get_device_name()}, {precision} {M}x{N}x{K}: host microseconds, median of 2000")
    for name, call in pieces.items():
        print(f"{name:>30} {host_us(call):8.2f}", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3000):
        numgemm.gemm(many[next(turn) % 3], b)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
