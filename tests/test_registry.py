"""numgemm.registry: the study's names in two presets, each family one base config."""

import pytest

from numgemm import registry

STUDY = ["fp16_wmma", "fp16_ptx_mma", "int8_wmma", "int8_ptx_mma_k32", "int4_wmma", "int4_ptx_mma_k64"]


@pytest.mark.parametrize("preset", registry.PRESETS)
def test_study_names_registered(preset):
    assert set(STUDY) <= set(registry.names(preset))


def test_paper_preset_is_the_studys_tiling():
    for name in STUDY:
        cfg = registry.get(name, "paper")
        assert (cfg.bm, cfg.bn, cfg.warps_m, cfg.warps_n) == (32, 64, 2, 4)
        assert cfg.warp_tile == (16, 16) and cfg.stages == 2
        assert cfg.private_tiles and cfg.smem_pad == 0 and cfg.cache == "ca"


@pytest.mark.parametrize("preset", registry.PRESETS)
def test_wmma_baseline_mirrors_its_mma_twin(preset):
    """Same tiling and pipeline; the warp-level routine (op) is what differs,
    and the tiles' layout: WMMA reads rows of one stride, so its tiles are
    padded where the tuned mma kernels' are swizzled (the padded mma kernel,
    _pad, is registered too). Tuned INT8 WMMA keeps the copies' schedule that
    is fastest for it."""
    for mma, wmma, pad in [("fp16_ptx_mma", "fp16_wmma", "fp16_ptx_pad"),
                           ("int8_ptx_mma_k32", "int8_wmma", "int8_ptx_pad"), ("int4_ptx_mma_k64", "int4_wmma", None)]:
        a, b = registry.get(mma, preset).describe(), registry.get(wmma, preset).describe()
        assert not b["swizzle"]
        if a["swizzle"]:
            assert registry.get(pad, preset) == registry.get(mma, preset).replace(swizzle=False)
        differ = {k for k in a if a[k] != b[k]} - {"op", "mma_k", "a_ldmatrix", "b_ldmatrix", "swizzle"}
        if preset == "paper" and mma == "int8_ptx_mma_k32":
            assert differ == {"bk"}          # the study's int8 WMMA steps k16 per tile
        elif mma == "int8_ptx_mma_k32":
            assert differ == {"interior_loop", "copy_parts"}
        else:
            assert differ == set()


def test_int4_wmma_uses_the_ptx_kernels_warp_tile():
    """Unlike the study (8 x 8 warp tiles), the INT4 WMMA baseline runs at equal tiling."""
    for preset in registry.PRESETS:
        assert registry.get("int4_wmma", preset).warp_tile == registry.get("int4_ptx_mma_k64", preset).warp_tile


def test_lookup_by_config_name_and_errors():
    cfg = registry.get("int8_ptx_mma_k32")
    assert registry.get(cfg.name) is cfg
    with pytest.raises(KeyError, match="no kernel"):
        registry.get("int8_nonexistent")
    with pytest.raises(ValueError, match="preset"):
        registry.get("int8_wmma", "fast")


def test_default_kernel_per_layout():
    assert registry.default("fp16", "kn").precision == "fp16"
    with pytest.raises(ValueError, match="take B as NK"):
        registry.default("int8", "kn")


def test_int4_default_widens_exactly_or_within_its_k_reach():
    """sm_90: the wgmma kernel whose B is widened by a kernel of its own,
    exact at any K; a kernel that widens to 16 x s8 has an exact twin past
    its K bound."""
    hopper = registry.default("int4", "nk", cc=(9, 0), k=4096)
    assert hopper is registry.get("int4_wgmma_unpack_s8") and hopper.unpack == "pass" and hopper.max_k is None
    assert registry.default("int4", "nk", cc=(9, 0), k=1 << 24) is hopper
    assert "B by a kernel of its own" in registry.describe_default("int4", (9, 0))
    scaled = registry.get("int4_wgmma_unpack_s8_ld")
    assert scaled.scaled and scaled.exact_twin == registry.get("int4_wgmma_unpack_s8_ld_exact")
    assert registry.default("int4", "nk", "paper", cc=(9, 0), k=1 << 20).max_k is None
    assert registry.default("int4", "nk", cc=(8, 9), k=1 << 20).unpack == "none"
    small_m = registry.default("int4", "nk", cc=(9, 0), m=16, k=8192)
    assert small_m is registry.get("int4_ptx_unpack_s8_m16") and small_m.bm == 16
    assert registry.default("int8", "nk", m=16).bm == 16
    assert registry.default("fp16", "kn", cc=(9, 0), m=1) is registry.get("fp16_ptx_mma_m16")
    assert registry.default("int8", "nk", m=17).bm > 16


def test_hopper_default_copies_with_tma():
    """On sm_90 gemm() takes the precision's wgmma kernel; elsewhere, and for
    the small-M kernels, the cp.async one."""
    for precision, layout, name in (("fp16", "kn", "fp16_wgmma"), ("int8", "nk", "int8_wgmma"),
                                    ("int4", "nk", "int4_wgmma_unpack_s8")):
        assert registry.default(precision, layout, cc=(9, 0), k=4096) is registry.get(name)
    assert registry.default("int8", "nk", cc=(8, 9)).copy == "cp_async"
    assert registry.default("int8", "nk", cc=(9, 0), m=16).copy == "cp_async"
    assert registry.default("int8", "nk", "paper", cc=(9, 0)).copy == "cp_async"
