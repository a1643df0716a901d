"""Sustained SM clock and board power of numgemm's FP16 wgmma kernel and cuBLAS at 8192^3.

    python results/2026-12-02-h200-fp16-clocks/clocks.py [seconds]

Each runs back to back for `seconds` (default 3; the same A, B and a float16 C),
NVML sampled every 20 ms from a thread (numgemm.timing.gpu_state); the first
half second is dropped. Printed: the samples' median SM clock and power, and
the time a launch took over the whole stretch (CUDA events), in turns:
numgemm, cuBLAS, numgemm, cuBLAS.
"""

import statistics
import sys
import threading
import time

import torch

from numgemm.api import plan_gemm
from numgemm.timing import gpu_state

N = 8192
SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0


def sustained(launch):
    samples, stop = [], threading.Event()

    def sample():
        t0 = time.perf_counter()
        while not stop.is_set():
            s = gpu_state()
            if time.perf_counter() - t0 > 0.5 and s:
                samples.append(s)
            time.sleep(0.02)
    th = threading.Thread(target=sample)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    th.start()
    start.record()
    launches, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < SECONDS:
        for _ in range(20):
            launch()
        launches += 20
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    stop.set()
    th.join()
    return (start.elapsed_time(end) / launches, statistics.median(s["sm_mhz"] for s in samples),
            statistics.median(s["power_w"] for s in samples), len(samples))


def main():
    torch.manual_seed(0)
    a = torch.randn(N, N, dtype=torch.float16, device="cuda")
    b = torch.randn(N, N, dtype=torch.float16, device="cuda")
    c = torch.empty(N, N, dtype=torch.float16, device="cuda")
    plan = plan_gemm(a, b, kernel="fp16_wgmma_c16", out=c, out_dtype="float16")
    runs = {"fp16_wgmma_c16": plan.launch, "cublas_fp16 (torch.matmul)": lambda: torch.matmul(a, b, out=c)}
    for _ in range(2):
        for name, launch in runs.items():
            launch()
            torch.cuda.synchronize()
            ms, mhz, w, n = sustained(launch)
            print(f"{name:28s} {ms:.4f} ms a launch, SM {mhz:.0f} MHz, {w:.0f} W (median of {n} samples)", flush=True)


if __name__ == "__main__":
    main()
