"""The named kernels: the study's names as aliases of configs, in two presets.

``paper``: the study's tiling, reproduced faithfully: 8 warps (2 x 4) of
16 x 16 output each (a 32 x 64 block tile), each warp staging its own A and B
tiles in shared memory (no sharing, no padding), BK = one mma's k, a 2-stage
cp.async.ca pipeline.

``tuned``: tilings chosen on an H200: FP16 and INT8 in 256 x 128 block tiles
of eight 64 x 64 warp tiles, one block per SM, 4 stages, 128 bytes of K per
stage, rasterized in groups of 8 tile rows, two fragment register buffers,
128-byte swizzled tiles and an unchecked interior k loop; INT4 in 128 x 128
tiles, two blocks per SM, 3 stages, padded. docs/findings.md gives the
measurements behind each choice.

Within a preset each family has a base config; its other kernels are that
config with one field changed. WMMA baselines use the same block and warp
tiling as their mma twins (unlike the study's INT4 WMMA, which used 8 x 8
warp tiles); they stay padded, as WMMA reads rows of one stride.
"""

from .config import KernelConfig, field_suffix
from .precision import PRECISIONS
from .toolchain import has_native_s4_mma

PRESETS = ("paper", "tuned")
#: The 8-bit floats (FP8: e4m3, e5m2), whose kernels are INT8's with their operands and f32 sums.
FLOAT8 = tuple(p.name for p in PRECISIONS.values() if p.bits == 8 and not p.exact)

_PAPER = dict(bm=32, bn=64, warps_m=2, warps_n=4, stages=2, smem_pad=0, private_tiles=True,
              cache="ca", b_ldmatrix=2, reg_buffers=1)
_TUNED = dict(bm=256, bn=128, warps_m=4, warps_n=2, stages=4, cache="cg", raster=8, copy_parts=2)
_TUNED_INT4 = dict(_TUNED, bm=128, warps_m=2, stages=3, min_blocks=2, reg_buffers=1)


def _families(preset):
    """{family: {kernel name: config}} for one preset, from one base per precision."""
    paper = preset == "paper"
    tiling, tiling4 = (_PAPER, _PAPER) if paper else (_TUNED, _TUNED_INT4)
    # BK: one mma's k in the study; 128 bytes of K per stage when tuned.
    fp16 = KernelConfig("fp16", b_layout="kn", bk=16 if paper else 64, **tiling)
    int8 = KernelConfig("int8", mma_k=32, bk=32 if paper else 128, **tiling)
    if not paper:   # swizzled tiles; no select per copy; unchecked interior blocks (see above)
        fp16 = fp16.replace(swizzle=True, zfill_src="any", interior_loop=True)
        int8 = int8.replace(swizzle=True, interior_loop=True, copy_parts=1)
    int4 = KernelConfig("int4", mma_k=64, bk=64 if paper else 256, **tiling4)
    bf16 = fp16.replace(precision="bf16")                               # BF16: FP16's tiling
    fp8 = {p: int8.replace(precision=p, acc="f32") for p in FLOAT8}      # FP8: INT8's tiling, f32 sums
    manual = dict(a_ldmatrix=0, b_ldmatrix=0)      # ld.shared + packing instead of ldmatrix
    families = {
        "fp16": {
            "fp16_wmma": fp16.replace(op="wmma", swizzle=False),
            "fp16_ptx_mma": fp16,
            "fp16_ptx_k8": fp16.replace(mma_k=8),
            "fp16_ptx_fp16acc": fp16.replace(acc="f16"),
            "fp16_ptx_3stage": fp16.replace(stages=3),
            "fp16_ptx_manual_pack": fp16.replace(**manual),
        },
        # BF16: FP16's kernels with bf16 operands (f32 accumulation only).
        "bf16": {
            "bf16_wmma": bf16.replace(op="wmma", swizzle=False),
            "bf16_ptx_mma": bf16,
            "bf16_ptx_k8": bf16.replace(mma_k=8),
        },
        "int8": {
            # Tuned, WMMA keeps its copies in two parts and one checked loop (see above).
            "int8_wmma": int8.replace(op="wmma", bk=16) if paper else
                         int8.replace(op="wmma", swizzle=False, interior_loop=False, copy_parts=2),
            "int8_ptx_mma_k16": int8.replace(mma_k=16),
            "int8_ptx_mma_k32": int8,
            "int8_ptx_manual_pack": int8.replace(**manual),
            "int8_ptx_3stage": int8.replace(stages=3),
            # No tensor cores: the reference point below the family.
            "int8_dp4a": KernelConfig("int8", op="dp4a", bm=16, bn=16, warps_m=1, warps_n=8),
        },
        # FP8 has no WMMA: its family's base is mma.sync (native on sm_89; sm_90 converts to f16 for HMMA).
        **{p: {f"{p}_ptx_mma": base} for p, base in fp8.items()},
        "int4": {
            "int4_wmma": int4.replace(op="wmma"),
            "int4_ptx_mma_k32": int4.replace(mma_k=32),
            "int4_ptx_manual_pack": int4.replace(**manual),
            "int4_ptx_mma_k64": int4,
            "int4_ptx_3stage": int4.replace(stages=3),
            # Hopper: s4 widened to s8 in registers, then m16n8k32.s8 (s4 mma is emulated
            # there): to 16 x s8 in 3 instructions per 8 values (K <= 131071), or exactly in 7.
            "int4_ptx_unpack_s8": int4.replace(unpack="scaled"),
            "int4_ptx_unpack_s8_exact": int4.replace(unpack="register"),
            # ... or once per k-tile on its way into shared memory, as s8. Shared tiles
            # of s8 are twice the bytes: tuned, a 64-byte k-tile in 2 stages keeps two
            # blocks per SM. Its loads go to registers: in two parts they cost 5%
            # (1.615 -> 1.701 ms at N=8192, H200, 2026-11-30), so they start at once.
            "int4_ptx_unpack_s8_tile": int4.replace(unpack="tile") if paper else
                                       int4.replace(unpack="tile", bk=128, stages=2, copy_parts=1),
        },
        "int4_k64_ablation": _ablations("int4_ptx_mma_k64", int4),
    }
    if not paper:
        _add_tuned(families, fp16, bf16, int8, int4)
        for p, base in fp8.items():             # the TMA copies and wgmma (QGMMA) of INT8's kernels, swap's too
            families[p].update({f"{p}_ptx_tma": base.replace(copy="tma"),
                                f"{p}_wgmma": families["int8"]["int8_wgmma"].replace(precision=p, acc="f32"),
                                f"{p}_wgmma_cl1": families["int8"]["int8_wgmma_cl1"].replace(precision=p, acc="f32"),
                                f"{p}_wgmma_swap": families["int8"]["int8_wgmma_swap"].replace(precision=p, acc="f32")})
    return families


def _add_tuned(families, fp16, bf16, int8, int4):
    """The tuned preset's kernels beyond the study's families: padded tiles,
    TMA copies, the wgmma family and its swap and INT4 forms, the skinny
    16-row tilings; each from its precision's tuned base."""
    # Memory-bound shapes (small M, quantized inference): 16-row tiles, long
    # K stages, so that N / 64 blocks stream B, each starting its k loop at
    # its own k-tile (k_stagger): blocks that all read the same column band
    # of B's rows at once lose DRAM throughput (docs/findings.md).
    # Their copies start all at once (copy_parts=1): measured so, not yet in parts.
    skinny = dict(bm=16, bn=64, warps_m=1, min_blocks=1, reg_buffers=2, k_stagger=1, copy_parts=1,
                  swizzle=False, interior_loop=False)
    # The mma kernels in padded tiles, the WMMA baselines' layout: what the swizzle buys.
    families["fp16"]["fp16_ptx_pad"] = fp16.replace(swizzle=False)
    families["int8"]["int8_ptx_pad"] = int8.replace(swizzle=False)
    # sm_90: the TMA unit copies each operand's k-tile (one thread issues it,
    # an mbarrier per stage counts its bytes), into 128-byte swizzled rows.
    families["fp16"]["fp16_ptx_tma"] = fp16.replace(copy="tma")
    families["bf16"]["bf16_ptx_tma"] = bf16.replace(copy="tma")
    families["int8"]["int8_ptx_tma"] = int8.replace(copy="tma")
    families["int4"]["int4_ptx_unpack_s8_tma"] = int4.replace(unpack="scaled", copy="tma")
    # sm_90a: wgmma, the warpgroup's instruction, in a warp-specialised block: a
    # producer warpgroup has TMA fill 4 stages, two consumer warpgroups of 64 x 256;
    # clusters of two CTAs on neighbouring tile rows share B by TMA multicast, and
    # at most one block per SM walks the tiles (persistent), as few as take as many waves
    # (even_waves); each consumer warp stores C through shared memory in whole lines
    # (stage_c). _cl1: each CTA loads all of B.
    wgmma = dict(op="wgmma", bm=128, bn=256, warps_m=8, warps_n=1, copy="tma", copy_parts=1,
                 cluster=2, persistent=True, even_waves=True, stage_c=True)
    for prec, base in (("fp16", fp16), ("bf16", bf16), ("int8", int8)):
        families[prec][f"{prec}_wgmma"] = base.replace(**wgmma)
        families[prec][f"{prec}_wgmma_cl1"] = base.replace(**wgmma).replace(cluster=1)
    # Where M <= 16: C^T = B A^T in tiles 16 columns wide (m64n16k32), B's rows streamed by TMA
    # through 16 stages, C stored transposed from registers.
    families["int8"]["int8_wgmma_swap"] = families["int8"]["int8_wgmma_cl1"].replace(
        swap=True, stage_c=False, bm=64, warps_m=4, bn=16, stages=16)
    # C as torch.matmul returns it (cuBLAS's hsh kernels): the f32 sums rounded to half as they
    # are stored, half the bytes of the default float32 C.
    families["fp16"]["fp16_wgmma_c16"] = families["fp16"]["fp16_wgmma"].replace(out="f16")
    # INT4: wgmma has no s4 form. B is widened to s8 once per call, by a kernel of its own
    # (numgemm/kernel/widen_pass.py), into a workspace that TMA copies as INT8's; A's s4
    # comes by TMA and each consumer widens its rows in registers, for wgmma with A from
    # registers: INT8's block otherwise, in 5 stages (A's are half INT8's).
    families["int4"]["int4_wgmma_unpack_s8"] = int4.replace(**dict(wgmma, unpack="pass", a_regs=True), bk=128,
                                                            stages=5, min_blocks=1, reg_buffers=0)
    # Where M is far below N: C^T = B A^T, the pass widening A (M x K bytes) instead of B,
    # C stored transposed from registers; 128 x 128 tiles of C^T.
    families["int4"]["int4_wgmma_unpack_s8_swap"] = families["int4"]["int4_wgmma_unpack_s8"].replace(
        swap=True, stage_c=False, bn=128, stages=8)
    # _ld: the producer warpgroup loads the s4 tiles itself (64 bytes a row per k-tile) and
    # widens B into the stages, to 16 x s8 (K <= 131071) or exactly (_exact), in every
    # CTA that reads it; the consumers widen A as above, in the registers setmaxnreg moves
    # to them from the producer (KernelConfig.register_split). _pw: the producer widens A
    # too; _128 and _rs: both ways in 128 x 128 tiles.
    ld = int4.replace(**dict(wgmma, copy="cp_async", cluster=1, stage_c=False), bk=128, stages=4,
                      min_blocks=1, unpack="tile_scaled", reg_buffers=0, a_regs=True)
    families["int4"]["int4_wgmma_unpack_s8_ld"] = ld
    families["int4"]["int4_wgmma_unpack_s8_ld_exact"] = ld.replace(unpack="tile")
    families["int4"]["int4_wgmma_unpack_s8_ld_pw"] = ld.replace(a_regs=False)
    families["int4"]["int4_wgmma_unpack_s8_ld_128"] = ld.replace(bn=128, a_regs=False)
    families["int4"]["int4_wgmma_unpack_s8_ld_rs"] = ld.replace(bn=128)
    families["int8"]["int8_ptx_mma_k32_m16"] = int8.replace(bk=512, stages=4, warps_n=4, warps_k=2, **skinny)
    families["fp16"]["fp16_ptx_mma_m16"] = fp16.replace(bk=256, stages=4, warps_n=4, warps_k=2, **skinny)
    families["bf16"]["bf16_ptx_mma_m16"] = bf16.replace(bk=256, stages=4, warps_n=4, warps_k=2, **skinny)
    families["int4"]["int4_ptx_unpack_s8_m16"] = int4.replace(bk=512, stages=4, unpack="scaled",
                                                              warps_n=8, warps_k=1, **skinny)


def _ablations(name, base):
    """The study's INT4 k64 ablations, each one field away from the base; and
    the study's own transposed-B kernel, which also swapped cp.async for
    scalar 2-byte loads of B (K x N with the ldg16 loader)."""
    variants = {name: base}
    for field, values in (("a_ldmatrix", (1, 2, 4)), ("b_ldmatrix", (1, 2)), ("cache", ("ca", "cg")),
                          ("evict", ("none", "evict_first", "evict_last")), ("b_layout", ("nk", "kn"))):
        for value in values:
            if value != getattr(base, field):
                variants[f"{name}_{field_suffix(field, value)}"] = base.replace(**{field: value})
    variants[f"{name}_kn_ldg16"] = base.replace(b_layout="kn", b_global="ldg16")
    return variants


FAMILIES = {preset: _families(preset) for preset in PRESETS}
REGISTRY = {preset: {n: c for fam in FAMILIES[preset].values() for n, c in fam.items()}
            for preset in PRESETS}

#: The WMMA baseline each kernel is compared with in the bench.
BASELINE = {p.name: f"{p.name}_wmma" for p in PRECISIONS.values() if p.wmma_name}


def family_base(family):
    """The kernel a family's ratios are to: its first member (the tuned preset's
    and the paper preset's families list the same names, base first)."""
    return next(iter(FAMILIES["tuned"][family]))


def names(preset="tuned", precision=None):
    return [n for n, c in REGISTRY[preset].items() if precision in (None, c.precision)]


def get(name, preset="tuned"):
    """The config registered as name in preset; a config's derived name works too."""
    if preset not in REGISTRY:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    if name in REGISTRY[preset]:
        return REGISTRY[preset][name]
    for cfg in REGISTRY[preset].values():
        if cfg.name == name:
            return cfg
    raise KeyError(unknown(name, preset))


def unknown(name, preset="tuned"):
    """Why name is not a kernel of preset, with the nearest registered names."""
    import difflib

    near = difflib.get_close_matches(str(name), REGISTRY[preset], n=3, cutoff=0.6)
    other = [p for p in PRESETS if p != preset and name in REGISTRY[p]]
    hint = (f"; did you mean {' or '.join(map(repr, near))}?" if near else "") \
        + (f"; it is in preset {other[0]!r}" if other else "")
    return f"no kernel {name!r} in preset {preset!r}{hint} (python -m numgemm.inspect --list names them all)"


def default(precision, b_layout, preset="tuned", cc=None, m=None, k=None):
    """The kernel gemm() uses: per precision and B layout; for INT4 the one that
    suits the GPU (widening to s8 where s4 mma is emulated: sm_90, for wgmma
    there, exactly; elsewhere exactly where K is past the scaled widening's reach); for M <= 16 the small-M
    tiling where there is one; on sm_90 the precision's wgmma kernel, else the
    mma kernel's copy="tma" twin, where there is one."""
    if PRECISIONS[precision].packed and b_layout == "nk" and cc is not None:
        name = "int4_ptx_mma_k64" if has_native_s4_mma(cc) else "int4_ptx_unpack_s8"
        if tuple(cc) >= (9, 0) and "int4_wgmma_unpack_s8" in REGISTRY[preset] and (m is None or m > 16):
            name = "int4_wgmma_unpack_s8"       # sm_90a: B widened by a kernel of its own, A by the consumers
        if k is not None and REGISTRY[preset][name].max_k is not None and k > REGISTRY[preset][name].max_k:
            return REGISTRY[preset][f"{name}_exact"]
    else:
        name = CHOICES[precision][0]
    if m is not None and m <= 16 and f"{name}_m16" in REGISTRY[preset]:
        name += "_m16"
    elif cc is not None and tuple(cc) >= (9, 0) and f"{precision}_wgmma" in REGISTRY[preset] \
            and REGISTRY[preset][f"{precision}_wgmma"].b_layout == b_layout:
        name = f"{precision}_wgmma"         # sm_90a: the warpgroup's instruction (docs/findings.md)
    cfg = REGISTRY[preset][name]
    if cc is not None and cfg.op == "mma":      # the same kernel copying with TMA, where registered and this GPU has it
        twin = {**cfg.describe(), "copy": "tma", "swizzle": True}      # TMA lands its boxes swizzled
        cfg = next((c for c in REGISTRY[preset].values() if c.describe() == twin and c.unsupported(cc) is None), cfg)
    if cfg.b_layout == b_layout:
        return cfg
    for other in REGISTRY[preset].values():     # e.g. the K x N INT4 ablation
        if other.precision == precision and other.op == "mma" and other.b_layout == b_layout:
            return other
    twin = layout_twin(cfg, b_layout)           # FP16: the same kernel reading B in the other layout
    if twin is not None:
        return twin
    raise ValueError(f"no {preset} {precision} kernel takes B as {b_layout.upper()}; "
                     f"{precision} kernels take B as {cfg.b_layout.upper()}")


def layout_twin(cfg, b_layout):
    """cfg reading B in b_layout instead (FP16 B as N x K, an nn.Linear
    weight: wgmma K-major, ldmatrix without .trans, WMMA col-major), or None
    where the kernel has no such twin (8-bit B is K-major only; some FP16
    tiles are K x N only)."""
    try:
        return cfg.replace(b_layout=b_layout)
    except ValueError:
        return None


#: The tuned kernels that gemm() may choose (registry.default, or a tuned winner
#: of numgemm.tuning): the block-tile kernel, its TMA twin, the small-M tiling, wgmma.
CHOICES = {
    "fp16": ("fp16_ptx_mma", "fp16_ptx_tma", "fp16_ptx_mma_m16", "fp16_wgmma", "fp16_wgmma_cl1"),
    "bf16": ("bf16_ptx_mma", "bf16_ptx_tma", "bf16_ptx_mma_m16", "bf16_wgmma", "bf16_wgmma_cl1"),
    **{p: (f"{p}_ptx_mma", f"{p}_ptx_tma", f"{p}_wgmma", f"{p}_wgmma_cl1") for p in FLOAT8},
    "int8": ("int8_ptx_mma_k32", "int8_ptx_tma", "int8_ptx_mma_k32_m16", "int8_wgmma", "int8_wgmma_cl1"),
    "int4": ("int4_ptx_mma_k64", "int4_ptx_unpack_s8", "int4_ptx_unpack_s8_tma", "int4_ptx_unpack_s8_m16",
             "int4_wgmma_unpack_s8", "int4_wgmma_unpack_s8_ld"),
}


def choice_layout(precision):
    """The B layout of the kernels gemm() chooses among for precision (CHOICES)."""
    return REGISTRY["tuned"][CHOICES[precision][0]].b_layout


def choices(precision, cc):
    """The CHOICES of precision that suit a GPU of compute capability cc: those
    it can launch; for INT4, s4 mma.sync where it is native, s4 widened to s8
    where it is emulated (sm_90)."""
    native = has_native_s4_mma(cc)
    return [n for n in CHOICES[precision] if REGISTRY["tuned"][n].unsupported(cc) is None
            and (not PRECISIONS[precision].packed or (REGISTRY["tuned"][n].unpack == "none") == native)]


def describe_default(precision, cc, preset="tuned"):
    """One line saying which INT4 kernel suits this GPU, and why."""
    cfg = default(precision, "nk", preset, cc)
    if has_native_s4_mma(cc):
        why = "s4 mma.sync is native here"
    elif cfg.unpack == "pass":
        why = ("s4 mma.sync is emulated here and wgmma has no s4 form, so s4 is widened to s8 exactly: B by a "
               "kernel of its own before the GEMM, A by the wgmma consumers in registers")
    else:
        why = (f"s4 mma.sync is emulated here, so s4 is widened to s8 in registers "
               f"(to 16 x s8 for K <= {cfg.max_k}, exactly beyond)")
    name = next(n for n, c in REGISTRY[preset].items() if c is cfg)
    return f"{precision} default on sm_{cc[0]}{cc[1]}: {name} ({why})"
