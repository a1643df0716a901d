"""numgemm.timing: what time_gpu measures is the GPU's time (GPU), and the
L2 size it and measure.rotations read."""

import math
import statistics
import time

import numpy as np
import pytest


@pytest.mark.gpu
@pytest.mark.parametrize("ms", [0.5, 2.0])
def test_a_spin_of_known_length_is_timed_within_two_percent(ms):
    """A kernel that spins on the GPU's clock for `ms` (numgemm.timing's own
    spin) timed by time_gpu, host launches and all: no sample short of it,
    the shortest within 2 % of it, and the median returned the samples'.
    The shortest, not the median: where the suite's other workers share the
    GPU, their contexts' time slices land between a sample's events (a 2 ms
    spin's median read 2.24 ms among 16 workers), which says nothing of the
    timer."""
    from numgemm import timing

    ns = np.uint64(ms * 1e6)
    median, samples = timing.time_gpu(lambda i: timing._spin[1, 1](ns), warmup=2, repeats=30)
    assert len(samples) == 30 and median == statistics.median(samples)
    assert 0.999 * ms <= min(samples) <= 1.02 * ms, (min(samples), ms)


@pytest.mark.gpu
def test_a_host_slower_than_its_estimate_is_caught_and_timed_again():
    """A run whose first launch (the one time_gpu estimates the host from)
    is quick and whose others wait 2 ms on the host: their spin, sized for
    the quick one, ends while they are enqueued, so the batch is timed again
    behind a spin sized from the pace the host kept; every sample is the
    20 us kernel's, not the host's 2 ms (the median: other workers' time
    slices may land in a sample)."""
    import time
    import warnings

    from numgemm import timing

    ns = np.uint64(20_000)

    def run(i):
        if i:
            time.sleep(0.002)
        timing._spin[1, 1](ns)

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)     # no batch may be given up on
        median, samples = timing.time_gpu(run, warmup=1, repeats=40)
    assert len(samples) == 40 and median < 0.5, (median, max(samples))


@pytest.mark.gpu
def test_a_batch_longer_than_the_queue_is_timed_in_batches():
    """More timed launches than one spin's batch holds (the queue's ~1000
    entries): all of them timed, in batches, and the median is the 5 us
    kernel's (a host-bound sample adds a Numba launch's ~15 us of host)."""
    from numgemm import timing

    ns = np.uint64(5_000)
    median, samples = timing.time_gpu(lambda i: timing._spin[1, 1](ns), warmup=2, repeats=3 * timing._QUEUED_MAX + 5)
    assert len(samples) == 3 * timing._QUEUED_MAX + 5
    assert 0.005 <= min(samples) and median < 0.012, (min(samples), median)


@pytest.mark.gpu
def test_the_l2_size_is_the_gpus():
    from numgemm.timing import l2_bytes

    assert 2**20 <= l2_bytes() <= 2**30


def test_steady_state_warms_by_time_and_times_a_window():
    """A kernel the GPU takes longer over than the host takes to launch runs
    back to back, warm-up and window (no spin: the GPU never idles); a small
    one waits behind a spin after its warm-up, as many launches as one spin
    covers and the launch queue holds (a 512^3 GEMM's 16,667 a 100 ms window
    would take filled it, and its samples read 13.5 us for 6.1), never fewer
    than min_repeats."""
    from numgemm.timing import _QUEUED_MAX, Steady, _batch, _enqueue_s

    s = Steady()
    assert s.counts(1.4, 20e-6) == (143, 72, False)         # 8192: 200 ms warm, 100 ms timed
    assert s.counts(0.2, 20e-6) == (1000, 500, False)
    assert s.counts(0.006, 20e-6) == (10000, _QUEUED_MAX, True)    # 512^3: host-bound
    assert _batch(20e-6) == _QUEUED_MAX and 3 * _QUEUED_MAX <= 1000
    assert _batch(1e-3) == int(0.2 / _enqueue_s(1e-3)) < _QUEUED_MAX   # a slow host: what 0.2 s of spin covers
    assert s.counts(1e-6, 10e-3)[1] == s.min_repeats       # the least, however slow the host
    assert Steady(timed_s=10.0).counts(0.001, 0.0)[1] == Steady().max_repeats
    # energy over a second of launches after the warm-up (the counter's steps are ~0.1 s apart)
    assert s.extra(1.4, 72) == 715 - 72 and s.extra(20.0, 30) == 20


def test_power_is_read_between_the_counters_steps():
    """Readings every 2 ms of a counter that steps every 0.1 s by 50 J (500 W):
    500 W from its first step in the window to its last, whatever the window's
    ends; the clock is the readings' median inside it; a window with less than
    min_s between two steps says NaN."""
    from numgemm.timing import power_between

    readings = [(t * 0.002, 1e6 + 50_000 * int(t * 0.002 / 0.1 + 1e-9), 1500 + (t % 3) * 10) for t in range(1000)]
    watts, mhz = power_between(readings, 0.233, 1.871, 0.5)
    assert watts == pytest.approx(500, rel=1e-9) and mhz == 1510
    assert math.isnan(power_between(readings, 0.233, 0.6, 0.5)[0])
    assert all(math.isnan(x) for x in power_between([], 0, 1, 0.5))


@pytest.mark.gpu
def test_a_steady_timing_of_a_known_spin():
    """A 2 ms spin timed in steady state: no sample short of it and the
    shortest within 2 % (the shortest, as in the test above: among the
    suite's 16 workers other contexts' time slices landed in every other
    sample, a median of 2.24 ms), the median returned the samples', at
    least 30 launches (how many follow from the estimate, which a time
    slice can lengthen too: 35 of them once; Steady.counts is tested
    above), and an energy and power where NVML answers (the board's: the
    suite's other workers share it, so only their signs are checked)."""
    from numgemm import timing

    ns = np.uint64(2e6)
    m = timing.time_steady(lambda i: timing._spin[1, 1](ns))
    assert 0.999 * 2.0 <= min(m.samples) <= 1.02 * 2.0 and m.ms == statistics.median(m.samples)
    assert len(m.samples) >= 30
    assert (m.joules != m.joules and m.power_w != m.power_w) or (m.joules > 0 and m.power_w > 0)


@pytest.mark.gpu
def test_a_launch_timed_behind_spins_still_reads_its_energy_where_the_gpu_is_the_slower():
    """A 0.5 ms spin whose launch takes the host 0.35 ms: timed behind spins
    (the GPU is not twice the host's time), but the GPU is still the slower,
    so launches back to back after them hold it busy and give the energy and
    power a library row read as NaN before, where NVML answers."""
    from numgemm import timing

    ns = np.uint64(5e5)

    def run(i):
        t = time.perf_counter() + 350e-6
        timing._spin[1, 1](ns)
        while time.perf_counter() < t:
            pass
    m = timing.time_steady(run)
    assert 0.999 * 0.5 <= min(m.samples) <= 1.02 * 0.5 and len(m.samples) >= 30      # the shortest: see above
    assert timing._nvml(0) is None or (m.joules > 0 and m.power_w > 0), (m.joules, m.power_w)


def test_numgemms_own_small_launches_say_nothing():
    """Numba's low-occupancy warning (its message starts with terminal
    escapes) is silenced inside timing.quiet(), and only there."""
    import warnings

    from numgemm.timing import quiet

    message = "\x1b[1m\x1b[1mGrid size 1 will likely result in GPU under-utilization due to low occupancy.\x1b[0m"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet():
            warnings.warn(message, RuntimeWarning)
        assert not caught
        warnings.warn(message, RuntimeWarning)
        assert len(caught) == 1
