"""numgemm.config: a variant is data, named from its fields, checked on creation."""

from dataclasses import fields

import pytest

from numgemm import kernel, registry
from numgemm.config import KernelConfig, field_suffix
from numgemm.precision import NARROW


def test_name_derives_from_fields():
    base = KernelConfig("int8", mma_k=32, bm=128, bn=256, bk=64, warps_m=2, warps_n=4, stages=4)
    assert base.name == "int8_mma32_128x256x64_w2x4_s4"
    assert base.replace(cache="ca").name == base.name + "_ca"
    assert base.replace(evict="evict_first", linkage="link").name == base.name + "_evict_first_link"
    assert base.replace(op="wmma").name == "int8_wmma_128x256x64_w2x4_s4"
    assert base.replace(k_stagger=1).name == base.name + "_kst1"
    assert base.replace(bk=128, copy_parts=2).name == base.replace(bk=128).name + "_cp2"
    assert base.replace(zfill_src="any").name == base.name + "_zfany"
    assert base.replace(interior_loop=True).name == base.name + "_iloop"
    assert base.replace(bk=128, copy="tma").name == base.replace(bk=128).name + "_tma"
    # TMA: swizzled, no bounds checks; the fields that say otherwise do not name it
    assert base.replace(bk=128, interior_loop=True, zfill_src="any", copy="tma").name == \
        base.replace(bk=128).name + "_tma"
    assert base.replace(bk=128, swizzle=True).name == base.replace(bk=128).name + "_swz"


def test_each_field_declares_its_values_and_name_fragment_once():
    """A field's knob is the one place its allowed values and its name
    fragment live: the default is one of the values, and two values of a
    named field never read alike."""
    for f in fields(KernelConfig):
        values, suffix = f.metadata["values"], f.metadata["suffix"]
        if values is not None and f.name != "precision":
            assert f.default in values, f.name
        if suffix is not None and values is not None:
            fragments = [field_suffix(f.name, v) for v in values if v != f.default]
            assert len(set(fragments)) == len(fragments) and all(fragments), f.name
    with pytest.raises(ValueError, match="KernelConfig cache must be ca or cg, got 'cs'"):
        KernelConfig("int8", cache="cs")


@pytest.mark.parametrize("changes,message", [
    (dict(swap=True), "swap is the wgmma kernels'"),
    (dict(load_sets=3), "load_sets, widen_in: the loads of a widening wgmma producer"),
    (dict(multicast="a"), "multicast b, or a"),
])
def test_a_field_moot_for_its_kernel_is_refused_not_named(changes, message):
    """A name says what a kernel does: a field that the kernel's paths would
    ignore is refused by the feature that owns it."""
    with pytest.raises(ValueError, match=message):
        registry.get("int8_ptx_mma_k32").replace(**changes)


def test_every_feature_rule_answers_a_list():
    cfg = registry.get("int8_wgmma")
    for rule in kernel.RULES:
        assert rule(cfg) == [], rule.__module__


def test_variant_is_one_field_changed():
    base = KernelConfig("fp16", b_layout="kn")
    variant = base.replace(stages=2)
    changed = {k for k, v in base.describe().items() if variant.describe()[k] != v}
    assert changed == {"stages"}


def test_defaults_follow_the_precision():
    assert KernelConfig("fp16").acc == "f32" and KernelConfig("fp16").mma_k == 16
    assert KernelConfig("int8").acc == "s32" and KernelConfig("int8").mma_k == 32
    assert KernelConfig("int4").mma_k == 64
    assert KernelConfig("int4", op="wmma").op_shape == (8, 8, 32)


def test_derived_sizes():
    c = KernelConfig("int8", bm=128, bn=128, bk=64, warps_m=2, warps_n=2, stages=3, smem_pad=16)
    assert c.threads == 128 and c.warp_tile == (64, 64)
    assert c.pitch_a == 80 and c.stage_bytes == 2 * 128 * 80
    assert c.smem_bytes == 3 * c.stage_bytes
    i4 = KernelConfig("int4", bk=128)
    assert i4.bk_bytes == 64 and i4.kstep_bytes == 32
    assert KernelConfig("fp16", b_layout="kn", bn=128, bk=32).b_tile_shape == (32, 256)


@pytest.mark.parametrize("changes,message", [
    (dict(mma_k=8), "mma has k in"),
    (dict(bk=8), "not a multiple of the operation's k"),
    (dict(stages=6), "stages must be 2..5"),
    (dict(smem_pad=8), "smem_pad"),
    (dict(a_ldmatrix=3), "a_ldmatrix must be 0, 1, 2 or 4, got 3"),
    (dict(cache="cs"), "cache"),
    (dict(b_layout="kn"), "int8 takes B as NK, not KN"),
    (dict(acc="f16"), "cannot accumulate in f16"),
    (dict(bm=100), "warp tile"),
    (dict(unpack="shared"), "unpack must be"),
    (dict(unpack="tile"), "unpack applies to int4"),
    (dict(bk=64, warps_k=4), "do not divide among warps_k=4"),
    (dict(warps_k=2, acc="s32", op="wmma"), "warps_k > 1"),
    (dict(bk=96, reg_buffers=2), "must be even"),
    (dict(k_stagger=-1), "k_stagger must be at least 0, got -1"),
    (dict(bk=128, copy_parts=4), r"copy_parts must be 1\.\.3"),     # 4 k steps, two buffers
    (dict(bk=128, reg_buffers=1, copy_parts=5), r"copy_parts must be 1\.\.4"),
    (dict(copy_parts=0), "copy_parts must be"),
    (dict(zfill_src="zero"), "zfill_src must be base or any"),
    (dict(copy="bulk"), "copy must be cp_async or tma"),
    (dict(bk=64, copy="tma"), "rows of 128 bytes of K: bk=64 is 64 bytes"),
    (dict(bk=128, bm=512, warps_m=8, copy="tma"), "at most 256"),
    (dict(bk=128, copy="tma", evict="evict_first"), "no evict policy"),
    (dict(bk=128, copy="tma", op="wmma"), r"swizzled tiles \(swizzle, copy=tma\) .* WMMA reads rows of one stride"),
    (dict(bk=128, copy="tma", private_tiles=True), "no private tiles"),
    (dict(bk=64, swizzle=True), "rows of 128 bytes of K"),
    (dict(bk=128, swizzle=True, op="wmma"), r"swizzled tiles \(swizzle, copy=cp_async\)"),
    (dict(bk=128, swizzle=True, warps_m=1, warps_n=1), "a multiple of 8 apart, not 4"),
])
def test_invalid_configs_say_why(changes, message):
    with pytest.raises(ValueError, match=message):
        KernelConfig("int8", **changes)


@pytest.mark.parametrize("changes,error,message", [
    (dict(bm=257), ValueError, "bm=257 does not divide among warps_m=2"),
    (dict(swizzle="yes"), TypeError, "swizzle must be a bool, got str 'yes'"),
    (dict(stages="4"), TypeError, "stages must be an int, got str '4'"),
    (dict(smem_pad=True), TypeError, "smem_pad must be an int, got bool"),
    (dict(bm=0), ValueError, "bm must be at least 1"),
    (dict(cache=None), TypeError, "cache must be a str"),
])
def test_fields_are_checked_by_name(changes, error, message):
    with pytest.raises(error, match=message):
        KernelConfig("int8", **changes)


def test_an_unknown_precision_is_named():
    with pytest.raises(ValueError, match="precision must be fp16, bf16, int8, e4m3, e5m2 or int4, got 'fp8'"):
        KernelConfig("fp8")


def test_shared_memory_limit():
    with pytest.raises(ValueError, match="shared memory"):
        KernelConfig("int8", bm=256, bn=256, bk=256, warps_m=4, warps_n=4, stages=5)


def test_fragment_buffers_follow_the_k_steps():
    """Two buffers alternate by k step; by default a config has two wherever a
    warp's steps per k-tile are even, and the name says so only when set otherwise."""
    assert KernelConfig("int8", bk=128).reg_buffers == 2             # 4 steps of k32
    assert KernelConfig("int8", bk=32).reg_buffers == 1              # 1 step
    assert KernelConfig("int8", bk=128, warps_k=4).reg_buffers == 1  # 1 step a warp
    c = KernelConfig("int8", bk=128)
    assert c.replace(reg_buffers=1).name == c.name + "_rb1"


def test_k_split_among_warps():
    c = KernelConfig("int4", bm=16, bn=64, bk=512, warps_m=1, warps_n=2, warps_k=2, unpack="scaled")
    assert c.threads == 128 and c.warp_tile == (16, 32)
    assert c.smem_bytes >= c.reduce_bytes == 16 * 64 * 4
    assert "_wk2" in c.name


def test_scaled_widening_bounds_k():
    assert KernelConfig("int4", unpack="scaled").max_k == 131071         # 256 * 64 * K < 2**31
    assert KernelConfig("int4", unpack="register").max_k is None
    assert KernelConfig("int4", unpack="scaled").op_shape == (16, 8, 64)


def test_tile_widening_stores_s8_tiles():
    """unpack="tile": K elements are s4 in global memory (bk / 2 bytes a row) and
    s8 in shared memory, where the int8 k32 warp routine reads them."""
    c = KernelConfig("int4", bk=256, unpack="tile")
    view = c.shared_view
    assert view.precision == "int8" and view.mma_k == 32 and view.unpack == "none"
    assert c.bk_bytes == 128 and view.bk_bytes == 256
    assert c.stage_bytes == view.stage_bytes == 2 * 128 * (256 + 16)
    assert c.smem_bytes == 3 * c.stage_bytes
    assert c.op_shape == (16, 8, 32) and c.max_k is None
    with pytest.raises(ValueError, match="b_layout=nk"):
        KernelConfig("int4", b_layout="kn", unpack="tile")


def test_a_from_registers_is_the_int4_wgmma_consumers():
    """a_regs: the wgmma widening kernels' A widened by the consumers; the
    stages keep the s8 view (A's raw s4 in the first of its two chunks), and
    the exact twin keeps A in registers."""
    from numgemm import registry

    rs = registry.get("int4_wgmma_unpack_s8_ld_rs")
    assert rs == registry.get("int4_wgmma_unpack_s8_ld_128").replace(a_regs=True) and rs.name.endswith("_aregs")
    assert not rs.shared_view.a_regs and rs.stage_bytes == registry.get("int4_wgmma_unpack_s8_ld_128").stage_bytes
    assert rs.exact_twin.a_regs and rs.exact_twin.unpack == "tile"
    with pytest.raises(ValueError, match="a_regs is the wgmma kernels' \\(INT4's A widened by the consumers"):
        KernelConfig("int4", unpack="scaled", a_regs=True)
    with pytest.raises(ValueError, match="a_regs: A widened by the consumers"):
        registry.get("int8_wgmma").replace(a_regs=True)


def test_widening_pass_stages_a_narrow_and_b_wide():
    """unpack="pass": TMA lands A's s4 in 64-byte rows (the 64-byte swizzle)
    and B's s8, which a kernel of its own widened, in 128-byte rows; the
    kernel is INT8's TMA block otherwise (its register split, its s8 wgmma),
    exact at any K. It is for INT4 wgmma with A from registers, a k-tile of
    128, B as N x K."""
    from numgemm import registry

    cfg = registry.get("int4_wgmma_unpack_s8")
    assert cfg.unpack == "pass" and cfg.copy == "tma" and not cfg.widens_tile and cfg.shared_view is cfg
    assert cfg.tma_box_bytes == (64, 128) and cfg.pitch_a == 64 and cfg.b_tile_shape == (256, 128)
    assert cfg.stage_bytes == 128 * 64 + 256 * 128 and cfg.register_split == (40, 232)
    assert cfg.mma_k == 32 and cfg.wgmma_prec.name == "int8" and cfg.max_k is None and not cfg.scaled
    assert cfg.name.endswith("_unpackpass_tma_cl2_pers_ew_aregs_sc")
    with pytest.raises(ValueError, match=r"with unpack=pass, always"):
        cfg.replace(a_regs=False)
    with pytest.raises(ValueError, match="unpack=pass: a k-tile of 64 bytes of s4"):
        cfg.replace(bk=256)
    with pytest.raises(ValueError, match="unpack=pass is a wgmma kernel's widening"):
        KernelConfig("int4", unpack="pass")


def test_swap_is_c_transposed_from_tma_kernels():
    """swap: C^T from INT4's pass kernel or INT8's and FP8's TMA kernels
    (tiles 16 columns wide only there), stored from registers."""
    from numgemm import registry

    swap = registry.get("int4_wgmma_unpack_s8_swap")
    assert swap.swap and swap.unpack == "pass" and not swap.stage_c and swap.name.endswith("_aregs_swap")
    narrow = registry.get("int8_wgmma_swap")
    assert narrow.bn == 16 and narrow.tma_box_rows == (64, 16) and narrow.name.endswith("_swap")
    message = "swap: C\\^T from an INT8, FP8 or unpack=pass INT4 TMA kernel"
    for cfg, bad in ((swap, dict(stage_c=True)), (swap, dict(split_k=2)), (narrow, dict(split_k=2)),
                     (registry.get("int4_wgmma_unpack_s8_ld"), dict(swap=True)),
                     (registry.get("fp16_wgmma"), dict(swap=True, stage_c=False))):
        with pytest.raises(ValueError, match=message):
            cfg.replace(**bad)
    with pytest.raises(ValueError, match="16 for C\\^T: swap"):
        narrow.replace(swap=False)


def test_even_waves_takes_the_fewest_blocks_for_the_same_waves():
    """A persistent grid with even_waves: as many waves as one block an SM
    would take, every block (cluster) the same count of tiles where they
    divide; the name says so only where it changes the grid's rule."""
    from numgemm import registry

    cfg = registry.get("fp16_wgmma")
    assert cfg.even_waves and "_pers_ew_" in cfg.name
    every = cfg.replace(even_waves=False)
    assert every.grid_blocks(8192, 8192, 132) == 132 and cfg.grid_blocks(8192, 8192, 132) == 128  # 2048 tiles
    assert cfg.grid_blocks(8192, 8448, 132) == every.grid_blocks(8192, 8448, 132) == 132    # 16 whole waves
    assert cfg.grid_blocks(2048, 2048, 132) == 128                                         # 128 tiles, one each
    assert cfg.grid_blocks(2200, 2600, 132) == 100          # 99 cluster pairs: 2 waves of 50 pairs, not of 66
    assert cfg.replace(cluster=1).grid_blocks(8192, 8192, 132) == 128
    for moot in (dict(persistent=False), dict(stream_k=True)):
        assert "_ew" not in cfg.replace(**moot).name
    assert cfg.replace(stream_k=True).grid_blocks(2048, 2048, 132) == 132


def test_register_split_fills_the_launch_bounds_pool():
    """register_split: what setmaxnreg moves from the producer to the
    consumers fits the registers the launch bound gives the block, the
    producer keeps its register sets of s4 (and never more than it had), and
    only the wgmma kernels have one."""
    from numgemm import registry

    assert registry.get("int8_wgmma").register_split == (40, 232)
    assert registry.get("int8_ptx_mma_k32").register_split is None
    narrow = dict(bm=64, warps_m=4, persistent=False, even_waves=False)      # one consumer warpgroup
    for cfg in (registry.get("int4_wgmma_unpack_s8_ld"), registry.get("int4_wgmma_unpack_s8_ld_pw"),
                registry.get("int4_wgmma_unpack_s8_ld_rs"), registry.get("int8_wgmma"),
                registry.get("fp16_wgmma").replace(**narrow),
                registry.get("fp16_wgmma").replace(**narrow, min_blocks=2),         # once asked for 232: a hang
                registry.get("int8_wgmma").replace(**narrow, bn=128, min_blocks=2)):
        producer, consumer = cfg.register_split
        entry = min(65536 // (cfg.threads * cfg.min_blocks), 256) // 8 * 8
        assert producer % 8 == 0 == consumer % 8 and producer < entry and consumer <= 248
        assert consumer >= min(entry, 232)
        assert producer * cfg.producer_threads + consumer * (cfg.threads - cfg.producer_threads) <= entry * cfg.threads
    assert registry.get("fp16_wgmma").replace(**narrow, min_blocks=2).register_split == (40, 216)
    wide = registry.get("int4_wgmma_unpack_s8_ld")
    assert wide.register_split == (128, 184)            # two sets of 48 registers a thread, 32 beside
    assert wide.replace(load_sets=1).register_split == (80, 208)
    assert wide.replace(load_sets=3).register_split is None     # 176 > 168: nothing to move


def test_load_sets_are_the_widening_producers():
    from numgemm import registry

    wide = registry.get("int4_wgmma_unpack_s8_ld")
    assert wide.replace(load_sets=1).name.endswith("_ls1") and wide.name == wide.replace(load_sets=2).name
    assert wide.replace(load_sets=3).shared_view.load_sets == 2
    with pytest.raises(ValueError, match=r"load_sets must be 1..4 \(widen_in=registers\), got 5"):
        wide.replace(load_sets=5)
    with pytest.raises(ValueError, match="load_sets, widen_in: the loads of a widening wgmma producer"):
        registry.get("int8_wgmma").replace(load_sets=3)
    staged = wide.replace(widen_in="stage", stages=3)
    assert staged.name.endswith("_winstage") and staged.shared_view.widen_in == "registers"
    assert staged.register_split == (64, 216)           # no register sets: the s4 waits in its stage
    with pytest.raises(ValueError, match=r"load_sets must be 1..2 \(widen_in=stage\), got 3"):
        staged.replace(load_sets=3)
    with pytest.raises(ValueError, match="widen_in must be registers or stage, got 'smem'"):
        wide.replace(widen_in="smem")


def test_tma_swizzles_instead_of_padding():
    """copy="tma": 128-byte rows with no padding, room to align the stages to
    the swizzle's 1024 bytes and an mbarrier per stage; sm_90 only."""
    cp = KernelConfig("int8", bm=256, bn=128, bk=128, warps_m=4, warps_n=2, stages=4)
    tma = cp.replace(copy="tma")
    assert cp.pitch_a == 144 and tma.pitch_a == tma.pitch_b == 128 and tma.swizzle
    assert tma.stage_bytes == (256 + 128) * 128
    assert tma.smem_bytes == 4 * tma.stage_bytes + 1024 + 4 * 8
    assert cp.min_cc == (8, 0) and tma.min_cc == (9, 0)
    # K x N B: boxes of 64 k rows x 128 bytes of N side by side, one per warp column
    kn = KernelConfig("fp16", b_layout="kn", bm=256, bn=128, bk=64, warps_m=4, warps_n=2, copy="tma")
    assert kn.tma_box_rows == (256, 64) and kn.pitch_b == 128 and kn.tile_bytes_b == 64 * 256
    with pytest.raises(ValueError, match="one 128-byte box wide"):
        kn.replace(bn=256)


def test_swizzle_without_tma():
    """swizzle: cp.async kernels (sm_80 on) lay their tiles out as TMA does,
    with 1/9 less shared memory than 16 bytes of padding."""
    pad = KernelConfig("int8", bm=256, bn=128, bk=128, warps_m=4, warps_n=2, stages=4)
    swz = pad.replace(swizzle=True)
    assert swz.swizzle and not pad.swizzle and swz.min_cc == (8, 0)
    assert swz.pitch_a == swz.pitch_b == 128 and swz.smem_bytes == 4 * (256 + 128) * 128
    assert pad.smem_bytes == 4 * (256 + 128) * 144
    kn = KernelConfig("fp16", b_layout="kn", bm=256, bn=128, bk=64, warps_m=4, warps_n=2, swizzle=True)
    assert kn.tile_bytes_b == kn.replace(copy="tma").tile_bytes_b == 64 * 256


def test_one_answer_to_where_a_kernel_runs():
    """unsupported() is what gemm(), the bench, inspect and the tests ask:
    None where the kernel runs, else the reason."""
    from numgemm import registry

    tma, evict = registry.get("int8_ptx_tma"), registry.get("int4_ptx_mma_k64_evict_first")
    assert tma.unsupported((9, 0)) is None and tma.unsupported("sm_90", launch=False) is None
    assert "needs sm_90" in tma.unsupported((8, 9)) and "needs sm_90" in tma.unsupported("sm_89", launch=False)
    assert "faults inside these GEMMs on sm_90" in evict.unsupported((9, 0))
    assert evict.unsupported("sm_90", launch=False) is None          # it builds; only its launch faults
    assert evict.unsupported((8, 9)) is None
    assert not tma.interior and registry.get("int8_ptx_mma_k32").interior


def test_half_c_is_fp16_with_f32_sums():
    import numpy as np

    fp16 = KernelConfig("fp16", b_layout="kn")
    assert fp16.c_dtype == np.float32 and not fp16.c_bits
    half = fp16.replace(out="f16")
    assert half.name == fp16.name + "_cf16" and half.c_dtype == np.float16 and half.c_bits
    assert fp16.replace(acc="f16").c_dtype == np.float16 and KernelConfig("int8").c_dtype == np.int32
    assert not half.replace(split_k=2).c_bits       # f32 slices: the split-K kernel rounds their sum
    for changes, message in ((dict(out="f32"), "out must be '', f16 or bf16, got 'f32'"), (dict(acc="f16"), "acc=f32"),
                             (dict(op="wmma"), "mma and wgmma epilogues"),
                             (dict(split_k=2, split_sum="last"), "split_sum=kernel")):
        with pytest.raises(ValueError, match=message):
            half.replace(**changes)
    with pytest.raises(ValueError, match="out=f16: int8 rounds C to no narrower format"):
        KernelConfig("int8", out="f16")
    with pytest.raises(ValueError, match="out=bf16: fp16 rounds C to f16"):
        fp16.replace(out="bf16")
    bf16 = KernelConfig("bf16", b_layout="kn", out="bf16")        # bfloat16's bit patterns
    assert bf16.c_dtype == np.uint16 and bf16.c_bits and NARROW[bf16.out].cvt == "cvt_bf16x2_f32"
    fp8 = registry.get("e4m3_wgmma")                    # FP8's C: float32, bfloat16's bits or float16
    assert [fp8.replace(out=o).c_dtype for o in ("", "bf16", "f16")] == [np.float32, np.uint16, np.float16]


def test_fp16_wgmma_tiles_of_64_and_32_columns_take_b_in_either_layout():
    """FP16 has m64n64 and m64n32 wgmma routines for a K-major B (an N x K
    weight) as for a K x N one; 192 and 320 only for K x N; INT8 neither."""
    from numgemm import registry

    base = registry.get("fp16_wgmma").replace(bm=64, warps_m=4, stages=4)
    for bn in (64, 32):
        for layout in ("kn", "nk"):
            assert base.replace(bn=bn, b_layout=layout).bn == bn
    with pytest.raises(ValueError, match="192, 320 with B as K x N"):
        base.replace(bn=192, b_layout="nk")
    with pytest.raises(ValueError, match="int8 has routines for N = 128, 256"):
        registry.get("int8_wgmma").replace(bm=64, warps_m=4, bn=64, stages=4)
