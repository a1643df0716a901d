"""The wgmma warp routine (sm_90a; ptx_asm/wgmma.ptx, through numgemm.primitives).

A consumer warpgroup computes 64 rows x bn of the block tile with
wgmma.mma_async m64n256 (or m64n128), its 128 (64) accumulators a thread
in registers. Its A
rows and all of B are read from the stage's 128-byte swizzled tiles, as TMA
landed them, through matrix descriptors: A and an N x K B are K-major (a k
step moves the descriptor along the row), a K x N B (fp16) is N-major (the
instruction transposes it; boxes of 64 columns lie a box apart, a k step is
16 rows down). A k-tile's wgmmas form one commit group, fenced before.
With a_regs (INT4) A comes from registers instead: each thread reads its s4
with ldmatrix and widens it to s8 itself, then fences and issues the wgmmas
(_a_from_registers).

The accumulator layout is mma.sync's m16n8 C fragment, warp w of the
warpgroup holding its rows 16w .. 16w + 15: the mma epilogue stores it, as
it would a 16 x bn warp tile (cfg.warp_tile).
"""

from numba import cuda

from .. import primitives as P
from ..config import SWIZZLE_BYTES
from .regs import ACC, device, generated, u32, u64, zeroed
from .seams import WarpRoutine
from .warp_mma import _store

_SBO = 8 * SWIZZLE_BYTES        # the swizzle's 8-row period: one group of rows to the next


def routine(cfg):
    """cfg's wgmma warp routine: WarpRoutine(init, None, None, compute, store),
    reading the stages as cfg.shared_view holds them (INT4: widened to s8;
    scaled, the epilogue shifts the sums back)."""
    ptx = P.routines("inline")
    a_regs, widen = cfg.a_regs, ptx.unpack_s4_s8x16 if cfg.scaled else ptx.unpack_s4_s8
    cfg, scaled = cfg.shared_view, cfg.scaled
    kn = cfg.b_layout == "kn"
    mma = getattr(ptx, cfg.prec.wgmma_at(cfg.bn) + ("_tb" if kn else "") + ("_rs" if a_regs else ""))
    n_acc = cfg.bm * cfg.bn // (cfg.threads - cfg.producer_threads)
    ksb = cfg.kstep_bytes
    # A descriptor's step for one k step, in its 16-byte units: along the 128-byte
    # row (K-major), or 16 rows of k units down a K x N box (N-major).
    a_step = ksb >> 4
    b_step = (cfg.mma_k // cfg.prec.k_per_unit * SWIZZLE_BYTES >> 4) if kn else a_step
    b_lbo = cfg.b_tile_shape[0] * SWIZZLE_BYTES if kn else 16      # K x N: box to box along N
    desc = ptx.wgmma_desc_sw128
    # The k-tile's wgmmas, written out: the accumulators go in as one tuple and
    # come back as one, so that between fence and commit nothing else defines them.
    acc_tuple = "(" + ", ".join(f"acc[{e}]" for e in range(n_acc)) + ")"
    lines = ["fence()", "da = desc(a_tile, u32(16), u32(sbo))", "db = desc(b_tile, u32(b_lbo), u32(sbo))",
             f"d = {acc_tuple}"]
    lines += [f"d = mma(d, da + u64({kk * a_step}), db + u64({kk * b_step}), u32(1))" for kk in range(cfg.ksteps)]
    if a_regs:
        lines = _a_from_registers(cfg.ksteps, b_step) + [f"d = {acc_tuple}"] + \
            [f"d = mma(d, a{kk}, db + u64({kk * b_step}), u32(1))"
             for kk in range(cfg.ksteps)]
    lines += [f"acc[{e}] = d[{e}]" for e in range(n_acc)] + ["commit()"]
    compute = generated("compute", "acc, a_tile, b_tile", lines,
                        {"fence": ptx.wgmma_fence, "commit": ptx.wgmma_commit, "desc": desc, "mma": mma,
                         "u32": u32, "u64": u64, "sbo": _SBO, "b_lbo": b_lbo, "cuda": cuda,
                         "ld4": ptx.ldmatrix_x4, "widen": widen})
    return WarpRoutine(zeroed(n_acc, ACC[cfg.acc]), None, None, compute, _store(cfg, scaled))


def _a_from_registers(ksteps, b_step):
    """a_regs: the lines that give this thread its A registers of a k-tile
    (a<kk>, four s8 words of k step kk) and fence them before the wgmmas.
    The stage holds A's s4 as it came, k step kk's 16 bytes of a row in its
    swizzled chunk 2 kk; one ldmatrix.x4 reads two k steps of the warp's 16
    rows (lanes 0-15 the first step's rows, 16-31 the second's), and lane
    (g, q) receives word q of rows g and g + 8 of each. A word widened gives
    its even elements (first register) and odd ones (second): a0, a2 and a1,
    a3 of the wgmma's A fragment, in the order the producer lays B out."""
    lines = ["tid = cuda.threadIdx.x", "lane = tid & 31",
             "row = a_tile + u32((((tid >> 5) & 3) * 16 + (lane & 15)) * 128)",
             "x, hi = lane & 7, (lane >> 4) * 2"]
    for p in range(ksteps // 2):
        lines += [f"r = ld4(row + u32((({4 * p} + hi) ^ x) << 4))",
                  "w0, w1, w2, w3 = widen(r[0]), widen(r[1]), widen(r[2]), widen(r[3])",
                  f"a{2 * p} = (w0[0], w1[0], w0[1], w1[1])",
                  f"a{2 * p + 1} = (w2[0], w3[0], w2[1], w3[1])"]
    return lines + ["fence()", "db = desc(b_tile, u32(b_lbo), u32(sbo))"]


#: The end of a consumer's k loop: wait_1 lets the newest k-tile's wgmmas run
#: on while the one before releases its stage; wait_0 before the epilogue.
wait_1 = device(lambda: P.wgmma_wait_1())
wait_0 = device(lambda: P.wgmma_wait_0())
