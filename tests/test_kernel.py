"""numgemm.kernel: every registered kernel, offline (SASS) and on the GPU (exact)."""

import os

import numpy as np
import pytest

from numgemm import operands, registry
from numgemm.kernel import build_config, expected_sass, prebuild_offline, warp_wgmma
from numgemm.quant import pack_int4

REGISTERED = [(p, n) for p in registry.PRESETS for n in registry.names(p)]
# Each kernel on the targets it runs on (copy="tma": sm_90 only); under
# pytest-xdist a kernel's targets go to one worker (--dist loadgroup), whose
# first build makes both.
OFFLINE = [pytest.param(p, n, t, marks=pytest.mark.xdist_group(f"{p}/{n}"))
           for p, n in REGISTERED for t in ("sm_89", "sm_90")
           if not registry.get(n, p).unsupported(t, launch=False)]


@pytest.fixture(scope="module")
def built(request):
    """The kernels this run's test_sass items ask for, built into the kernel
    cache a core each at the start (one front end builds both targets): the
    cold CPU suite's longest wait, halved on CI's two cores. Under
    pytest-xdist the workers are the cores: each builds what its items ask."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    wanted = {(i.callspec.params["preset"], i.callspec.params["name"]) for i in request.session.items
              if getattr(i, "originalname", None) == "test_sass"}
    prebuild_offline([registry.get(n, p) for p, n in sorted(wanted)], ["sm_89", "sm_90"], os.cpu_count() or 1)


@pytest.mark.builds
@pytest.mark.parametrize("preset,name,target", OFFLINE)
def test_sass(built, preset, name, target):
    cfg = registry.get(name, preset)
    expected_sass_holds(cfg, build_config(cfg, target), target)


def test_a_prebuild_builds_the_targets_asked_and_no_other(monkeypatch, tmp_path):
    """prebuild_offline's miss builds the targets it was given (the shipped
    winners' sm_90 alone); a build_config of one target also the
    BUILT_TOGETHER ones, which test_sass and inspect ask for next."""
    from numgemm import kernel

    monkeypatch.setenv("NUMGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMGEMM_CACHE", raising=False)
    calls, asked = [], []
    monkeypatch.setattr(kernel, "_in_processes", lambda fn, c, jobs: calls.extend((fn, *args) for args in c))

    class Asked(Exception):
        """What was asked is all this test reads: no build runs."""

    def build_many(pyfunc, argtypes, targets, **options):
        asked.append(list(targets))
        raise Asked
    monkeypatch.setattr(kernel, "build_many", build_many)
    cfg = registry.get("fp16_ptx_mma")
    prebuild_offline([cfg], ["sm_90"], 2)
    (fn, *args), = calls
    for call in (lambda: fn(*args), lambda: build_config(cfg, "sm_90")):
        with pytest.raises(Asked):
            call()
    assert asked == [["sm_90"], ["sm_90", "sm_89"]]


def expected_sass_holds(cfg, b, target):
    """What cfg's SASS b must hold on target: its instruction, no spills or
    calls but where expected, and each path's copies and stores."""
    opcode, calls_expected = expected_sass(cfg, target)
    assert b.count(opcode) >= 1, f"{cfg.name} on {target}: no {opcode}"
    # Emulated s4 (sm_90) runs ptxas's own routines; the element-wise loaders
    # (manual pack) need more registers than the 255 two blocks per SM allow.
    # Both may spill; every other kernel keeps everything in registers.
    if not (calls_expected or cfg.a_ldmatrix == 0):
        assert b.local_bytes == 0 and b.count("LDL") == 0 and b.count("STL") == 0, b.summary()
    if not calls_expected:
        assert b.calls == 0, f"{cfg.name} on {target} calls a function"
    if cfg.op == "wgmma":            # the ring's stages, the accumulators never leaving the wgmmas' registers
        if cfg.widens_tile:          # the producer's loads, widened into the stages
            assert b.count("LDG.E.128") >= 1 and b.count("STS.128") >= 1 and b.count("FENCE.VIEW.ASYNC.S") >= 1
        else:                        # TMA, and the producer's registers given to the consumers
            assert b.count("UTMALDG.3D") >= 2 and b.count("USETMAXREG.DEALLOC") == 1
            assert b.count("USETMAXREG.TRY_ALLOC") == 1
        # A from registers (a_regs): the consumers read its s4 with ldmatrix
        assert b.count("LDGSTS") == 0 and (b.count("LDSM") >= 1) == cfg.a_regs
        assert b.count("WARPGROUP.DEPBAR.LE") >= 1 and b.count("SYNCS.ARRIVE.TRANS64") >= 2
        assert (b.count("UTMALDG.3D.MULTICAST") >= 1) == (cfg.cluster > 1)
        if cfg.swap:                 # C^T's words one at a time, each instruction four rows of C
            assert b.instructions.count("STG.E") == cfg.warp_tile[0] * cfg.warp_tile[1] // 32
        else:
            pairs = cfg.warp_tile[0] * cfg.warp_tile[1] // (128 if cfg.c_bits else 64)
            assert b.instructions.count("STG.E.64") == pairs
        if cfg.stage_c:              # inside C: through the warp's buffer, 16 bytes a lane (c_tma: a TMA store a chunk)
            pieces = cfg.warp_tile[0] * cfg.warp_tile[1] * (2 if cfg.c_bits else 4) // 512
            assert b.instructions.count("LDS.128") == b.instructions.count("STG.E.128") == (0 if cfg.c_tma else pieces)
            assert b.count("UTMASTG") == (pieces // 4 if cfg.c_tma else 0)     # 2 KB a store
    if cfg.op == "mma":
        if cfg.unpack == "tile":         # global -> registers -> (widened) shared
            assert b.count("LDG.E.128") >= 1 and b.count("STS.128") >= 1 and b.count("LDGSTS") == 0
        elif cfg.copy == "tma":          # a box of A and one of B per k-tile, waited for on an mbarrier
            assert b.count("UTMALDG.3D") >= 2 and b.count("LDGSTS") == 0
            assert b.count("SYNCS.PHASECHK") >= 1 and b.count("SYNCS.ARRIVE") >= 1
        else:
            assert b.count("LDGSTS") >= 1
        assert b.count("LDSM") >= 1 or cfg.a_ldmatrix == cfg.b_ldmatrix == 0
        # A block tile inside an aligned C stores accumulator pairs whole: 8 bytes (f16x2: 4).
        wm, wn = cfg.warp_tile
        stores = b.instructions.count("STG.E" if cfg.acc == "f16" else "STG.E.64")
        assert stores == wm * wn // (128 if cfg.c_bits and cfg.acc == "f32" else 64), f"{cfg.name}: {stores} stores"
    if cfg.c_bits and cfg.acc == "f32":     # each f32 pair rounded to one f16x2 word, passed on in the quad
        pairs = cfg.warp_tile[0] * cfg.warp_tile[1] // 64       # (stage_c: rounded on the staged path too)
        assert b.count("SHFL.BFLY") == pairs and b.count("F2FP") == pairs * (2 if cfg.stage_c else 1)


@pytest.mark.parametrize("name,fields,target", [("fp16_ptx_mma", {}, "sm_80"), ("fp16_ptx_mma_m16", {}, "sm_89"),
                                                ("fp16_wgmma", dict(bn=320, stage_c=False), "sm_90"),
                                                ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=64, stages=13, stage_c=False),
                                                 "sm_90"),
                                                ("bf16_ptx_mma", {}, "sm_80"),
                                                ("bf16_wgmma", dict(bn=320, stage_c=False), "sm_90")])
@pytest.mark.builds
def test_half_c_rounds_each_pair_once(name, fields, target):
    """out="f16" (BF16: "bf16") on every target: one cvt (F2FP, .F16.F32.PACK_AB
    from sm_89; BF16's .BF16) and one shuffle per f32 pair of a tile
    inside C, one 8-byte store per two (a quad's, a whole sector), and
    nothing in local memory."""
    cfg = registry.get(name)
    cfg = cfg.replace(out=cfg.prec.narrow, **fields)
    b = build_config(cfg, target)
    converts = [op for op in b.instructions if op.startswith("F2FP")]
    assert all(("BF16" in op) == bool(cfg.prec.encoding) for op in converts)
    pairs = cfg.warp_tile[0] * cfg.warp_tile[1] // 64
    assert b.count("F2FP") == b.count("SHFL.BFLY") == pairs and b.local_bytes == 0, b.summary()
    assert b.instructions.count("STG.E.64") == pairs // 2 and b.instructions.count("STG.E") == 0


@pytest.mark.builds
def test_copy_parts_put_mmas_between_the_copies():
    """Padded INT8 in one checked loop (tuned before the swizzle) started a
    k-tile's 12 copies in two parts: its k loop then has no stretch without
    an mma as long as with all copies at once."""
    cfg = registry.get("int8_ptx_pad").replace(interior_loop=False, copy_parts=2)
    spread, at_once = (build_config(c, "sm_90").main_loop() for c in (cfg, cfg.replace(copy_parts=1)))
    assert spread.mmas == at_once.mmas == 128               # 4 k steps of a 64 x 64 warp tile
    assert spread.shape.count("G") == at_once.shape.count("G") == 12
    assert spread.longest_gap < at_once.longest_gap, (spread.shape, at_once.shape)


@pytest.mark.builds
def test_interior_loop_drops_the_copy_checks():
    """Two k loops: the checked one compares (and, zfill_src="base", selects)
    per copy; the interior one has the same copies and mmas without either."""
    cfg = registry.get("int8_ptx_mma_k32").replace(interior_loop=True, zfill_src="base")
    loops = [lp for lp in build_config(cfg, "sm_90").loops if lp.mmas]
    assert len(loops) == 2
    inner, checked = sorted(loops, key=lambda lp: len(lp.ops))
    assert inner.mmas == checked.mmas and inner.shape.count("G") == checked.shape.count("G") == 12
    count = lambda lp, op: sum(o.startswith(op) for o in lp.ops)      # noqa: E731
    assert count(checked, "SEL") >= 12 and count(checked, "ISETP") >= 12
    assert count(inner, "SEL") == count(inner, "ISETP") == 0


@pytest.mark.builds
def test_tma_loop_has_no_copies_of_its_own():
    """copy="tma": in the k loop each warp waits on the stage's mbarrier and
    issues no global -> shared copies; one thread's two bulk tensor copies
    replace the 12 LDGSTS a thread issues with cp.async, with their address
    arithmetic and (in the checked loop) bounds checks."""
    cfg = registry.get("int8_ptx_tma")
    assert cfg == registry.get("int8_ptx_mma_k32").replace(copy="tma")
    tma = build_config(cfg, "sm_90").main_loop()
    cp = max((lp for lp in build_config(registry.get("int8_ptx_mma_k32"), "sm_90").loops if lp.mmas),
             key=lambda lp: len(lp.ops))
    assert tma.mmas == cp.mmas == 128 and tma.shape.count("L") == cp.shape.count("L") == 32
    count = lambda lp, op: sum(o.startswith(op) for o in lp.ops)      # noqa: E731
    assert count(tma, "LDGSTS") == 0 and count(tma, "UTMALDG") == 2 and count(tma, "SYNCS.PHASECHK") == 1
    assert count(cp, "LDGSTS") == 12
    assert len(tma.ops) < len(cp.ops) - 40, (len(tma.ops), len(cp.ops))


def test_tma_kernels_are_for_sm90_only(capsys):
    from numgemm.inspect import main

    with pytest.raises(ValueError, match="needs sm_90"):
        build_config(registry.get("int8_ptx_tma"), "sm_89")
    assert main(["int8_ptx_tma", "--target", "sm_89"]) == 0
    assert "int8_ptx_tma: not built: " in capsys.readouterr().out


@pytest.mark.builds
def test_s4_on_hopper_is_emulated_not_native():
    cfg = registry.get("int4_ptx_mma_k64")
    hopper, ada = build_config(cfg, "sm_90"), build_config(cfg, "sm_89")
    assert hopper.count("IMMA.16864.S4") == 0 and hopper.calls > 0
    assert ada.count("IMMA.16864.S4.S4") > 0 and ada.calls == 0


@pytest.mark.builds
def test_link_linkage_calls_the_ptx():
    cfg = registry.get("int8_ptx_mma_k32", "paper").replace(linkage="link")
    assert build_config(cfg, "sm_89").calls > 0


# --- on the GPU --------------------------------------------------------------------

SHAPES = [(2, 520, 1000, 776), (1, 64, 48, 128), (3, 17, 300, 96)]


def check_kernel(cfg, batch, M, N, K, rng, out_offset=0, **select):
    """gemm() with cfg's kernel (select: kernel=name, preset=... or kernel=cfg)
    on fresh operands, into a poisoned output, against the reference.
    out_offset: the output is a view that many elements into wider rows."""
    import numgemm

    a, b, ref = operands.kernel_operands(cfg, batch, M, N, K, rng)
    whole = operands.poisoned(cfg.precision, (batch, M, N + out_offset), cfg.c_dtype)
    numgemm.gemm(a, b, precision=cfg.precision, out=whole[:, :, out_offset:], k=K, **select)
    got = whole.copy_to_host()
    left = got[:, :, :out_offset]                       # not C's: must stay poisoned
    assert np.isnan(left).all() if cfg.precision == "fp16" else (left == cfg.prec.poison).all()
    why = operands.mismatch(got[:, :, out_offset:], ref, cfg.precision, cfg.acc)
    assert why is None, f"{cfg.name} at {batch}x{M}x{N}x{K}: {why}"


@pytest.mark.gpu
@pytest.mark.parametrize("preset,name", REGISTERED)
def test_kernel_gpu(preset, name, rng):
    """Every shape in one test: the kernel compiles once."""
    from numba import cuda

    import numgemm
    from numgemm.plans import NotOnThisGPU

    cfg = registry.get(name, preset)
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:         # refused, with the reason, before anything is launched
        with pytest.raises(NotOnThisGPU) as refused:
            numgemm.gemm(*operands.kernel_operands(cfg, 1, 32, 32, 64, rng)[:2], precision=cfg.precision,
                         kernel=name, preset=preset)
        assert str(refused.value) == why
        return
    for batch, M, N, K in SHAPES:
        if cfg.precision == "int4":
            K -= 1                                       # odd K: a padded nibble
        check_kernel(cfg, batch, M, N, K, rng, kernel=name, preset=preset)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp16_wmma", "fp16_ptx_mma", "fp16_ptx_fp16acc", "int8_ptx_mma_k32"])
def test_output_not_aligned_for_pair_stores(name, rng):
    """out one element into its rows: whole tiles of a C that is not 32-byte
    aligned go element by element (mma) or through shared memory (WMMA)."""
    check_kernel(registry.get(name), 2, 512, 256, 128, rng, out_offset=1, kernel=name)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp16_wmma", "fp16_ptx_mma", "int8_ptx_mma_k32", "int4_ptx_unpack_s8",
                                  "int4_ptx_unpack_s8_tile", "int4_ptx_mma_k64_kn_ldg16"])
def test_interior_loop_beside_edge_blocks(name, rng):
    """interior_loop: K in whole k-tiles, so the blocks inside M and N run the
    unchecked k loop while those on the last tile row and column run the
    checked one, in one launch."""
    cfg = registry.get(name).replace(interior_loop=True)
    check_kernel(cfg, 2, 520, 1000, 1024, rng, kernel=cfg)


def skip_unless_it_runs_here(cfg):
    from numba import cuda

    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp16_ptx_tma", "int8_ptx_tma", "int4_ptx_unpack_s8_tma", "fp16_wgmma", "int8_wgmma",
                                  "int4_wgmma_unpack_s8_ld", "int4_wgmma_unpack_s8"])
def test_tma_operands_of_every_shape(name, rng):
    """copy="tma" (sm_90): the tensor maps follow the operands: one whole
    tile, edges on every side with K short of one k-tile, a 1 x 1 output,
    the first shape again with new data (maps are cached by address and
    shape); INT8 also with B shared by every batch and A a view into wider rows."""
    from numba import cuda

    import numgemm

    cfg = registry.get(name)
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K in ((1, 256, 128, 256), (2, 300, 200, 40), (1, 1, 1, 16), (1, 256, 128, 256)):
        check_kernel(cfg, batch, M, N, K, rng, kernel=name)
    if cfg.precision == "int8":
        a, b, _ = operands.kernel_operands(cfg, 3, 260, 130, 520, rng)
        ref = a.astype(np.int64) @ b[0].astype(np.int64)
        wide = np.zeros((3, 260, 528), np.int8)               # rows 528 bytes apart
        wide[:, :, :520] = a
        for a_dev in (cuda.to_device(a), cuda.to_device(wide)[:, :, :520]):
            got = numgemm.gemm(a_dev, cuda.to_device(b[0]), precision="int8", kernel=name).copy_to_host()
            np.testing.assert_array_equal(got.astype(np.int64), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", [("fp16_wgmma", dict(cluster=2)), ("fp16_wgmma", dict(persistent=True)),
                                         ("int8_wgmma", dict(cluster=2, persistent=True)),
                                         ("int4_wgmma_unpack_s8_ld", dict(persistent=False)),
                                         ("int4_wgmma_unpack_s8_ld_exact", {}),
                                         ("int4_wgmma_unpack_s8_ld_pw", {}),
                                         ("int4_wgmma_unpack_s8_ld", dict(widen_in="stage", stages=3)),
                                         ("int4_wgmma_unpack_s8_ld_pw", dict(widen_in="stage", stages=3)),
                                         ("int4_wgmma_unpack_s8_ld_exact", dict(widen_in="stage", load_sets=1,
                                                                             persistent=False)),
                                         ("int4_wgmma_unpack_s8_ld_rs", dict(persistent=False)),
                                         ("int4_wgmma_unpack_s8", dict(cluster=1, persistent=False)),
                                         ("int4_wgmma_unpack_s8", dict(bn=128, stage_c=False)),
                                         ("int4_wgmma_unpack_s8_swap", {}),
                                         ("int4_wgmma_unpack_s8_swap", dict(bn=256, stages=5, cluster=1,
                                                                            persistent=False)),
                                         ("int4_wgmma_unpack_s8_swap", dict(bm=64, warps_m=4)),
                                         ("int8_wgmma_swap", {}), ("int8_wgmma_swap", dict(cluster=2)),
                                         ("int8_wgmma_swap", dict(bm=128, warps_m=8, stages=12, persistent=False)),
                                         ("e4m3_wgmma_swap", {}), ("e5m2_wgmma_swap", dict(cluster=2)),
                                         ("fp16_wgmma", dict(b_layout="nk", cluster=2, persistent=True)),
                                         ("fp16_wgmma", dict(bn=128)), ("int8_wgmma", dict(bn=128, cluster=1)),
                                         ("int8_wgmma", dict(bm=64, warps_m=4, bn=128)),
                                         ("fp16_wgmma", dict(bm=64, warps_m=4, bn=128, persistent=False)),
                                         ("fp16_wgmma", dict(bn=320, stage_c=False)),
                                         ("fp16_wgmma", dict(bn=320, cluster=1, stage_c=False)),
                                         ("fp16_wgmma", dict(bm=64, warps_m=4, bn=64, stages=12, cluster=1)),
                                         ("fp16_wgmma", dict(bm=64, warps_m=4, bn=64, stages=12, multicast="a")),
                                         ("int8_wgmma", dict(bm=64, warps_m=4, bn=128, multicast="a",
                                                             persistent=False)),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=16)),
                                         ("fp16_wgmma", dict(bm=64, warps_m=4, bn=32, stages=8, persistent=False)),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=8, split_k=2)),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=64, stages=8, b_layout="nk")),
                                         ("fp16_wgmma", dict(bm=64, warps_m=4, bn=32, stages=8, b_layout="nk")),
                                         ("fp16_wgmma", dict(stage_c=False)), ("int8_wgmma_cl1", dict(stage_c=False)),
                                         ("fp16_wgmma_c16", dict(c_tma=True)), ("int8_wgmma_cl1", dict(c_tma=True)),
                                         ("fp16_wgmma", dict(c_tma=True, cluster=1, persistent=False)),
                                         ("fp16_wgmma_c16", dict(stagger=2)), ("int8_wgmma_cl1", dict(stagger=3)),
                                         ("fp16_wgmma", dict(stagger=3, cluster=1, persistent=False)),
                                         ("fp16_wgmma", dict(bn=320, stages=3)),
                                         ("fp16_wgmma", dict(bn=192)), ("fp16_wgmma_cl1", dict(bn=192, stages=5)),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=16, stage_c=False)),
                                         ("int8_wgmma", dict(bm=64, warps_m=4, bn=128, split_k=2)),
                                         ("fp16_wgmma", dict(even_waves=False)), ("int8_wgmma", dict(cluster=4)),
                                         # two blocks an SM: the consumers' setmaxnreg.inc within the smaller pool
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=128, stages=4, min_blocks=2,
                                                                 persistent=False, even_waves=False)),
                                         ("int8_wgmma_cl1", dict(bm=64, warps_m=4, bn=128, stages=4, min_blocks=2,
                                                                 persistent=False, even_waves=False)),
                                         ("fp16_wgmma_c16", dict(cluster=4))])
def test_wgmma_clusters_and_persistent_tiles(name, fields, rng):
    """A cluster pairs tile rows (an odd count leaves a CTA past M, which must
    still share its part of B and store nothing; multicast="a": tile columns,
    past N, sharing A; four rows share B too); a persistent grid walks more
    tiles than the GPU has SMs (even_waves: in fewer blocks), its ring's
    barrier phases running on across tiles."""
    cfg = registry.get(name).replace(**fields)
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K in ((1, 300, 520, 200), (2, 1030, 2100, 136), (1, 2200, 2600, 72)):
        check_kernel(cfg, batch, M, N, K, rng, kernel=cfg)


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", [("fp16_wgmma", {}), ("int8_wgmma_cl1", {}),
                                         ("fp16_wgmma_c16", dict(c_tma=True, cluster=1)),
                                         ("fp16_wgmma", dict(bn=64, b_layout="nk", stage_c=False)),
                                         ("bf16_wgmma", dict(persistent=False)), ("e4m3_wgmma_cl1", {})])
def test_pingpong_turns_over_many_tiles(name, fields, rng):
    """pingpong: the warpgroups take a block's tiles in turn (alone, in
    clusters of two, one tile a block), the ring's uses of each tile all
    one warpgroup's, through batches and edge tiles."""
    cfg = registry.get(name).replace(bn=128, pingpong=True).replace(**fields)
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K in ((1, 300, 520, 200), (2, 1030, 2100, 136), (1, 2200, 2600, 72), (1, 4100, 4000, 520)):
        check_kernel(cfg, batch, M, N, K, rng, kernel=cfg)


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", [("fp16_wgmma_c16", {}), ("fp16_wgmma", dict(cluster=1, persistent=False)),
                                         ("int8_wgmma_cl1", {})])
def test_c_by_tma_store(name, fields, rng):
    """c_tma: C's interior tiles leave through its tensor map, in batches, and
    into a C whose rows lie inside wider ones, leaving the columns past N
    poisoned (the map's rows end at N); the edge tiles from registers."""
    cfg = registry.get(name).replace(c_tma=True, **fields)
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K, offset in ((2, 300, 1040, 200, 0), (1, 1030, 2048, 136, 16)):
        check_kernel(cfg, batch, M, N, K, rng, out_offset=offset, kernel=cfg)


@pytest.mark.gpu
def test_a_plan_keeps_its_own_tensor_maps(rng, monkeypatch):
    """The map cache keeps two Maps, its slabs hold two: three operand pairs
    evict the first pair's Maps from the cache, and its kept plan still reads
    its own operands; the first pair again finds the Maps its plan holds
    (the same address), not a copy."""
    import numgemm
    from numgemm import tensormap

    cfg = registry.get("int8_ptx_tma")
    skip_unless_it_runs_here(cfg)
    monkeypatch.setattr(tensormap, "_CACHED", 2)
    monkeypatch.setattr(tensormap, "_PER_SLAB", 2)
    monkeypatch.setattr(tensormap, "_SLABS", {})       # slabs of its own, and none left to later tests
    monkeypatch.setattr(tensormap, "_RECENT", type(tensormap._RECENT)())
    shapes = [(64 * (i + 1), 96, 256) for i in range(3)]
    host = [operands.values("int8", 1, M, N, K, rng) for M, N, K in shapes]
    dev = [operands.to_device("int8", "nk", a, bt) for a, bt in host]
    outs = [operands.poisoned("int8", (1, M, N)) for M, N, _ in shapes]
    plans = [numgemm.plan_gemm(a, b, kernel=cfg, out=o) for (a, b), o in zip(dev, outs)]
    assert len(tensormap._RECENT) == 2 and plans[0].maps[0].address not in (p.maps[0].address for p in plans[1:])
    for i in (2, 1, 0):
        plans[i].launch()
        np.testing.assert_array_equal(outs[i].copy_to_host(), operands.expected("int8", *host[i]))
    again = numgemm.plan_gemm(*dev[0], kernel=cfg, out=outs[0])
    assert again.maps[0] is plans[0].maps[0]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp16_ptx_mma", "int8_ptx_mma_k32", "int4_ptx_unpack_s8"])
def test_staggered_k_order_visits_every_k_tile(name, rng):
    """k_stagger: each block starts at its own k-tile and wraps around. 38
    k-tiles, the last one ragged, and 16 blocks per batch starting at 16
    different k-tiles."""
    cfg = registry.get(name, "paper").replace(k_stagger=3)
    check_kernel(cfg, 2, 100, 200, 37 * cfg.bk + 16, rng, kernel=cfg)


@pytest.mark.gpu
def test_int4_default_suits_the_gpu(rng):
    from numba import cuda

    import numgemm
    from numgemm.toolchain import has_native_s4_mma

    cc = cuda.get_current_device().compute_capability
    cfg = registry.default("int4", "nk", "tuned", cc)
    assert (cfg.unpack == "none") == has_native_s4_mma(cc)
    a, b, ref = operands.kernel_operands(cfg, 1, 64, 64, 128, rng)
    assert np.array_equal(numgemm.gemm(a, b, precision="int4"), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["int4_ptx_unpack_s8", "int4_wgmma_unpack_s8_ld", "int4_wgmma_unpack_s8_ld_rs"])
def test_scaled_widening_is_exact_to_its_k_limit(name, rng):
    """The scaled widening sums 256 x each product: exact up to max_k, where a
    row of -8 against a row of -8 brings the sum to the edge of s32; past it,
    gemm() refuses the kernel rather than wrap."""
    from numba import cuda

    import numgemm

    cfg = registry.get(name)
    skip_unless_it_runs_here(cfg)
    K = cfg.max_k
    a = np.full((16, K), -8)
    bt = rng.integers(-8, 8, (24, K))
    bt[0] = -8
    ref = a @ bt.T
    assert ref[0, 0] * 256 == 2**31 - 1 - (2**31 - 1) % (256 * 64)       # the largest sum there is
    out = cuda.to_device(np.full((16, 24), -(2**31), np.int32))
    numgemm.gemm(pack_int4(a), pack_int4(bt).T, precision="int4", kernel=name, out=out, k=K)
    np.testing.assert_array_equal(out.copy_to_host().astype(np.int64), ref)
    with pytest.raises(ValueError, match="exact for K <="):
        wide = np.full((16, K + 1), -8)
        numgemm.gemm(pack_int4(wide), pack_int4(wide).T, precision="int4", kernel=name)


@pytest.mark.builds
@pytest.mark.parametrize("name,fields", [("fp16_wgmma", dict(bn=128)), ("int8_wgmma", dict(bm=64, warps_m=4, bn=128))])
def test_wgmma_in_tiles_of_128_columns(name, fields):
    """m64n128: 64 accumulators a consumer thread, no spills, the producer's
    registers still handed over."""
    cfg = registry.get(name).replace(**fields)
    b = build_config(cfg, "sm_90")
    assert b.count(expected_sass(cfg, "sm_90")[0]) >= 1 and "64x128" in expected_sass(cfg, "sm_90")[0]
    assert b.local_bytes == 0 and b.calls == 0 and b.count("USETMAXREG.TRY_ALLOC") == 1


@pytest.mark.builds
@pytest.mark.parametrize("cluster", [1, 2])
def test_wgmma_320_columns_as_two_instructions(cluster):
    """bn=320: each k step an m64n256 and an m64n64 side by side, their
    accumulators in registers (160 a consumer thread), no calls; a cluster
    pair shares B's five boxes three and two."""
    cfg = registry.get("fp16_wgmma").replace(bn=320, cluster=cluster, stage_c=False)
    b = build_config(cfg, "sm_90")
    wide, narrow = b.count("HGMMA.64x256x16.F32"), b.count("HGMMA.64x64x16.F32")
    assert wide >= cfg.ksteps and wide == narrow
    assert b.local_bytes == 0 and b.calls == 0 and b.count("USETMAXREG.TRY_ALLOC") == 1


@pytest.mark.builds
@pytest.mark.parametrize("cluster", [1, 2])
def test_wgmma_192_columns_in_three_boxes(cluster):
    """bn=192: one m64n192 a k step over B's three boxes of 64 columns (96
    accumulators a consumer thread), C staged as for 256; a cluster pair
    shares the three boxes two and one."""
    cfg = registry.get("fp16_wgmma").replace(bn=192, cluster=cluster, stages=5)
    assert cfg.b_swizzle == 128 and cfg.tile_bytes_b == 64 * 192 * 2
    b = build_config(cfg, "sm_90")
    assert b.count("HGMMA.64x192x16.F32") >= cfg.ksteps and b.count("HGMMA.64x256x16.F32") == 0
    assert b.local_bytes == 0 and b.calls == 0 and b.count("USETMAXREG.TRY_ALLOC") == 1
    assert (b.count("UTMALDG.3D.MULTICAST") >= 1) == (cluster == 2)


@pytest.mark.builds
def test_cluster_shares_a_along_n():
    """multicast="a": each CTA of the pair loads half of A's rows (a box of
    bm / 2 rows) and multicasts it, and all of B; the tile columns come in
    whole clusters."""
    cfg = registry.get("fp16_wgmma_cl1").replace(bm=64, warps_m=4, bn=64, stages=13, cluster=2, multicast="a")
    assert cfg.tma_box_rows == (32, 64) and cfg.grid_blocks(64, 4096 - 64, 132) == 64
    b = build_config(cfg, "sm_90")
    assert b.count("UTMALDG.3D.MULTICAST") >= 1 and b.local_bytes == 0
    with pytest.raises(ValueError, match="multicast b, or a"):
        cfg.replace(cluster=1)


@pytest.mark.builds
def test_wgmma_32_columns_in_the_64_byte_swizzle():
    """A K x N B tile 32 columns wide is one TMA box of 64-byte rows in the
    64-byte swizzle, which m64n32k16 reads through a descriptor of that
    swizzle: 16 accumulators a thread, no local memory, no calls."""
    cfg = registry.get("fp16_wgmma_cl1").replace(bm=64, warps_m=4, bn=32, stages=16)
    assert cfg.b_swizzle == 64 and cfg.tma_box_bytes == (128, 64) and cfg.tile_bytes_b == 64 * 64
    assert cfg.replace(bn=64, stages=8).b_swizzle == cfg.replace(b_layout="nk", bn=128, stages=4).b_swizzle == 128
    b = build_config(cfg, "sm_90")
    assert b.count("HGMMA.64x32x16.F32") >= cfg.ksteps and b.local_bytes == 0 and b.calls == 0


@pytest.mark.builds
@pytest.mark.parametrize("bn", [64, 32])
def test_wgmma_narrow_tiles_read_an_n_x_k_weight(bn):
    """An N x K B (K-major, an nn.Linear weight) in tiles 64 or 32 columns
    wide: m64n64k16 or m64n32k16 without the transpose, B's rows in the
    128-byte swizzle as for wider tiles; no local memory, no calls."""
    cfg = registry.get("fp16_wgmma_cl1").replace(bm=64, warps_m=4, bn=bn, stages=8, b_layout="nk")
    assert cfg.b_swizzle == 128 and cfg.tma_box_rows == (64, bn)
    b = build_config(cfg, "sm_90")
    assert b.count(f"HGMMA.64x{bn}x16.F32") >= cfg.ksteps and b.local_bytes == 0 and b.calls == 0


@pytest.mark.parametrize("name,fields", [("fp16_wgmma", {}), ("fp16_wgmma_c16", {}), ("int8_wgmma_cl1", {}),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=16)),
                                         ("fp16_wgmma_c16", dict(bn=192, stages=5))])
@pytest.mark.builds
def test_staged_c_stores_whole_lines(name, fields):
    """stage_c: a consumer thread writes each accumulator pair (f16 C: each
    rounded word) to its warp's buffer once, and reads back and stores 16
    bytes per 16 of C (a warp's instruction: whole 128-byte rows of the
    chunk); the pair stores from registers stay for C's edges. No local
    memory, and the buffers fit beside the ring."""
    cfg = registry.get(name).replace(stage_c=True, **fields)
    b = build_config(cfg, "sm_90")
    wm, wn = cfg.warp_tile
    per_thread = wm * wn * (2 if cfg.c_bits else 4) // 32 // 16        # 16-byte pieces a lane
    assert b.instructions.count("STS.64" if not cfg.c_bits else "STS") == wm * wn // 64
    assert b.instructions.count("LDS.128") == b.instructions.count("STG.E.128") == per_thread
    assert b.local_bytes == 0 and cfg.c_stage_bytes == cfg.warps_m * 16 * cfg.c_stage_pitch
    with pytest.raises(ValueError, match="stage_c"):
        registry.get("int4_wgmma_unpack_s8_ld").replace(stage_c=True)


@pytest.mark.builds
@pytest.mark.parametrize("name", ["fp16_wgmma_c16", "fp16_wgmma", "int8_wgmma_cl1"])
def test_staged_c_leaves_by_tma_store(name):
    """c_tma: each accumulator pair (f16 C: rounded word) is written once into
    the warp's swizzled buffers, and each 128-byte chunk of its 16 rows leaves
    by one TMA store, not through the lanes: no LDS.128, no STG.E.128 but
    the edges' pairs. Two 2 KB buffers a consumer warp; no local memory.
    Only stage_c's buffers, and only into C itself."""
    cfg = registry.get(name).replace(c_tma=True)
    b = build_config(cfg, "sm_90")
    expected_sass_holds(cfg, b, "sm_90")          # its UTMASTG: one a 2 KB chunk
    wm, wn = cfg.warp_tile
    assert b.instructions.count("STS.64" if not cfg.c_bits else "STS") == wm * wn // 64
    assert b.local_bytes == 0 and cfg.c_stage_bytes == cfg.warps_m * 4096
    for bad in (dict(stage_c=False), dict(split_k=2)):
        with pytest.raises(ValueError, match="c_tma"):
            cfg.replace(**bad)


@pytest.mark.builds
def test_second_warpgroup_staggered():
    """stagger: the first consumer warpgroup arrives on named barrier 1 once
    it has issued its first k-tiles; the second syncs on it before its
    first tile; nothing else changes (no local memory). Only with two
    consumer warpgroups, and a lag shorter than the ring."""
    cfg = registry.get("fp16_wgmma_c16").replace(stagger=2)
    b = build_config(cfg, "sm_90")
    assert b.sass.count("BAR.ARV 0x1, 0x100") >= 1 and b.sass.count("BAR.SYNC.DEFER_BLOCKING 0x1, 0x100") == 1
    assert b.local_bytes == 0
    for bad in (dict(stagger=4), dict(bm=64, warps_m=4, stagger=1), dict(split_k=2)):
        with pytest.raises(ValueError, match="stagger"):
            cfg.replace(**bad)


@pytest.mark.builds
@pytest.mark.parametrize("name", ["fp16_wgmma", "int8_wgmma_cl1"])
def test_pingpong_warpgroups_take_turns(name):
    """pingpong: a consumer warpgroup issues both 64-row halves of each k-tile
    (two wgmmas a k step, on one B), waits on its own named barrier before
    its k loops (one BAR.SYNC, its id in a register), and arrives on the
    other's from inside its k loop; each stage is released by one
    warpgroup's four warps; no local memory."""
    cfg = registry.get(name).replace(bn=128, pingpong=True)
    b = build_config(cfg, "sm_90")
    loop = b.main_loop()
    assert loop.mmas % (2 * cfg.ksteps) == 0, loop.mmas
    syncs = [line for line in b.sass.splitlines() if "BAR.SYNC" in line and "0x100" in line]
    assert len(syncs) == 1 and "BAR.SYNC.DEFER_BLOCKING R" in syncs[0], syncs
    assert any(op.startswith("BAR.ARV") for lp in b.k_loops for op in lp.ops)
    assert b.local_bytes == 0 and cfg.stage_readers == 4 and cfg.replace(pingpong=False).stage_readers == 8
    for bad in (dict(bn=256), dict(stagger=2), dict(split_k=2), dict(bm=64, warps_m=4)):
        with pytest.raises(ValueError, match="pingpong"):
            cfg.replace(**bad)


@pytest.mark.builds
def test_tma_ring_deeper_than_cp_async_allows():
    """TMA's ring counts its stages with mbarriers, not cp.async.wait_group:
    a 64 x 64 FP16 wgmma tile in 14 stages and INT4's small-M mma.sync tile
    in 16 build, without local memory; a cp.async kernel stays within 5."""
    cfg = registry.get("fp16_wgmma_cl1").replace(bm=64, warps_m=4, bn=64, stages=14, stage_c=False)
    b = build_config(cfg, "sm_90")
    assert b.count("HGMMA.64x64x16.F32") >= cfg.ksteps and b.local_bytes == 0 and b.calls == 0
    for name, fields in SMALL_M_BY_TMA[1:3]:
        small = registry.get(name).replace(copy="tma", stages=16, **fields)
        expected_sass_holds(small, build_config(small, "sm_90"), "sm_90")
    with pytest.raises(ValueError, match="stages"):
        registry.get("fp16_ptx_mma").replace(stages=6)


#: The small-M tiles with TMA filling 16 stages of one 128-byte box row of K (slower
#: than their cp.async tiles: docs/findings.md; variants, not registered).
SMALL_M_BY_TMA = [("fp16_ptx_mma_m16", dict(bk=64, warps_n=1, warps_k=2)), ("int8_ptx_mma_k32_m16", dict(bk=128)),
                  ("int4_ptx_unpack_s8_m16", dict(bk=256)),
                  ("int4_ptx_unpack_s8_m16", dict(bk=256, bn=32, warps_n=4, warps_k=2))]


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", SMALL_M_BY_TMA)
def test_small_m_tiles_by_tma_through_a_deep_ring(name, fields, rng):
    """The small-M mma.sync tiles with TMA filling 16 stages: K of 37 k-tiles
    and a ragged one wraps the ring twice, each block starting at its own
    k-tile (k_stagger); M of 1 and 16, N past a tile."""
    cfg = registry.get(name).replace(copy="tma", stages=16, k_stagger=3, **fields)
    skip_unless_it_runs_here(cfg)
    for M in (1, 16):
        check_kernel(cfg, 2, M, 3 * cfg.bn + 8, 37 * cfg.bk + 32, rng, kernel=cfg)


@pytest.mark.parametrize("name,fields", [("int8_wgmma", dict(bn=320)), ("fp16_wgmma", dict(bn=320, b_layout="nk")),
                                         ("int8_wgmma", dict(bn=192)), ("fp16_wgmma", dict(bn=192, b_layout="nk")),
                                         ("int8_wgmma", dict(bm=64, warps_m=4, bn=64)),
                                         ("int8_wgmma", dict(bm=64, warps_m=4, bn=32))])
def test_wgmma_tile_widths_without_routines_are_refused(name, fields):
    with pytest.raises(ValueError, match="bn="):
        registry.get(name).replace(**fields)


@pytest.mark.builds
def test_a_from_registers_feeds_wgmma_registers():
    """a_regs: every IGMMA takes A from registers (a register, not a second
    descriptor, after the accumulators) and each k-tile's A comes by ldmatrix;
    beside 128 accumulators (bn = 256) in commit groups of two k steps, with
    no serialised wgmma (a ptxas performance report fails the build)."""
    import re

    for cfg in (registry.get("int4_wgmma_unpack_s8_ld_rs"), registry.get("int4_wgmma_unpack_s8_ld"),
                registry.get("int4_wgmma_unpack_s8")):
        b = build_config(cfg, "sm_90")
        gmma = [i for i in b.sass.splitlines() if "IGMMA" in i]
        assert gmma and all(re.search(r"IGMMA\.\S+ R\d+, R\d+, gdesc", i) for i in gmma), gmma[:2]
        assert b.count("LDSM") >= 1 and b.calls == 0 and b.local_bytes == 0
        groups = cfg.ksteps // warp_wgmma.A_GROUP
        assert b.count("WARPGROUP.ARRIVE") == groups * (b.count(expected_sass(cfg, "sm_90")[0]) // 4)
        # the registers that let them fit: the producer gives them up, the consumers take them
        producer, consumer = cfg.register_split
        assert f"USETMAXREG.DEALLOC.CTAPOOL {producer:#x}" in b.sass
        assert re.search(rf"USETMAXREG\.TRY_ALLOC\.CTAPOOL \S+, {consumer:#x}", b.sass)


@pytest.mark.builds
def test_load_sets_are_the_producers_loads_in_flight():
    """load_sets: the widening producer's k loop holds that many register sets
    of a k-tile's loads, each filled once an iteration (an iteration of
    load_sets k-tiles, written out), in the registers register_split leaves it;
    widen_in="stage" copies them into the stages instead."""
    base = registry.get("int4_wgmma_unpack_s8_ld")
    loads = {}
    for sets in (1, 2):
        b = build_config(base.replace(load_sets=sets), "sm_90")
        assert b.local_bytes == 0 and b.count("IGMMA") > 0
        loads[sets] = b.count("LDG")
    assert loads[2] == 2 * loads[1] > 0
    # widen_in="stage": the same pieces by cp.async into the stages, read back there, no ld.global
    b = build_config(base.replace(widen_in="stage", stages=3), "sm_90")
    assert b.local_bytes == 0 and b.count("LDGSTS") > 0 and b.count("LDG.E") == 0 and b.count("LDS.128") > 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["int4_wgmma_unpack_s8_swap", "int8_wgmma_swap"])
def test_swapped_kernel_shares_b_across_the_batch(name, rng):
    """swap: the kernel's A side is the caller's B, here one for every batch
    of A (its tensor map has one batch), and C comes out transposed back,
    edges and all."""
    from numba import cuda

    import numgemm

    cfg = registry.get(name)
    skip_unless_it_runs_here(cfg)
    lo, hi = cfg.prec.values
    a, bt = rng.integers(lo, hi, (3, 13, 250)), rng.integers(lo, hi, (300, 250))
    out = cuda.to_device(np.full((3, 13, 300), cfg.prec.poison, np.int32))
    pack = pack_int4 if cfg.precision == "int4" else (lambda x: np.ascontiguousarray(x.astype(np.int8)))
    k = 250 if cfg.precision == "int4" else None
    numgemm.gemm(cuda.to_device(pack(a)), numgemm.transposed(cuda.to_device(pack(bt))), precision=cfg.precision,
                 kernel=cfg, k=k, out=out)
    np.testing.assert_array_equal(out.copy_to_host(), a.astype(np.int64) @ bt.T.astype(np.int64))


@pytest.mark.builds
def test_widening_pass_builds_for_every_target():
    """unpack="pass"'s first kernel: one 16-byte load and two 16-byte stores
    a thread, the widening inline, no local memory."""
    from numgemm.kernel import helper_cubin
    from numgemm.kernel.widen_pass import WidenPass
    from numgemm.sass import read_cubin
    from numgemm.toolchain import TARGETS, parse_target

    for target in TARGETS:
        cubin, entry = helper_cubin(WidenPass(), parse_target(target))
        b = read_cubin(cubin, entry, "widen_pass", target, 0.0)
        assert "widen_pass" in entry and b.count("LDG.E.128") == 1 and b.count("STG.E.128") == 2
        assert b.calls == 0 and b.local_bytes == 0


@pytest.mark.gpu
def test_widening_pass_lays_b_out_as_the_consumers_read_a(rng):
    """Each 16-byte piece of s4 (32 k) becomes 32 bytes of s8: the even
    elements of its four words, then their odd ones, each s4 its value; in
    a batch of B views whose rows lie inside wider ones."""
    from numba import cuda

    from numgemm.kernel import helper_function, launch_args
    from numgemm.kernel.widen_pass import WidenPass
    from numgemm.launches import Launch

    vals = rng.integers(-8, 8, (2, 40, 96))
    packed = pack_int4(vals.reshape(80, 96)).reshape(2, 40, 48)
    wide = np.zeros((2, 40, 64), np.uint8)              # rows 64 bytes apart, 48 of them s4
    wide[:, :, :48] = packed
    B = cuda.to_device(wide)[:, :, :48]
    spec = WidenPass()
    W = cuda.to_device(np.full((2, 40, 96), 0x55, np.uint8))
    Launch(helper_function(spec, cuda.get_current_device().id).handle, spec.grid(B), spec.threads, 0, 0,
           launch_args(spec.argtypes(), (B, W)), spec.name)()
    got = W.copy_to_host().view(np.int8).astype(np.int64)
    pieces = vals.reshape(2, 40, 3, 4, 8)                   # piece, word, element
    want = np.concatenate([pieces[..., 0::2].reshape(2, 40, 3, 16), pieces[..., 1::2].reshape(2, 40, 3, 16)],
                          axis=-1).reshape(2, 40, 96)
    np.testing.assert_array_equal(got, want)


@pytest.mark.builds
def test_split_k_changes_only_the_k_range():
    """split_k: the same k loop (mmas and copies) as the kernel it splits; the
    split-K sum builds for every target."""
    from numgemm.kernel import helper_cubin
    from numgemm.kernel.split_k import SplitSum
    from numgemm.toolchain import TARGETS, parse_target

    for name in ("int8_ptx_mma_k32_m16", "fp16_ptx_mma"):
        base = registry.get(name)
        one, four = (build_config(c, "sm_90").main_loop() for c in (base, base.replace(split_k=4)))
        assert one.mmas == four.mmas and one.shape.count("G") == four.shape.count("G")
    for spec in (SplitSum("f32"), SplitSum("s32"), SplitSum("f32", "f16"), SplitSum("f32", "bf16")):
        for target in TARGETS:
            cubin, entry = helper_cubin(spec, parse_target(target))
            assert cubin[:4] == b"\x7fELF" and "split_sum" in entry


@pytest.mark.parametrize("name", ["int8_dp4a", "fp16_ptx_fp16acc"])
def test_split_k_is_refused_where_it_cannot_sum(name):
    with pytest.raises(ValueError, match="split_k > 1"):
        registry.get(name).replace(split_k=2)


@pytest.mark.parametrize("name,fields", [("int8_ptx_mma_k32", {}), ("int8_wgmma", dict(split_k=2))])
def test_the_last_block_sums_only_split_block_kernels(name, fields):
    with pytest.raises(ValueError, match="split_sum=last"):
        registry.get(name).replace(split_sum="last", **fields)


@pytest.mark.builds
def test_the_last_block_sums_in_one_launch():
    """split_sum="last": the k loop as split_k's, then a fence, one atomic a
    block and the tile's slices added in the kernel; C comes with the
    workspace and the counts."""
    from numgemm.kernel import argtypes

    base = registry.get("int8_ptx_mma_k32_m16").replace(split_k=4)
    two, one = (build_config(c, "sm_90") for c in (base, base.replace(split_sum="last")))
    assert two.main_loop().mmas == one.main_loop().mmas
    assert one.count("ATOMG") + one.count("RED") == 1 and one.count("MEMBAR") >= 1 and two.count("ATOMG") == 0
    assert len(argtypes(base.replace(split_sum="last"))[2]) == 3


@pytest.mark.builds
@pytest.mark.parametrize("name", ["fp16_wgmma", "int8_wgmma_cl1"])
def test_split_k_keeps_the_wgmma_k_loop(name):
    """The warp-specialised skeleton split over K: the same wgmmas and TMA
    copies, the registers still handed over, nothing spilled; persistent,
    the split's blocks share the SMs (grid.x 1 / split_k of them)."""
    base = registry.get(name)
    one, two = (build_config(c, "sm_90") for c in (base, base.replace(split_k=2)))
    for op in (expected_sass(base, "sm_90")[0], "UTMALDG.3D", "USETMAXREG.TRY_ALLOC", "WARPGROUP.DEPBAR.LE"):
        assert one.count(op) == two.count(op), op
    assert two.local_bytes == 0 and two.calls == 0
    assert base.replace(split_k=2).grid_blocks(8192, 8192, 132) == base.grid_blocks(8192, 8192, 132) // 2


@pytest.mark.builds
@pytest.mark.parametrize("name", ["fp16_wgmma", "int8_wgmma_cl1", "fp16_wgmma_c16"])
def test_stream_k_keeps_the_wgmma_k_loop(name):
    """stream_k: the tiles computed whole and the tail's runs each have a k
    loop (the producer's copies and the consumers' wgmmas: as many more as
    LLVM unrolls the second), the registers still handed over, nothing
    spilled in a k loop; the partial sums go out and come back 16 bytes a
    thread, and the flags are atomics; the grid is every SM, however few the
    tiles."""
    base = registry.get(name)
    one, sk = (build_config(c, "sm_90") for c in (base, base.replace(stream_k=True)))
    for op, per_k_tile in ((expected_sass(base, "sm_90")[0], base.ksteps), ("UTMALDG.3D", 1)):
        assert sk.count(op) >= one.count(op) + per_k_tile and one.count(op) > 0, op
    assert sk.count("USETMAXREG") == one.count("USETMAXREG") == 2
    # (stage_c: the epilogues' 16-byte stores too, one for each 16 bytes read back from the warp's buffer)
    staged = sk.count("LDS.128")
    assert sk.count("STG.E.128") - staged == sk.count("LDG.E.128.STRONG.GPU") == base.partial_shape[0] // 4
    assert sk.count("ATOM") > 0 == one.count("ATOM")
    # A register or two spilled around the tail's epilogues (the uniform registers hold the
    # k loop's descriptors), never inside a k loop
    assert sk.local_bytes <= 8 and sk.calls == 0
    assert not [op for loop in sk.k_loops for op in loop.ops if op.startswith(("LDL", "STL"))]
    cfg = base.replace(stream_k=True)
    assert "_sk" in cfg.name and cfg.name.replace("_sk", "") == base.replace(even_waves=False).name   # (moot)
    assert cfg.grid_blocks(512, 512, 132) == 132 // cfg.cluster * cfg.cluster
    from numgemm.kernel import argtypes

    assert len(argtypes(cfg)[2]) == 3


@pytest.mark.parametrize("fields", [dict(persistent=False), dict(split_k=2)])
def test_stream_k_is_refused_where_it_cannot_share(fields):
    with pytest.raises(ValueError, match="stream_k"):
        registry.get("int8_wgmma").replace(stream_k=True, **fields)
    with pytest.raises(ValueError, match="stream_k"):
        registry.get("int8_ptx_mma_k32").replace(stream_k=True)


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", [("int8_wgmma", {}), ("int8_wgmma_cl1", {}), ("fp16_wgmma", {}),
                                         ("fp16_wgmma_c16", {}), ("int8_wgmma", dict(bm=64, warps_m=4, bn=128)),
                                         ("fp16_wgmma", dict(bn=320, stage_c=False)), ("fp16_wgmma", dict(stage_c=False))])
def test_stream_k_sums_every_k_tile_once(name, fields, rng):
    """stream_k on a GPU of many SMs: tiles fewer than the clusters, with runs
    of one k-tile and empty ones (the first shape, two batches), tiles cut in
    two and three (the second), whole waves before the streamed tail (the
    third); exact for integers, each tile's parts added once, C's edges
    stored as any kernel's. A second launch reuses the flags."""
    import numgemm

    cfg = registry.get(name).replace(stream_k=True, **fields)
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K in ((2, 300, 520, 2 * cfg.bk - 56), (1, 1030, 2100, 8 * cfg.bk - 24),
                           (1, 2048, 17 * cfg.bn, 2 * cfg.bk)):
        check_kernel(cfg, batch, M, N, K, rng, kernel=cfg)
    a, b, ref = operands.kernel_operands(cfg, 1, 1030, 2100, 8 * cfg.bk, rng)
    out = operands.poisoned(cfg.precision, (1, 1030, 2100), cfg.c_dtype)
    plan = numgemm.plan_gemm(a, b, precision=cfg.precision, kernel=cfg, out=out)
    for _ in range(3):
        plan.launch()
    assert operands.mismatch(out.copy_to_host(), ref, cfg.precision, cfg.acc) is None


@pytest.mark.gpu
@pytest.mark.parametrize("name,split", [("int8_ptx_mma_k32_m16", 4), ("int8_ptx_mma_k32", 2), ("fp16_ptx_mma", 3),
                                        ("fp16_ptx_mma_m16", 2), ("int4_ptx_unpack_s8_m16", 2), ("fp16_wmma", 2),
                                        ("int8_ptx_tma", 4), ("int4_ptx_unpack_s8_tma", 8), ("fp16_wgmma", 2),
                                        ("int8_wgmma_cl1", 3), ("int4_wgmma_unpack_s8_ld", 2),
                                        ("int4_wgmma_unpack_s8_ld_rs", 2), ("int4_wgmma_unpack_s8", 2),
                                        ("int8_ptx_mma_k32_m16", -4),
                                        ("fp16_ptx_mma", -3), ("int4_ptx_unpack_s8_m16", -2), ("fp16_wmma", -2),
                                        ("int8_ptx_tma", -4)])
def test_split_k_sums_every_k_tile(name, split, rng):
    """Each block of a tile sums its run of k-tiles into the workspace and the
    second kernel adds them (split < 0: the tile's last block to finish, of
    -split): exact for integers, with the last run ragged, and runs left
    empty (fewer k-tiles than splits)."""
    cfg = registry.get(name).replace(split_k=abs(split), split_sum="last" if split < 0 else "kernel")
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K in ((2, 33, 300, 7 * cfg.bk + 16), (1, 17, 64, cfg.bk), (3, 1, 130, 2 * cfg.bk + 2)):
        if cfg.precision == "int4":
            K -= 1
        check_kernel(cfg, batch, M, N, K, rng, kernel=cfg)


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", [("fp16_ptx_mma", {}), ("fp16_ptx_mma_m16", {}), ("fp16_ptx_tma", {}),
                                         ("fp16_ptx_mma", dict(split_k=3)), ("fp16_wgmma", {}),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=64, stages=12)),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=12)),
                                         ("fp16_wgmma", dict(bn=320, stage_c=False)), ("fp16_wgmma", dict(stage_c=False)),
                                         ("fp16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=12, stage_c=False)),
                                         ("fp16_wgmma", dict(bn=192, stages=5)),
                                         ("bf16_ptx_mma", {}), ("bf16_ptx_mma", dict(split_k=3)), ("bf16_wgmma", {}),
                                         ("bf16_wgmma_cl1", dict(bm=64, warps_m=4, bn=32, stages=12, stage_c=False)),
                                         ("bf16_wgmma", dict(c_tma=True, cluster=1, persistent=False))])
def test_half_c_is_the_f32_sums_rounded(name, fields, rng):
    """out="f16" (BF16: "bf16"): C is the kernel's f32 sums rounded to half
    (to nearest even, as NumPy rounds them; BF16: Precision.encode's bits),
    entry for entry, in the pair stores and at the edges; split-K's sum
    rounds the slices' total."""
    import numgemm

    cfg = registry.get(name).replace(**fields)
    skip_unless_it_runs_here(cfg)
    prec = cfg.prec
    half = cfg.replace(out=prec.narrow)
    assert half.c_dtype == np.dtype(prec.narrow_out) and f"_c{prec.narrow}_" in half.name
    for batch, M, N, K in ((2, 520, 1000, 776), (3, 17, 300, 96)):
        a, b, ref = operands.kernel_operands(cfg, batch, M, N, K, rng)
        wide, narrow = (operands.poisoned(cfg.precision, (batch, M, N)),
                        operands.poisoned(cfg.precision, (batch, M, N), half.c_dtype))
        numgemm.gemm(a, b, kernel=cfg, out=wide)
        numgemm.gemm(a, b, kernel=half, out=narrow)
        sums, got = wide.copy_to_host(), narrow.copy_to_host()
        assert operands.mismatch(sums, ref, cfg.precision) is None
        np.testing.assert_array_equal(got, prec.encode(sums) if prec.encoding else sums.astype(half.c_dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["fp16_wmma", "fp16_ptx_mma", "fp16_ptx_k8", "fp16_ptx_fp16acc", "fp16_ptx_manual_pack",
                                  "fp16_ptx_tma", "fp16_ptx_mma_m16", "fp16_wgmma", "fp16_wgmma_cl1", "fp16_wgmma_c16"])
def test_fp16_reads_b_as_n_x_k(name, rng):
    """Every FP16 family with B as N x K (an nn.Linear weight, b = w.t()), read
    in place: WMMA's col-major B fragment, ldmatrix without .trans, wgmma's
    K-major B; edges on every side, a batch, K short of a k-tile."""
    cfg = registry.layout_twin(registry.get(name), "nk")
    assert cfg is not None and cfg.b_layout == "nk"
    skip_unless_it_runs_here(cfg)
    for batch, M, N, K in ((1, 256, 128, 256), (2, 300, 200, 136), (1, 1030, 2100, 72)):
        check_kernel(cfg, batch, M, N, K, rng, kernel=cfg)


@pytest.mark.gpu
def test_gemm_takes_an_nn_linear_weight_as_it_lies(rng):
    """gemm(x, w.t()) for an FP16 N x K weight w: gemm()'s choice at small,
    skinny and square shapes, against float64."""
    torch = pytest.importorskip("torch")
    import numgemm

    for M, N, K in ((16, 520, 256), (300, 136, 256), (1024, 1024, 1024)):
        x = torch.randn(M, K, dtype=torch.float16, device="cuda")
        w = torch.randn(N, K, dtype=torch.float16, device="cuda")
        got = numgemm.gemm(x, w.t())
        ref = x.double() @ w.double().t()
        assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-3, (M, N, K)


@pytest.mark.builds
@pytest.mark.parametrize("typ", ["e4m3", "e5m2"])
def test_fp8_mma_is_native_on_sm_89_and_converted_on_sm_90(typ):
    """FP8's mma.sync: QMMA on sm_89 (no f16 HMMA, no conversion, no calls,
    nothing spilled); on sm_90 ptxas converts its operands to f16 (F2FP) for
    two HMMA a QMMA. Its wgmma is QGMMA on sm_90a."""
    cfg = registry.get(f"{typ}_ptx_mma")
    ada, hopper = build_config(cfg, "sm_89"), build_config(cfg, "sm_90")
    t = typ.upper()
    assert ada.count(f"QMMA.16832.F32.{t}.{t}") > 0 and ada.count("HMMA") == ada.count("F2FP") == 0
    assert ada.calls == 0 and ada.local_bytes == 0
    assert hopper.count("QMMA") == 0 and hopper.count("HMMA.16816.F32") == 2 * ada.count("QMMA")
    assert hopper.count(f"F2FP.F16.{t}.UNPACK_B") > 0
    wg = build_config(registry.get(f"{typ}_wgmma"), "sm_90")
    assert wg.count(f"QGMMA.64x256x32.F32.{t}.{t}") > 0 and wg.local_bytes == 0
