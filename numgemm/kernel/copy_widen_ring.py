"""INT4 into the warp-specialised ring (op="wgmma", unpack="tile" or
"tile_scaled"): the producer warpgroup loads s4, widens it to s8 and writes
the stage itself.

wgmma has no s4 form, and reads its operands from shared memory, so the s4
tiles must reach the stages as s8 in the 128-byte swizzle that the wgmma
warp routine reads (int8_wgmma's layout). Each of the producer's 128
threads owns 16-byte pieces of a k-tile (numgemm.kernel.copy_threads: its
rows 32 apart, its addresses set up once, rows and K past the matrix
zero-filled). It loads a k-tile with ld.global.v4 load_sets k-tiles ahead
(the skeleton fills as many register sets in turn; widen_in="stage": by
cp.async into the first 16 of the 32 bytes each piece widens to, in the
stage itself, read back once its copies have landed), and lands one: each 16 bytes of s4
become 32 of s8 (copy_widen's widening, exact or 16 x s8, A and B permuted
alike along K) in two swizzled chunks (a_regs: A's 16 bytes as they came,
in the first, for the consumers to widen), then fence.proxy.async makes its
stores visible to wgmma and it arrives on the stage's "full" mbarrier, which
completes when all 128 have. The "empty" barriers, the waits and the
releases are copy_tma's.
"""

from collections import namedtuple

from numba import cuda

from .. import primitives as P
from ..config import SWIZZLE_BYTES
from . import copy_threads, copy_tma
from .copy_widen import (
    _copy_to_stage,
    _land,
    _land_raw,
    _land_staged,
    _load_one,
    _registers,
)
from .regs import device, inlined

Block = namedtuple("Block", "bars policy")
State = namedtuple("State", "bars copies")


def routine(cfg):
    ptx = P.routines(cfg.linkage)
    # What a piece's copy is, where it waits, and how it lands: from registers, or (stage) read back
    # where cp.async put it; A's s4 (a_regs) as it came, which in the stage is where it already lies.
    if cfg.widen_in == "stage":
        landed = device(lambda rows_in_tile, dst, regs: None)
        path = (_copy_to_stage, _land_staged, lambda *_: 0, device(lambda: ptx.cp_async_commit()),
                lambda *_: landed)
    else:
        path = (_load_one, _land, _registers, device(lambda: None), _land_raw)
    copy_one, land_one, n_regs, commit, land_a = path
    threads = copy_threads.routine(cfg, copy_one, land_one, n_regs, commit, device(lambda st, kt, off, ktiles: None),
                                   land_a if cfg.a_regs else None)
    rg = copy_tma.ring(cfg, full_count=cfg.producer_threads)

    place = rg.place

    def start(smem, tmaps, tid):
        sbase, bars = place(smem)
        if tid == 0:
            rg.init(bars)
            ptx.mbarrier_init_fence()
        cuda.syncthreads()
        return sbase, Block(bars, threads.start(smem, tmaps, tid)[1])

    # A name of its own: Numba inlines a call of a function it finds as a global
    # or a closure variable, not one of an attribute of a tuple; called, the
    # registers' array would live in that call's frame.
    copies_setup = threads.setup

    def setup(blk, sbase, A, B, z, zb, row_a, row_b, copier, tile_off, dims):
        return State(blk.bars, copies_setup(blk.policy, sbase, A, B, z, zb, row_a, row_b, copier, tile_off, dims))

    def stage(st, kt, off, inside):
        return threads.stage(st.copies, kt, off, inside)

    def land(st, off):
        threads.land(st.copies, off)
        ptx.fence_proxy_async()             # the stores, visible to wgmma's reads
        ptx.mbarrier_arrive(rg.full(st.bars, off))

    wait, acquire, release = copy_tma.on_bars(rg)
    # setup is inlined by Numba: the state holds the per-thread registers (a local array).
    return threads._replace(start=device(start), setup=inlined(setup), stage=device(stage), land=device(land),
                            wait=wait, acquire=acquire, release=release)


def rules(cfg):
    """What the widening producer needs: no cluster, a k-tile of 64 bytes
    of s4, load_sets within its registers (or the ring's stages)."""
    err = []
    widening = cfg.widens_tile and cfg.op == "wgmma"
    if widening and (cfg.cluster != 1 or cfg.bk_bytes * 2 != SWIZZLE_BYTES):
        err.append("wgmma widening: no cluster, a k-tile of 64 bytes of s4 (128 of s8)")
    if (cfg.load_sets != 2 or cfg.widen_in != "registers") and not widening:
        err.append("load_sets, widen_in: the loads of a widening wgmma producer")
    elif not 1 <= cfg.load_sets <= (4 if cfg.widen_in == "registers" else cfg.stages - 1):
        err.append(f"load_sets must be 1..{4 if cfg.widen_in == 'registers' else cfg.stages - 1} "
                   f"(widen_in={cfg.widen_in}), got {cfg.load_sets}")
    return err
