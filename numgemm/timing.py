"""Timing GPU work without timing the host.

A numba-cuda launch costs ~100 us of host time, more than a small GEMM runs,
so back-to-back launches would measure the host. Here each batch of timed
launches is queued behind a kernel that spins on the GPU's clock long enough
for the host to enqueue them all; CUDA events around each launch then see
the GPU alone. Times are medians after warm-up.
"""

import contextlib
import statistics
import time
import warnings

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


def time_gpu(run, *, warmup=2, repeats=10, between=None, during=None):
    """Median milliseconds of run() on the GPU, and every sample.

    run(i) enqueues the work for repeat i (rotate inputs with i where the
    working set fits in L2); it must not synchronize. between(), if given, is
    enqueued before each timed run, outside its events (l2_flusher()).
    during(), if given, is called when the GPU has reached the middle of the
    timed runs (behind the spin kernel), while it works through them
    (gpu_state()).
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
    if between is not None:
        t0 = time.perf_counter()
        between()
        host += time.perf_counter() - t0
    # Long enough for the host to enqueue every launch and event behind it.
    with quiet():
        _spin[1, 1](np.uint64(min(2e8, 1e6 + 3 * repeats * (host + 20e-6) * 1e9)))
    for i in range(repeats):
        if between is not None:
            between()
        starts[i].record()
        run(i)
        ends[i].record()
    if during is not None:
        starts[repeats // 2].synchronize()
        during()
    ends[-1].synchronize()
    samples = [cuda.event_elapsed_time(s, e) for s, e in zip(starts, ends)]
    return statistics.median(samples), samples


@contextlib.contextmanager
def quiet():
    """numgemm's own launches of a block or a few (the spin kernel) without
    Numba's low-occupancy warning, which speaks of the user's kernels."""
    with warnings.catch_warnings():
        # (the message starts with terminal escapes: matched anywhere in it)
        warnings.filterwarnings("ignore", message=".*Grid size .* will likely result in GPU under-utilization")
        yield


@cuda.jit
def _scrub(buf, value):
    i = cuda.grid(1)
    if i < buf.size:
        buf[i] = value


def l2_bytes():
    """The current GPU's L2 size in bytes (50 MiB, an H100's, where the driver does not say)."""
    return getattr(cuda.get_current_device(), "L2_CACHE_SIZE", 50 * 2**20)


def l2_flusher():
    """between() for time_gpu: writes a buffer twice the L2's size, so that
    each timed run starts with none of its operands in L2 (--cold-l2)."""
    l2 = l2_bytes()
    buf = cuda.device_array(2 * l2 // 4, np.int32)
    blocks = (buf.size + 255) // 256
    count = [0]

    def flush():
        count[0] += 1
        _scrub[blocks, 256](buf, np.int32(count[0]))
    return flush


def gpu_state(device_index=0):
    """{sm_mhz, power_w, temp_c} of the GPU now, through NVML (nvidia-ml-py)
    where installed, else nvidia-smi; {} where neither answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
                "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)}
    except Exception:  # noqa: BLE001 - not installed, or no NVML: ask nvidia-smi
        pass
    out = _smi(device_index, "clocks.sm,power.draw,temperature.gpu")
    if out is None:
        return {}
    return dict(zip(("sm_mhz", "power_w", "temp_c"), out))


def device_name(dev):
    """A numba-cuda device's name as str (some versions give bytes)."""
    return dev.name.decode() if isinstance(dev.name, bytes) else dev.name


def gpu_facts(device_index=0):
    """{driver, max_sm_mhz, power_limit_w} for the bench header ({} without nvidia-smi)."""
    out = _smi(device_index, "driver_version,clocks.max.sm,power.limit", numbers=False)
    if out is None:
        return {}
    return dict(zip(("driver", "max_sm_mhz", "power_limit_w"), out))


def _smi(device_index, fields, numbers=True):
    import subprocess

    try:
        done = subprocess.run(["nvidia-smi", f"--id={device_index}", f"--query-gpu={fields}",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    vals = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")]
    if not numbers:
        return vals
    try:
        return [float(v) for v in vals]
    except ValueError:
        return None


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
