"""numgemm.soak: the seeded mix of kept plans, repeated, fresh and new-C calls,
every result checked (GPU, `soak` marker: NUMGEMM_SOAK_CALLS calls, 120 by
default; NUMGEMM_SOAK_SEED replays a failure's seed), and what it names
offline."""

import os

import pytest

from numgemm import soak


@pytest.mark.parametrize("precision", ["fp16", "int8", "int4"])
def test_the_soak_names_every_path_that_keeps_state(precision):
    """On sm_90: gemm()'s choice, TMA maps for mma.sync and wgmma, and the
    precision's workspaces (split-K and stream-K for INT8, the widening for INT4)."""
    cfgs = soak.kernels(precision, (9, 0))
    assert cfgs[0] is None
    named = cfgs[1:]
    assert {c.op for c in named if c.copy == "tma"} == {"mma", "wgmma"}
    if precision == "int8":
        assert any(c.stream_k for c in named) and {c.split_sum for c in named if c.split_k > 1} == {"kernel", "last"}
    if precision == "int4":
        assert any(c.unpack == "pass" and c.swap for c in named)
    if precision == "fp16":
        assert any(c.c_tma for c in named) and any(c.split_k > 1 for c in named)
        assert {c.op for c in named if c.b_layout == "nk"} == {"mma", "wgmma"}


def test_the_soak_leaves_out_what_a_gpu_cannot_run():
    assert all(c is None or c.unsupported((8, 9)) is None for p in ("fp16", "int8", "int4")
               for c in soak.kernels(p, (8, 9)))


@pytest.mark.gpu
@pytest.mark.soak
def test_soak_of_mixed_calls():
    # a count of calls, not a time: beside the suite's other workers a call takes longer, not fewer checks
    seed, calls = os.environ.get("NUMGEMM_SOAK_SEED"), int(os.environ.get("NUMGEMM_SOAK_CALLS", 120))
    summary = soak.run(0, None if seed is None else int(seed), calls=calls, jobs=min(8, os.cpu_count() or 1))
    assert summary["calls"] == calls and all(summary["kinds"].values()), summary
