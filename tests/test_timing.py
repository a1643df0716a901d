"""numgemm.timing: what time_gpu measures is the GPU's time (GPU), and the
L2 size it and measure.rotations read."""

import numpy as np
import pytest


@pytest.mark.gpu
@pytest.mark.parametrize("ms", [0.5, 2.0])
def test_a_spin_of_known_length_is_timed_within_two_percent(ms):
    """A kernel that spins on the GPU's clock for `ms` (numgemm.timing's own
    spin) timed by time_gpu, host launches and all: its median within 2 %
    (single samples can run long where other processes share the GPU, as
    the suite's other workers do)."""
    from numgemm import timing

    ns = np.uint64(ms * 1e6)
    median, samples = timing.time_gpu(lambda i: timing._spin[1, 1](ns), warmup=2, repeats=30)
    assert abs(median - ms) <= 0.02 * ms, (median, ms)


@pytest.mark.gpu
def test_the_l2_size_is_the_gpus():
    from numgemm.timing import l2_bytes

    assert 2**20 <= l2_bytes() <= 2**30


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
