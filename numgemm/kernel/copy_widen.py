"""The widen-on-load copy path (INT4, unpack="tile"): s4 tiles travel
through registers and reach shared memory widened to s8.

Each thread loads its 16-byte pieces of a k-tile with ld.global.v4 into
registers one tile ahead (issue, before the current tile's mmas), then
widens them exactly and stores 32 bytes of s8 with st.shared.v4 at twice
the column (land, behind those mmas). The warps then run the int8 k32
routine on s8 tiles (KernelConfig.shared_view). There are no cp.async
groups: the barrier that ends a tile is what makes its stores visible.
"""

from .. import primitives as P
from ..precision import PRECISIONS
from . import copy_threads
from .regs import device, getter, setter

_nothing = device(lambda: None)


def routine(cfg):
    return copy_threads.routine(cfg, _load_one, _land, _registers, _nothing,
                                device(lambda st, kt, off, ktiles: None))


def _registers(cfg, rows, row_bytes, unit):
    """Four registers per 16-byte piece a thread loads of a tile."""
    return 4 * copy_threads.pass_count(cfg, rows, row_bytes, unit)[0]


def _load_one(cfg, unit, reg0):
    ptx = P.routines(cfg.linkage)
    ld, put4 = getattr(ptx, f"ld_global_{cfg.cache}_v4"), setter(4)
    return device(lambda i, dst, src, ok, policy, regs: put4(regs, reg0 + 4 * i, ld(src, ok)))


def _copy_to_stage(cfg, unit, reg0):
    """widen_in="stage": a piece's 16 bytes of s4 by cp.async into the first
    16 of the 32 it widens to (zero-filled past the matrix), where the same
    thread reads them back (_land_staged)."""
    cp = getattr(P.routines(cfg.linkage), f"cp_async_{cfg.cache}")
    return device(lambda i, dst, src, ok, policy, regs: cp(dst, src, ok))


def _land_staged(cfg, rows, row_bytes, pitch, unit, reg0):
    """_land with each piece's words read from where _copy_to_stage put them:
    its 32 bytes are this thread's alone, so it widens them in place."""
    return _land(cfg, rows, row_bytes, pitch, unit, reg0, staged=True)


def _land(cfg, rows, row_bytes, pitch, unit, reg0, raw=False, staged=False):
    """land(rows_in_tile, dst, regs): a tile's s4 pieces widened into its s8
    rows (16 x s8 where cfg.scaled). A piece's 32 bytes are its row's chunks
    2c and 2c + 1: side by side in padded rows; in the 128-byte swizzle (the
    wgmma stages) chunk 2c lands at dst and 2c + 1 at dst ^ 16, since the
    XOR flips the low chunk bit alike for both. raw (A with a_regs): each
    piece as it came, in the first of those two chunks (the consumers'
    ldmatrix reads it there, eight rows in eight banks' groups)."""
    ptx = P.routines(cfg.linkage)
    st, get4, ld = ptx.st_shared_v4, getter(4), ptx.ld_shared_v4_b32
    widen = ptx.unpack_s4_s8x16 if cfg.scaled else ptx.unpack_s4_s8
    passes, step, ragged = copy_threads.pass_count(cfg, rows, row_bytes, unit)
    swizzled, grouped = cfg.shared_view.swizzle, cfg.a_regs

    def land(rows_in_tile, dst, regs):
        # Each word's eight s4 become (e0 e2 e4 e6) (e1 e3 e5 e7): A and B rows
        # are permuted alike along K, so their products meet. a_regs: the
        # words' first halves, then their second, the order in which a
        # consumer's A registers hold word q of a row (a0, a2 = its halves).
        for i in range(passes):
            if not ragged or i * step < rows_in_tile:
                at = dst + i * step * pitch
                w = ld(at) if staged else get4(regs, reg0 + 4 * i)
                if raw:
                    st(at, w)
                    continue
                x0, x1, x2, x3 = widen(w[0]), widen(w[1]), widen(w[2]), widen(w[3])
                if grouped:
                    st(at, (x0[0], x1[0], x2[0], x3[0]))
                    st(at ^ 16, (x0[1], x1[1], x2[1], x3[1]))
                else:
                    st(at, (x0[0], x0[1], x1[0], x1[1]))
                    st(at ^ 16 if swizzled else at + 16, (x2[0], x2[1], x3[0], x3[1]))
    return device(land)


def _land_raw(cfg, rows, row_bytes, pitch, unit, reg0):
    """_land's raw form: A's s4 pieces as they came (a_regs)."""
    return _land(cfg, rows, row_bytes, pitch, unit, reg0, raw=True)


def rules(cfg):
    """Where INT4 widens (cfg.unpack): in an mma or wgmma kernel of a
    precision that widens; tile_scaled and pass are wgmma's; a tile
    widened on load is an N x K one loaded by ld.global."""
    err = []
    if cfg.unpack in ("tile_scaled", "pass") and cfg.op != "wgmma":
        err.append(f"unpack={cfg.unpack} is a wgmma kernel's widening")
    if cfg.unpack != "none" and (not cfg.prec.widens_to or cfg.op not in ("mma", "wgmma")):
        widening = " or ".join(q.name for q in PRECISIONS.values() if q.widens_to)
        err.append(f"unpack applies to {widening} (the precisions that widen) mma and wgmma kernels")
    if cfg.widens_tile and (cfg.b_layout != "nk" or cfg.evict != "none"):
        err.append("unpack=tile widens N x K tiles loaded by ld.global (b_layout=nk, evict=none)")
    return err
