"""The named kernels: the study's names as aliases of configs, in two presets.

``paper``: the study's tiling, reproduced faithfully: 8 warps (2 x 4) of
16 x 16 output each (a 32 x 64 block tile), each warp staging its own A and B
tiles in shared memory (no sharing, no padding), BK = one mma's k, a 2-stage
cp.async.ca pipeline.

``tuned``: a tiling chosen for speed on Hopper by a sweep at N=8192 on an
H200 (2026-11-29): 128 x 128 block tiles of four 64 x 64 warp tiles, two
blocks per SM, 128 bytes of K per stage (half the barriers of 64-byte
stages: +22-34% over the 64-byte, 128 x 256 alternative), a 3-stage
cp.async.cg pipeline in padded shared memory (110 KB), blocks rasterized in
groups of 8 tile rows.

Within a preset each family has a base config; its other kernels are that
config with one field changed. WMMA baselines use the same block and warp
tiling as their mma twins (unlike the study's INT4 WMMA, which used 8 x 8
warp tiles).
"""

from .config import KernelConfig

PRESETS = ("paper", "tuned")

_PAPER = dict(bm=32, bn=64, warps_m=2, warps_n=4, stages=2, smem_pad=0, private_tiles=True,
              cache="ca", b_ldmatrix=2)
_TUNED = dict(bm=128, bn=128, warps_m=2, warps_n=2, stages=3, cache="cg", raster=8, min_blocks=2)


def _families(preset):
    """{kernel name: config} for one preset, built from one base per precision."""
    paper = preset == "paper"
    tiling = _PAPER if paper else _TUNED
    # BK: one mma's k in the study; 128 bytes of K per stage when tuned.
    fp16 = KernelConfig("fp16", b_layout="kn", bk=16 if paper else 64, **tiling)
    int8 = KernelConfig("int8", mma_k=32, bk=32 if paper else 128, **tiling)
    int4 = KernelConfig("int4", mma_k=64, bk=64 if paper else 256, **tiling)
    return {
        "fp16_wmma": fp16.replace(op="wmma"),
        "fp16_ptx_mma": fp16,
        "int8_wmma": int8.replace(op="wmma", bk=16) if paper else int8.replace(op="wmma"),
        "int8_ptx_mma_k32": int8,
        "int4_wmma": int4.replace(op="wmma"),
        "int4_ptx_mma_k64": int4,
    }


REGISTRY = {preset: _families(preset) for preset in PRESETS}

#: The WMMA baseline each kernel is compared with in the bench.
BASELINE = {"fp16": "fp16_wmma", "int8": "int8_wmma", "int4": "int4_wmma"}


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
    raise KeyError(f"no kernel {name!r} in preset {preset!r}; known: {', '.join(REGISTRY[preset])}")


def default(precision, b_layout, preset="tuned"):
    """The kernel gemm() uses for a precision and B layout."""
    for cfg in REGISTRY[preset].values():
        if cfg.precision == precision and cfg.op == "mma" and cfg.b_layout == b_layout:
            return cfg
    raise ValueError(f"no {preset} {precision} kernel takes B as {b_layout.upper()}; "
                     f"{precision} kernels take B as " + " or ".join(
                         sorted({c.b_layout.upper() for c in REGISTRY[preset].values()
                                 if c.precision == precision})))
