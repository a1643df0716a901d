"""The microbenchmarks the bench measures beside the kernels, in the same run:
each instruction's ceiling (a register-only mma.sync loop, wgmma with its
operands in shared memory), the device-to-device copy's bandwidth, and
what a PTX routine costs as a call rather than inline (--linkage-cost)."""

import math

import numpy as np

from .precision import PRECISIONS

# --- the mma.sync ceiling ----------------------------------------------------------

def measure_ceilings(steady=False):
    """T(FL)OPS of register-only mma.sync loops (8 independent chains a warp),
    per instruction: the ceiling of each precision's mma.sync (steady: as
    timed_loop measures in steady state, like the kernels)."""
    from numba import cuda

    from . import primitives as P
    from .kernel.regs import getter, setter

    dev = cuda.get_current_device()
    blocks = dev.MULTIPROCESSOR_COUNT * 4
    out = {}
    for prec in PRECISIONS.values():
        name, k = prec.ceiling, prec.ceiling_k
        r = P.ROUTINES[name]
        na, nb, nc = (len(op.regs) for op in r.inputs)
        acc_t = {"f32": np.float32, "s32": np.int32}[r.output.ptxtype]
        get_a, get_b, get_c, put_c = getter(na), getter(nb), getter(nc), setter(nc)
        mma = getattr(P, name)

        @cuda.jit
        def kernel(res, iters):
            tid = cuda.threadIdx.x
            fa = cuda.local.array(4, np.uint32)
            fb = cuda.local.array(2, np.uint32)
            for i in range(4):
                fa[i] = np.uint32(tid * 2654435761 + i)
            for i in range(2):
                fb[i] = np.uint32(tid * 40503 + i)
            acc = cuda.local.array(32, acc_t)
            for i in range(32):
                acc[i] = 0
            for _ in range(iters):
                for c in range(8):
                    put_c(acc, c * 4, mma(get_a(fa, 0), get_b(fb, 0), get_c(acc, c * 4)))
            s = acc[0]
            for i in range(1, 32):
                s += acc[i]
            res[cuda.grid(1)] = s

        res = cuda.device_array(blocks * 256, acc_t)
        ms, iters = timed_loop(lambda n: kernel[blocks, 256](res, n), steady)
        out[name] = 2 * 16 * 8 * k * 8 * iters * blocks * 8 / (ms * 1e-3) / 1e12
    if tuple(dev.compute_capability) >= (9, 0):
        out.update(measure_wgmma_ceilings(steady))
    return out


def timed_loop(launch, steady=False):
    """(ms, iterations) of a ceiling loop: launch(16) compiles and warms up, then
    launch(n) is timed with CUDA events, n growing 4x from 256 until a launch
    takes over 20 ms. steady: then a launch of about 200 ms warms the GPU to
    the clock the power limit leaves, and one of about 100 ms right behind it
    is the one timed (timing.Steady's window)."""
    from numba import cuda

    launch(16)
    iters = 256
    while True:
        start, end = cuda.event(), cuda.event()
        start.record()
        launch(iters)
        end.record()
        end.synchronize()
        ms = cuda.event_elapsed_time(start, end)
        if ms > 20 or iters > 1 << 20:
            break
        iters *= 4
    if not steady:
        return ms, iters
    per_ms = ms / iters
    launch(max(iters, int(200 / per_ms)))       # the warm-up, then the timed launch straight after it
    iters = max(iters, int(100 / per_ms))
    start, end = cuda.event(), cuda.event()
    start.record()
    launch(iters)
    end.record()
    end.synchronize()
    return cuda.event_elapsed_time(start, end), iters


def measure_wgmma_ceilings(steady=False):
    """T(FL)OPS of wgmma with its operands in shared memory (sm_90a): per
    precision, three warpgroups a block, one block a SM, each issuing the
    wgmma kernels' own k-tile (their warp routine's compute: fence, four
    chained m64n256 wgmmas, commit), then waiting for all but the newest
    group, as their k loop does. No copies: the instruction's ceiling."""
    from numba import cuda

    from . import primitives as P
    from . import registry
    from .kernel import warp_wgmma

    dev = cuda.get_current_device()
    blocks, threads = dev.MULTIPROCESSOR_COUNT, 384
    out = {}
    for prec in PRECISIONS.values():
        if not prec.wgmma:
            continue
        cfg = next(c for c in registry.REGISTRY["tuned"].values() if c.op == "wgmma" and c.precision == prec.name)
        routine = warp_wgmma.routine(cfg)
        init, compute = routine.init, routine.compute
        wait_1, wait_0 = warp_wgmma.wait_1, warp_wgmma.wait_0
        acc_t = np.float32 if prec.acc == "f32" else np.int32
        n_acc = len(P.ROUTINES[prec.wgmma].output.regs)

        @cuda.jit
        def kernel(res, iters):
            sm = cuda.shared.array(48 * 1024, np.uint8)    # A and B tiles; their values do not matter
            base = (P.shared_addr(sm, 0) + np.uint32(1023)) & np.uint32(0xFFFFFC00)
            acc = init()
            for _ in range(iters):
                compute(acc, base, base + np.uint32(8192))
                wait_1()
            wait_0()
            s = acc[0]
            for i in range(1, n_acc):
                s += acc[i]
            res[cuda.grid(1)] = s

        res = cuda.device_array(blocks * threads, acc_t)
        ms, iters = timed_loop(lambda n: kernel[blocks, threads](res, n), steady)
        m, n, k = cfg.op_shape
        out[prec.wgmma] = 2 * m * n * k * cfg.ksteps * iters * blocks * (threads // 128) / (ms * 1e-3) / 1e12
    return out


def linkage_cost(chains=4, iters=4096):
    """What a call boundary costs: one warp loop of mma.sync (m16n8k16, f32
    accumulate, `chains` independent accumulators) with the routine inline
    and linked as an external .func. {linkage: (ms, local bytes/thread, registers)}."""
    from numba import cuda

    from . import primitives as P

    blocks = cuda.get_current_device().MULTIPROCESSOR_COUNT * 4
    result = {}
    for linkage in P.LINKAGES:
        mma = P.routines(linkage).mma_m16n8k16_f16_f32

        @cuda.jit
        def kernel(res, n):
            t = np.uint32(cuda.threadIdx.x)
            a = (t, t + np.uint32(1), t + np.uint32(2), t + np.uint32(3))
            b = (t * np.uint32(3), t * np.uint32(5))
            acc = cuda.local.array((chains, 4), np.float32)
            for c in range(chains):
                for r in range(4):
                    acc[c, r] = 0
            for _ in range(n):
                for c in range(chains):
                    d = mma(a, b, (acc[c, 0], acc[c, 1], acc[c, 2], acc[c, 3]))
                    acc[c, 0], acc[c, 1], acc[c, 2], acc[c, 3] = d
            s = np.float32(0)
            for c in range(chains):
                s += acc[c, 0] + acc[c, 3]
            res[cuda.grid(1)] = s

        res = cuda.device_array(blocks * 128, np.float32)
        kernel[blocks, 128](res, 4)
        start, end = cuda.event(), cuda.event()
        start.record()
        kernel[blocks, 128](res, iters)
        end.record()
        end.synchronize()
        result[linkage] = (cuda.event_elapsed_time(start, end),
                           kernel.get_local_mem_per_thread(), kernel.get_regs_per_thread())
    return result


def measure_copy_bandwidth(nbytes=1 << 30):
    """GB/s of a device-to-device copy, counting the bytes read and written:
    the roofline's memory ceiling."""
    from numba import cuda

    from .timing import time_gpu

    src = cuda.device_array(nbytes, np.uint8)
    dst = cuda.device_array(nbytes, np.uint8)
    ms, _ = time_gpu(lambda i: dst.copy_to_device(src), repeats=5)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def ceiling_for(cfg_or_precision, ceilings):
    """The ceiling of the instruction a kernel issues: its precision's
    mma.sync, or (op="wgmma") its wgmma; an INT4 kernel that widens to s8
    (unpack) is measured against its wide precision's (s8), the instruction it runs on."""
    cfg = cfg_or_precision
    prec = PRECISIONS[getattr(cfg, "precision", cfg)]
    if getattr(cfg, "unpack", "none") != "none":
        prec = prec.wide
    if getattr(cfg, "op", "") == "wgmma":
        return ceilings.get(prec.wgmma, math.nan)
    return ceilings[prec.ceiling]


def fastest_ceiling(precision, ceilings):
    """A library's ceiling: the fastest of its precision's instructions
    measured here (mma.sync, or wgmma on sm_90), since it may issue either;
    a widening precision's library is its wide one's (INT4's: an INT8 GEMM)."""
    prec = PRECISIONS[precision].wide
    return max(ceilings[prec.ceiling], ceilings.get(prec.wgmma, 0.0))
