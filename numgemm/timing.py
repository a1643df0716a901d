"""Timing GPU work without timing the host.

A numba-cuda launch costs ~100 us of host time, more than a small GEMM runs,
so back-to-back launches would measure the host. Here each batch of timed
launches is queued behind a kernel that spins on the GPU's clock long enough
for the host to enqueue them all; CUDA events around each launch then see
the GPU alone. Times are medians after warm-up.
"""

import statistics
import time

import numpy as np
from llvmlite import ir
from numba import cuda, types
from numba.cuda.extending import intrinsic


@intrinsic
def _globaltimer(typingctx):
    def codegen(context, builder, sig, args):
        fn = ir.InlineAsm(ir.FunctionType(ir.IntType(64), []), "mov.u64 $0, %globaltimer;",
                          "=l", side_effect=True)
        return builder.call(fn, [])
    return types.uint64(), codegen


@cuda.jit
def _spin(ns):
    start = _globaltimer()
    while _globaltimer() - start < ns:
        pass


def time_gpu(run, *, warmup=2, repeats=10, rotate=None):
    """Median milliseconds of run() on the GPU, and every sample.

    run(i) enqueues the work for repeat i (rotate inputs with i where the
    working set fits in L2); it must not synchronize.
    """
    for i in range(warmup):
        run(i)
    cuda.synchronize()
    starts = [cuda.event() for _ in range(repeats)]
    ends = [cuda.event() for _ in range(repeats)]
    t0 = time.perf_counter()
    run(0)                                   # how long the host takes to enqueue one
    host = time.perf_counter() - t0
    cuda.synchronize()
    # Long enough for the host to enqueue every launch and event behind it.
    _spin[1, 1](np.uint64(min(2e8, 1e6 + 3 * repeats * (host + 20e-6) * 1e9)))
    for i in range(repeats):
        starts[i].record()
        run(i)
        ends[i].record()
    ends[-1].synchronize()
    samples = [cuda.event_elapsed_time(s, e) for s, e in zip(starts, ends)]
    return statistics.median(samples), samples


def time_host(call, repeats=20):
    """Median microseconds the host spends in call() (no synchronization)."""
    call()
    cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
        cuda.synchronize()
    return statistics.median(samples) * 1e6
