"""Timing GPU work without timing the host, in steady state or in a burst.

A launch can cost more host time than a small GEMM runs, so back-to-back
launches would measure the host. time_gpu queues each batch of timed
launches behind a kernel that spins on the GPU's clock long enough for the
host to enqueue them all; CUDA events around each launch then see the GPU
alone. That is a burst: a few launches at the boost clock. A batch is
checked, not trusted: CUDA's launch queue holds about a thousand entries
(a timed launch takes three), and a host that fills it, or is slower than
estimated, is still enqueueing when the spin ends, so the batch's later
samples would hold host time; such a batch is timed again behind a spin
sized from the host's measured pace.

A GEMM that draws the board's power limit slows its clock within a few
hundred milliseconds (an H200 at 8192: 1980 MHz down to 1440-1680), and a
model runs its GEMMs there. time_steady warms the kernel for a time (not a
count), then times a window of about timed_s and min_repeats launches or more
straight after, with the clock, power and energy of that window. Times are
medians.
"""

import contextlib
import dataclasses
import functools
import math
import statistics
import threading
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
    t0 = time.perf_counter()
    run(0)                                   # how long the host takes to enqueue one
    host = time.perf_counter() - t0
    cuda.synchronize()
    if between is not None:
        t0 = time.perf_counter()
        between()
        host += time.perf_counter() - t0
    starts, ends = _timed_launches(run, repeats, between, host)
    if during is not None:
        starts[repeats // 2].synchronize()
        during()
    ends[-1].synchronize()
    samples = [cuda.event_elapsed_time(s, e) for s, e in zip(starts, ends)]
    return statistics.median(samples), samples


@dataclasses.dataclass(frozen=True)
class Steady:
    """How time_steady measures: warm_s of warm-up launches, then timed
    ones for about timed_s (counted from one launch's time, which its events
    lengthen a little), min_repeats at least, max_repeats at most, then
    more launches until energy_s have passed since the warm-up: the board's
    energy counter moves in steps about 0.1 s apart (on the H200, a 0.1 s
    window saw none), so energy and power are read over energy_s."""
    warm_s: float = 0.2
    timed_s: float = 0.1
    min_repeats: int = 30
    max_repeats: int = 5000
    energy_s: float = 1.0

    def counts(self, est_ms, host_s):
        """(warm-up launches, timed launches, behind a spin?) for a run of
        about est_ms on the GPU that takes the host host_s to enqueue. The
        warm-up lasts warm_s at the pace of the slower of the two. Where the
        host is the slower, the timed launches wait behind a spin, as many as
        one spin's batch holds (min_repeats at least); else they follow the
        warm-up, the GPU never idles."""
        gpu = max(est_ms, 1e-4) * 1e-3
        warm = min(self.max_repeats * 4, max(2, math.ceil(self.warm_s / max(gpu, host_s))))
        timed = min(self.max_repeats, max(self.min_repeats, math.ceil(self.timed_s / gpu)))
        if gpu >= 2 * host_s:
            return warm, timed, False
        return warm, max(self.min_repeats, min(timed, _batch(host_s))), True

    def extra(self, est_ms, timed):
        """Launches after the timed ones, back to back, that bring the energy window to energy_s."""
        gpu = max(est_ms, 1e-4) * 1e-3
        return min(self.max_repeats * 4, max(0, math.ceil(self.energy_s / gpu) - timed))

    def describe(self):
        return (f"steady state: each kernel warmed for {self.warm_s * 1e3:.0f} ms, then the median of about "
                f"{self.timed_s * 1e3:.0f} ms and at least {self.min_repeats} launches; its SM clock, "
                f"energy a GEMM and mean power read over {self.energy_s:.1f} s of launches after the warm-up "
                "(NVML, by a thread of its own)")


@dataclasses.dataclass
class Measured:
    """A timing: median ms and samples, the SM clock read during them and
    the board's power; for a steady one the energy a run took (J) and the
    power as the mean over its energy window (NaN where NVML cannot say, or
    the window was too short for its counter)."""
    ms: float
    samples: list
    sm_mhz: float = math.nan
    power_w: float = math.nan
    joules: float = math.nan


def time_steady(run, steady=Steady(), between=None, device_index=0):
    """A Measured of run() in steady state (see Steady): as time_gpu's run
    and between. Where a launch takes the GPU longer than the host takes to
    enqueue it, warm-up and timed launches go back to back, so the GPU never
    idles and its clock is the one it holds under load; its clock and power
    are then read by a thread of their own (_Readings) over the stretch
    after the warm-up, since the host, blocked on a full launch queue, is
    far ahead of the GPU. Where the host is slower (small kernels, which
    draw little power), the timed launches wait behind a spin kernel, as
    time_gpu's do, after the warm-up, and the clock is read among them;
    power and energy then come from launches back to back after them where
    the GPU is still the slower (host-bound launches have none)."""
    est_ms, host = _estimate(run, between)
    warm, repeats, behind_spin = steady.counts(est_ms, host)
    with _Readings(device_index) as readings:
        begin = time.perf_counter()             # the GPU is idle: the warm-up starts as it is enqueued
        for i in range(warm):
            if between is not None:
                between()
            run(i)
        starts, ends = _timed_launches(run, repeats, between, host if behind_spin else None)
        if behind_spin:
            starts[repeats // 2].synchronize()
            mhz = gpu_state(device_index).get("sm_mhz", math.nan)
            ends[-1].synchronize()
        # The window of power and energy: where the host keeps the GPU busy, the stretch
        # after the warm-up, made energy_s long by more launches back to back; where the
        # timed launches waited behind spins but the GPU is still the slower of the two,
        # energy_s of launches back to back after them; else none (the GPU would idle
        # between launches, and the energy of a GEMM would hold the idle power).
        energy = not behind_spin or est_ms * 1e-3 >= host
        opened, first = begin + steady.warm_s, starts[0]
        if behind_spin:
            opened, first = time.perf_counter(), cuda.event()
            first.record()
        extra = steady.extra(est_ms, 0 if behind_spin else repeats) if energy else 0
        for i in range(extra):
            if between is not None:
                between()
            run(repeats + i)
        done = cuda.event()
        done.record()
        done.synchronize()
        end = time.perf_counter()
    samples = [cuda.event_elapsed_time(s, e) for s, e in zip(starts, ends)]
    joules = watts = math.nan
    if energy:
        watts, window_mhz = readings.over(opened, end, 0.5 * steady.energy_s)
        launches = extra if behind_spin else repeats + extra
        joules = watts * cuda.event_elapsed_time(first, done) * 1e-3 / launches   # gaps included
        if not behind_spin:
            mhz = window_mhz
    return Measured(statistics.median(samples), samples, mhz, watts, joules)


def _estimate(run, between, launches=5):
    """(GPU ms, host seconds) of one run: the host's, with the two events a
    timed launch records (back to back, a host slower than the GPU would put
    its own time into the samples), the median of `launches` (one alone can
    be several times it); the GPU's, of a run behind a spin that outlasts
    its enqueueing (on an idle GPU the events time the host's enqueueing
    too: F.linear's 52 us kernel read 127 us)."""
    for i in range(2):
        run(i)
    cuda.synchronize()
    took = []
    for i in range(launches):
        if between is not None:
            between()
        first, last = cuda.event(), cuda.event()
        t0 = time.perf_counter()
        first.record()
        run(i)
        last.record()
        took.append(time.perf_counter() - t0)
    host = statistics.median(took)
    cuda.synchronize()
    (first,), (last,) = _timed_launches(run, 1, between, host)
    last.synchronize()
    return cuda.event_elapsed_time(first, last), host


class _Readings:
    """The board's energy counter and SM clock read every period_s by a
    thread of its own, each reading stamped with the host's clock, while the
    caller enqueues launches (ctypes lets go of the GIL while a launch waits
    for room in the queue). Without NVML it reads nothing."""

    def __init__(self, device_index=0, period_s=0.002):
        self.readings, self._index, self._period = [], device_index, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self):
        if _nvml(self._index) is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _read(self):
        import pynvml

        h = _nvml(self._index)
        while not self._stop.is_set():
            try:
                self.readings.append((time.perf_counter(), pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
                                      pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)))
            except pynvml.NVMLError:
                return
            self._stop.wait(self._period)

    def over(self, lo, hi, min_s):
        """(mean watts, median SM MHz) from lo to hi (host seconds). The
        counter moves in steps (about 0.1 s apart on the H200), so the power
        is its rise from its first step in the window to its last over the
        time between them: NaN where those are less than min_s apart."""
        return power_between(self.readings, lo, hi, min_s)


def power_between(readings, lo, hi, min_s):
    """(watts, median MHz) of (seconds, millijoules, MHz) readings between lo and hi: see _Readings.over."""
    inside = [r for r in readings if lo <= r[0] <= hi]
    mhz = statistics.median(r[2] for r in inside) if inside else math.nan
    steps = [now for before, now in zip(readings, readings[1:]) if lo <= now[0] <= hi and now[1] != before[1]]
    if len(steps) < 2 or steps[-1][0] - steps[0][0] < min_s:
        return math.nan, mhz
    (t0, e0, _), (t1, e1, _) = steps[0], steps[-1]
    return (e1 - e0) * 1e-3 / (t1 - t0), mhz


_SPIN_MAX_S = 0.2
_QUEUED_MAX = 256       # timed launches behind one spin: 768 of the launch queue's ~1000 entries


def _enqueue_s(host_s):
    """The spin a launch and its two events need, of a launch that takes the host host_s."""
    return 3 * (host_s + 20e-6)


def _spin_ns(launches, host_s):
    """A spin long enough for the host to enqueue `launches` launches and their events behind it (0.2 s at most)."""
    return int(min(_SPIN_MAX_S * 1e9, 1e6 + launches * _enqueue_s(host_s) * 1e9))


def _batch(host_s):
    """How many launches that take the host host_s each one spin covers: what the queue holds and 0.2 s allows."""
    return max(1, min(_QUEUED_MAX, int(_SPIN_MAX_S / _enqueue_s(host_s))))


def _timed_launches(run, repeats, between, host_s, attempts=3):
    """(start events, end events) of `repeats` runs, each after between():
    back to back where host_s is None, else in batches, each behind a spin
    sized for launches that take the host host_s. A batch the host was still
    enqueueing when its spin ended is timed again behind a spin sized from
    the pace the host kept (attempts times at most; then a warning says its
    samples may hold host time)."""
    starts, ends = [], []
    if host_s is None:
        _enqueue(run, range(repeats), between, starts, ends)
        return starts, ends
    done = 0
    while done < repeats:
        for attempt in range(attempts):
            batch = range(done, done + min(repeats - done, _batch(host_s)))
            with quiet():
                _spin[1, 1](np.uint64(_spin_ns(len(batch), host_s)))
            spun = cuda.event()
            spun.record()
            t0 = time.perf_counter()
            s, e = _enqueue(run, batch, between, [], [])
            pace = (time.perf_counter() - t0) / len(batch)
            if not spun.query():                # the spin outlasted the enqueueing
                break
            e[-1].synchronize()
            host_s = max(host_s, pace)
        else:
            warnings.warn(f"timed launches {batch.start}-{batch.stop - 1} outran their spin {attempts} times "
                          f"(the host took {pace * 1e6:.0f} us a launch): their samples may hold host time",
                          RuntimeWarning, stacklevel=3)
        starts += s
        ends += e
        done = batch.stop
        if done < repeats:
            e[-1].synchronize()                 # the next batch's spin queues on an idle GPU
    return starts, ends


def _enqueue(run, indices, between, starts, ends):
    """run(i) for each i between a start and an end event, between() before each, appended to starts and ends."""
    for i in indices:
        if between is not None:
            between()
        start, end = cuda.event(), cuda.event()
        starts.append(start)
        start.record()
        run(i)
        end.record()
        ends.append(end)
    return starts, ends


@functools.cache
def _nvml(device_index):
    """The NVML handle of a device (None without nvidia-ml-py or a driver that answers)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(device_index)
    except Exception:  # noqa: BLE001 - not installed, or no NVML
        return None


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
    h = _nvml(device_index)
    if h is not None:
        import pynvml

        try:
            return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
                    "temp_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)}
        except pynvml.NVMLError:        # ask nvidia-smi
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
