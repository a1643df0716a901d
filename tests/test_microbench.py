"""numgemm.microbench: which measured ceiling a kernel's or a library's row is read against
(the microbenchmarks themselves need a GPU)."""

import pytest

from numgemm import microbench, registry


def test_a_library_is_measured_against_the_fastest_instruction():
    """cuBLAS on sm_90 issues wgmma: its share is of the wgmma ceiling where
    one was measured, of mma.sync's where not (and INT4's library is INT8's)."""
    hopper = {"mma_m16n8k16_f16_f32": 640.0, "wgmma_m64n256k16_f32_f16_f16": 910.0,
              "mma_m16n8k32_s8_s32": 1290.0, "wgmma_m64n256k32_s32_s8_s8": 1940.0}
    assert microbench.fastest_ceiling("fp16", hopper) == 910.0 and microbench.fastest_ceiling("int8", hopper) == 1940.0
    assert microbench.fastest_ceiling("fp16", {"mma_m16n8k16_f16_f32": 240.0}) == 240.0
    assert microbench.ceiling_for(registry.get("fp16_ptx_mma"), hopper) == 640.0


@pytest.mark.gpu
def test_a_steady_ceiling_loop_is_timed_after_its_warm_up():
    """timed_loop in steady state: a launch of about 200 ms, then the timed one
    of about 100 ms (a spin of 1 us an iteration)."""
    import numpy as np

    from numgemm import timing

    launches = []

    def launch(n):
        launches.append(n)
        timing._spin[1, 1](np.uint64(1000 * n))

    ms, iters = microbench.timed_loop(launch, steady=True)
    assert 90 <= ms <= 115 and iters == launches[-1] and 180e3 <= launches[-2] <= 220e3
