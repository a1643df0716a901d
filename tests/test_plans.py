"""numgemm.plans: what make() hands each feature's host step (Parts), and
that the steps, each in its feature's module, build on each other in order.
Run with a host allocator (NumPy arrays), so no GPU is needed; the steps
that write tensor maps (TMA's, c_tma's) are the GPU suite's."""

import numpy as np
import pytest

from numgemm import registry
from numgemm.kernel import HOST, copy_tma, skeleton_ws, split_k, widen_pass
from numgemm.plans import Parts


class _HostAlloc:
    """frameworks.Allocator's two calls, on the host."""

    def empty(self, shape, dtype):
        x = np.empty(shape, dtype)
        return x, x

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)


def _parts(cfg, **shape):
    return Parts(*_fields(cfg, **shape))


def _fields(cfg, batch=2, M=96, N=80, K=64):
    """Parts' fields for byte operands of K bytes a row (INT4: 2K values)."""
    a, b = np.zeros((batch, M, K), np.uint8), np.zeros((1, N, K), np.uint8)
    return cfg, a, b, np.zeros((batch, M, N), np.int32), batch, M, N, 1, 132, _HostAlloc(), 0


def test_each_host_step_is_in_its_features_module_and_tma_comes_after_the_sides_it_maps():
    steps = [s.__module__.rsplit(".", 1)[1] for s in HOST]
    assert steps.index("skeleton_ws") < steps.index("widen_pass") < steps.index("copy_tma")
    assert copy_tma.host in HOST and split_k.host in HOST


def test_swap_then_widening_give_the_kernel_its_sides():
    """int4 with swap: the caller's B is the kernel's A side, the caller's A
    is widened to s8 (twice its bytes) into a workspace that becomes the
    kernel's B side; the kernel's output is N x M."""
    cfg = registry.get("int4_wgmma_unpack_s8_swap")
    p = _parts(cfg, K=32)
    a, b = p.A, p.B
    skeleton_ws.host(p)
    widen_pass.host(p)
    assert p.A is b and (p.kM, p.kN) == (80, 96)
    assert p.widened[0] is a and p.B is p.widened[1] and p.B.shape == (2, 96, 64) and p.B.dtype == np.uint8
    assert p.maps == [] and p.work is None


@pytest.mark.parametrize("split_sum", ["kernel", "last"])
def test_split_k_gets_its_workspace_and_counts(split_sum):
    cfg = registry.get("int8_ptx_mma_k32_m16").replace(split_k=4, split_sum=split_sum)
    p = _parts(cfg, M=16, N=40)
    for step in HOST:
        step(p)
    assert p.work.shape == (8, 16, 40) and p.work.dtype == np.int32 and p.c_aligned == 1
    assert (p.counts is not None) == (split_sum == "last")
    if p.counts is not None:
        assert p.counts.shape == (2 * p.tiles(),) and not p.counts.any()


class _Recording(Parts):
    """Parts whose tensor maps are recorded, not encoded (that needs a GPU)."""

    def add_maps(self, specs):
        self.maps.append(specs)
        return 0x1000 * len(self.maps)

    @staticmethod
    def bytes_of(x):
        return x.view(np.uint8)


def test_the_tma_steps_ask_for_their_boxes():
    """copy="tma": one map pair, A's boxes then B's (the config's box rows and
    bytes), of the kernel's sides after swap; c_tma: C's map first, in a
    warp's 16 rows of 128 bytes, its address in c_aligned."""
    cfg = registry.get("int8_wgmma_swap")
    p = _Recording(*_fields(cfg))
    a, b = p.A, p.B
    for step in HOST:
        step(p)
    rows, nbytes = cfg.tma_box_rows, cfg.tma_box_bytes
    assert p.maps == [[(b, rows[0], nbytes[0]), (a, rows[1], nbytes[1])]] and p.ab_maps == 0x1000
    cfg = registry.get("fp16_wgmma").replace(c_tma=True)
    p = _Recording(*_fields(cfg))
    for step in HOST:
        step(p)
    assert [spec[1:] for spec in p.maps[0]] == [(16, 128)] and p.c_aligned == 0x1000 and p.ab_maps == 0x2000
