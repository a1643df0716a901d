"""numgemm.tune: the search's candidates (bench.py --tune)."""

import pytest

from numgemm import registry, tune

H200 = (9, 0)


@pytest.mark.parametrize("precision", ["fp16", "int8", "int4"])
@pytest.mark.parametrize("shape", tune.SHAPES)
def test_candidates_are_bounded_and_valid(precision, shape):
    """The first round: at most 64 configs, each valid, the registry default
    among them; split-K only where the tiles leave SMs idle, every block with
    at least two k-tiles, and stream-K there beside the same kernel unstreamed; no wgmma tiles derived for M <= 16, nor clusters
    of tile rows where M has one."""
    pool = tune.candidates(precision, H200, shape, 132)
    assert 1 <= len(pool) <= 64
    M, N, K = shape
    assert registry.default(precision, pool[next(iter(pool))].b_layout, "tuned", H200, M, K) in pool.values()
    for label, cfg in pool.items():
        assert cfg.unsupported(H200) is None and cfg.precision == precision
        if cfg.split_k > 1:
            assert -(-M // cfg.bm) * -(-N // cfg.bn) < 2 * 132, label
            assert -(-cfg.prec.kbytes(K) // cfg.bk_bytes) >= 2 * cfg.split_k, label
        if cfg.stream_k:
            assert -(-M // cfg.bm) * -(-N // cfg.bn) < 2 * 132 and cfg.replace(stream_k=False) in pool.values(), label
    assert all(c.bm == 16 for c in pool.values() if c.bm == 16) and (M <= 64 or all(c.bm > 16 for c in pool.values()))
    derived = [c for label, c in pool.items() if c.op == "wgmma" and label not in registry.REGISTRY["tuned"]]
    # (swap: tile rows over N)
    assert not (M <= 16 and any(not c.swap for c in derived))
    assert not (M <= 128 and any(c.cluster > 1 and not c.swap for c in derived))
    assert not any(c.widens_tile and c.split_k > 1 for c in pool.values())


def test_int4_wgmma_gets_smaller_tiles_where_few():
    """INT4's widening wgmma kernels, in smaller tiles where theirs leave SMs idle
    (never split: the producer would spill)."""
    pool = tune.candidates("int4", H200, (256, 4096, 4096), 132)
    assert any(c.widens_tile and c.bm == 64 for c in pool.values())


def test_int4_pass_kernel_computes_c_transposed_where_m_is_small():
    """swap twins of INT4's pass kernel, in its tilings, where 16 < M < N;
    none at the squares or where M <= 16."""
    pool = tune.candidates("int4", H200, (256, 8192, 8192), 132)
    assert {label for label, c in pool.items() if c.swap and c.even_waves} == {
        "int4_wgmma_unpack_s8_swap_128x256", "int4_wgmma_unpack_s8_swap_128x128", "int4_wgmma_unpack_s8_swap_64x128"}
    for shape in ((8192, 8192, 8192), (16, 8192, 8192)):
        assert not any(c.swap for c in tune.candidates("int4", H200, shape, 132).values())


@pytest.mark.parametrize("precision", ["fp16", "int8", "int4"])
def test_small_m_tiles_stream_b_through_l1_and_past_it(precision):
    """Each small-M cp.async candidate at M = 16 comes with its twin of the
    other cache policy (.ca streamed FP16's 16 x 8192^2 11 % faster than .cg),
    and the twins differ in that field alone."""
    pool = tune.candidates(precision, H200, (16, 8192, 8192), 132)
    small = {label: c for label, c in pool.items() if c.bm == 16 and c.copy == "cp_async"}
    assert {c.cache for c in small.values()} == {"ca", "cg"}
    for c in small.values():
        other = c.replace(cache="ca" if c.cache == "cg" else "cg")
        assert other in small.values(), c.name


def test_persistent_grids_both_ways_where_even_waves_changes_them():
    """At 8192^3 (2048 tiles of 128 x 256: 15.5 waves of 132 SMs) each
    persistent kernel also with one block on every SM; at 2048^3 the 128
    tiles of 128 x 256 are fewer than the SMs, so the grids are the same and
    there is no twin (the smaller tiles there have one)."""
    pool = tune.candidates("fp16", H200, (8192, 8192, 8192), 132)
    twins = {label: c for label, c in pool.items() if c.persistent and not c.even_waves}
    assert twins and all(label.endswith("_every_sm") and c.replace(even_waves=True) in pool.values()
                         and c.grid_blocks(8192, 8192, 132) == 132 for label, c in twins.items())
    assert pool["fp16_wgmma"].grid_blocks(8192, 8192, 132) == 128
    small = tune.candidates("fp16", H200, (2048, 2048, 2048), 132)
    assert "fp16_wgmma" in small and "fp16_wgmma_every_sm" not in small and "fp16_wgmma_64x64_every_sm" in small


def test_stream_k_where_tiles_leave_sms_idle():
    """FP16 at 64 x 4096 x 4096 (64 tiles of 64 x 64): its persistent TMA tilings
    also streamed over K; at 8192 x 8192 x 8192 (2048 tiles) none."""
    assert any(c.stream_k and c.bn == 64 for c in tune.candidates("fp16", H200, (64, 4096, 4096), 132).values())
    assert not any(c.stream_k for c in tune.candidates("fp16", H200, (8192, 8192, 8192), 132).values())


def test_neighbours_are_one_field_away():
    cfg = registry.get("int8_ptx_mma_k32")
    for label, other in tune.neighbours(cfg).items():
        changed = [f for f, v in cfg.describe().items() if other.describe()[f] != v]
        assert len(changed) == 1, (label, changed)


@pytest.mark.parametrize("name", ["int8_ptx_mma_k32_m16", "int4_ptx_unpack_s8_m16", "fp16_ptx_mma_m16"])
def test_small_m_neighbours_move_warps_with_the_k_tile(name):
    """Small-M tiles also try k-tiles twice and half as long, the warps moved
    between N and K so that each warp's share of a k-tile stays the same."""
    cfg = registry.get(name)
    moved = {label: c for label, c in tune.neighbours(cfg).items() if c.bk != cfg.bk}
    assert moved
    for label, c in moved.items():
        assert c.warps_n * c.warps_k == cfg.warps_n * cfg.warps_k, label
        assert c.bk // c.warps_k == cfg.bk // cfg.warps_k and c.bn == cfg.bn, label


@pytest.mark.parametrize("shape", [(16, 8192, 8192), (512, 512, 512), (8192, 8192, 8192)])
def test_the_search_takes_b_as_n_x_k_for_fp16(shape):
    """--tune --b-layout nk: FP16's candidates read B as an N x K weight, each
    a valid config; the registry default of that layout among them."""
    pool = tune.candidates("fp16", H200, shape, 132, "nk")
    assert pool and all(c.b_layout == "nk" and c.unsupported(H200) is None for c in pool.values())
    M, _, K = shape
    assert registry.default("fp16", "nk", "tuned", H200, M, K) in pool.values()


def test_pingpong_tiles_where_tiles_are_few():
    """Where 128 x 256 tiles leave SMs idle (256 x 8192^2: 64 of them), the TMA
    wgmma kernels also in 128 x 128 ping-pong tiles (a warpgroup a tile:
    faster than two warpgroups on its halves there: docs/findings.md),
    never INT4's, whose consumers widen A in registers."""
    pool = tune.candidates("fp16", H200, (256, 8192, 8192), 132, b_layout="nk")
    assert any(c.pingpong and c.bn == 128 and c.b_layout == "nk" for c in pool.values())
    assert not any(c.pingpong for c in tune.candidates("int4", H200, (256, 8192, 8192), 132).values())
