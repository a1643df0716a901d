"""The wgmma warp routine (sm_90a; ptx_asm/wgmma.ptx, through numgemm.primitives).

A consumer warpgroup computes 64 rows x bn of the block tile with
wgmma.mma_async m64n256 (or m64n128), its 128 (64) accumulators a thread
in registers. Its A
rows and all of B are read from the stage's 128-byte swizzled tiles, as TMA
landed them, through matrix descriptors: A and an N x K B are K-major (a k
step moves the descriptor along the row), a K x N B (fp16) is N-major (the
instruction transposes it; boxes of 64 columns lie a box apart, a k step is
16 rows down). A k-tile's wgmmas form one commit group, fenced before.

The accumulator layout is mma.sync's m16n8 C fragment, warp w of the
warpgroup holding its rows 16w .. 16w + 15: the mma epilogue stores it, as
it would a 16 x bn warp tile (cfg.warp_tile).
"""

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
    cfg, scaled = cfg.shared_view, cfg.scaled
    ptx = P.routines("inline")
    kn = cfg.b_layout == "kn"
    mma = getattr(ptx, cfg.prec.wgmma_at(cfg.bn) + ("_tb" if kn else ""))
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
    lines += [f"acc[{e}] = d[{e}]" for e in range(n_acc)] + ["commit()"]
    compute = generated("compute", "acc, a_tile, b_tile", lines,
                        {"fence": ptx.wgmma_fence, "commit": ptx.wgmma_commit, "desc": desc, "mma": mma,
                         "u32": u32, "u64": u64, "sbo": _SBO, "b_lbo": b_lbo})
    return WarpRoutine(zeroed(n_acc, ACC[cfg.acc]), None, None, compute, _store(cfg, scaled))


#: The end of a consumer's k loop: wait_1 lets the newest k-tile's wgmmas run
#: on while the one before releases its stage; wait_0 before the epilogue.
wait_1 = device(lambda: P.wgmma_wait_1())
wait_0 = device(lambda: P.wgmma_wait_0())
