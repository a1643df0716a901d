"""Checking and timing one kernel, as the bench and the search (numgemm.tune) do.

check() compiles each kernel and compares it once, every entry, with the exact
reference on an irregular batched shape (CHECK_SHAPE, no multiple of any
tile); timed() launches it over rotated operand sets (in steady state, or a
burst of --repeats: numgemm.timing) and samples its output again.
"""

import math
import sys
import time

from . import operands
from .precision import PRECISIONS

CHECK_SHAPE = (2, 520, 1000, 776)          # batch, M, N, K: not multiples of any tile


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def bytes_moved(precision, batch, M, N, K):
    """The bytes a GEMM moves at the least: A and B read once, C written once
    (4-byte elements, for every kernel and library of a shape, float16 C or
    not, so that a shape's GB/s compare as its times do): what its GB/s
    counts, and its working set."""
    return batch * (PRECISIONS[precision].bits / 8 * (M + N) * K + 4 * M * N)


def prebuild(cfgs, cc, jobs):
    """Every kernel the run needs, built before anything is timed: the cache's,
    or built jobs at a time."""
    from . import cache, kernel

    if not cache.enabled():
        log(f"kernels: {len(set(cfgs))} needed; the cache is off (NUMGEMM_CACHE=0), each builds when first used")
        return
    needed, hits, built, secs = kernel.prebuild(cfgs, cc, jobs)
    log(f"kernels: {needed} needed, {hits} from the cache ({cache.folder()}), {built} built in {secs:.1f} s "
        f"with {jobs} jobs")


def epilogue_given(cfg, M, N, rng):
    """(host vectors, gemm()'s keyword arguments) of fresh vectors for cfg's
    epilogue (operands.epilogue_vectors), on the device; none without one."""
    from numba import cuda

    vectors = operands.epilogue_vectors(cfg, M, N, rng)
    on_device = (None if v is None else cuda.to_device(v) for v in vectors)
    return vectors, (dict(zip(("scale_a", "scale_b", "bias"), on_device), activation=cfg.act or None)
                     if cfg.epilogue else {})


def check(precision, chosen, cc, rng):
    """{(preset, config): (status, compile s)}: each kernel compiled and
    checked once against the exact reference, on an irregular batched shape
    (through its epilogue, with fresh vectors, where it has one)."""
    from numba import cuda

    from .api import plan_gemm

    batch, M, N, K = CHECK_SHAPE
    a, b = operands.values(precision, batch, M, N, K, rng)
    ref = operands.expected(precision, a, b)
    dev_ops, checked = {}, {}
    for preset, kname, cfg in chosen:
        log(f"[{precision}] compile + check {preset}/{kname} ({cfg.name})")
        why = cfg.unsupported(cc)
        if why:
            log(f"  {kname}: not launched: {why}")
            checked[preset, cfg] = ("n/a", math.nan)
            continue
        if cfg.b_layout not in dev_ops:
            dev_ops[cfg.b_layout] = operands.to_device(precision, cfg.b_layout, a, b)
        da, db = dev_ops[cfg.b_layout]
        out = operands.poisoned(precision, (batch, M, N), cfg.c_dtype)
        vectors, given = epilogue_given(cfg, M, N, rng)
        t0 = time.perf_counter()
        compile_s = math.nan
        try:
            plan = plan_gemm(da, db, precision=precision, kernel=cfg, out=out, k=K, **given)
            compile_s = time.perf_counter() - t0
            plan.launch()
            cuda.synchronize()
            want = operands.through_epilogue(ref, *vectors, cfg.act or None)
            why = operands.mismatch(out.copy_to_host(), want, precision, cfg.acc)
        except Exception as e:  # noqa: BLE001 - a failing kernel is reported, not fatal
            why = f"{type(e).__name__}: {e}"
        if why:
            log(f"  {kname}: FAIL against the reference: {why}")
        checked[preset, cfg] = ("FAIL" if why else "ok", compile_s)
    return checked


#: The most operand sets a timed run rotates over. The bench's smallest shape,
#: 512³, needs 90 (FP16) to 144 (INT4) to overflow an H200's 60 MiB L2 three times.
MAX_SETS = 256


def rotations(nbytes, l2=None):
    """How many buffers of nbytes a timed run rotates over: as many as it
    takes to overflow L2 (l2 bytes; None: this GPU's) three times, so that
    each run reads its operands from DRAM; at most MAX_SETS."""
    if l2 is None:
        from .timing import l2_bytes

        l2 = l2_bytes()
    return min(MAX_SETS, max(1, math.ceil(3 * l2 / nbytes)))


def from_l2(nbytes, l2=None):
    """Whether shapes of nbytes are too small for rotations() to overflow L2
    three times: their timed runs may find their operands in L2 (the bench
    flags such rows "L2")."""
    if l2 is None:
        from .timing import l2_bytes

        l2 = l2_bytes()
    return rotations(nbytes, l2) * nbytes < 3 * l2


def operand_sets(precision, batch, shape, rng):
    """Host operands of one shape, as many sets as rotations() of its bytes."""
    M, N, K = shape
    return [operands.values(precision, batch, M, N, K, rng)
            for _ in range(rotations(bytes_moved(precision, batch, M, N, K)))]


def timed(precision, cfg, shape, dev_sets, host_sets, args, rng, between=None, steady=None):
    """(timing.Measured, sampled check passed, plans, outputs) of cfg's
    kernel launched over the rotated operand sets, each into its own
    poisoned output: in steady state (steady: a timing.Steady), else a burst
    of args.repeats. A kernel with an epilogue gets fresh vectors for it
    (operands.epilogue_vectors), the same for every set."""
    from .api import plan_gemm

    M, N, K = shape
    vectors, given = epilogue_given(cfg, M, N, rng)
    outs = [operands.poisoned(precision, (args.batch, M, N), cfg.c_dtype) for _ in host_sets]
    plans = [plan_gemm(x, y, precision=precision, kernel=cfg, out=o, k=K, **given)
             for (x, y), o in zip(dev_sets, outs)]
    measured = time_run(lambda i: plans[i % len(plans)].launch(), args.repeats, between, steady)
    a, b = host_sets[0]
    ok = operands.sample_matches(outs[0].copy_to_host(), a, b, precision, rng, cfg.acc, epilogue=(vectors, cfg.act))
    return measured, ok, plans, outs


def time_run(run, repeats, between=None, steady=None):
    """A timing.Measured of run(i): steady state where steady (a
    timing.Steady) is given, else a burst of `repeats` launches with the
    clock and power read while they run (no energy: a burst is too short
    for the board's energy counter)."""
    from numba import cuda

    from .timing import Measured, gpu_state, time_gpu, time_steady

    device = cuda.get_current_device().id
    if steady is not None:
        return time_steady(run, steady, between, device)
    state = {}
    ms, samples = time_gpu(run, repeats=repeats, between=between, during=lambda: state.update(gpu_state(device)))
    return Measured(ms, samples, state.get("sm_mhz", math.nan), state.get("power_w", math.nan))
