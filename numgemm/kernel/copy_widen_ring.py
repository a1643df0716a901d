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
from ..tiles import SWIZZLE_BYTES
from . import copy_threads, copy_tma, ring
from .copy_widen import (
    _copy_to_stage,
    _land,
    _land_raw,
    _land_staged,
    _load_one,
    _registers,
)
from .regs import device, generated, inlined

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
    rg = copy_tma.ring_of(cfg, full_count=cfg.producer_threads)

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

    wait, acquire, release = copy_tma.on_bars(rg, cfg.stages)
    # setup is inlined by Numba: the state holds the per-thread registers (a local array).
    setup, stage, land = inlined(setup), device(stage), device(land)
    fill = _fill(cfg, setup, stage, threads.issue, land, acquire, ring.step(cfg.shared_view), threads.commit)
    return threads._replace(start=device(start), setup=setup, stage=stage, land=land, wait=wait, acquire=acquire,
                            release=release, fill=fill)


def _fill(cfg, setup, stage, issue, land, acquire, next_stage, commit):
    """The widening producer's fill (seams.CopyRoutine): its k loop over one
    output tile, its loads cfg.load_sets k-tiles ahead. Its k-tiles are
    always 0 .. ke - 1 (kb = 0: no stream-K), of A and B as given (k0
    unread: split-K gives it views that start at the run). Written out: a run-time choice between
    per-thread arrays would send them to local memory.

    widen_in="registers": the loads fill load_sets register sets in turn;
    k-tile by k-tile, the producer waits for the stage to be free, widens the
    set into it and loads the k-tile load_sets ahead into the same set.
    widen_in="stage": the loads are cp.async into the stages themselves, so a
    k-tile's stage is acquired before its copies start, each k-tile's copies
    one commit group (empty past the last k-tile); k-tile by k-tile, the
    producer waits for its own copies of it (cp.async.wait_group), widens
    them in place and starts the k-tile load_sets ahead."""
    sets = cfg.load_sets
    if cfg.widen_in == "stage":
        lines = ["c = setup(ctx, sbase, A, B, z, zb, m0, n0, tid, 0, dims)", "o = off"]
        for i in range(sets):
            lines += [f"if ktiles > {i}:", f"    acquire(c, g + {i}, o)", f"    issue(stage(c, {i}, o, False), -1)",
                      "commit()", "o = next_stage(o)"]
        lines += ["kt = 0", "while kt < ktiles:", "    landed()", "    land(c, off)", f"    if kt + {sets} < ktiles:",
                  f"        acquire(c, g + {sets}, o)", f"        issue(stage(c, kt + {sets}, o, False), -1)",
                  "    commit()", "    g, off, o = g + 1, next_stage(off), next_stage(o)", "    kt += 1",
                  "return g, off"]
    else:
        lines = [f"c{i} = setup(ctx, sbase, A, B, z, zb, m0, n0, tid, 0, dims)" for i in range(sets)]
        lines += ["o = off"]
        for i in range(sets):
            lines += [f"if ktiles > {i}:", f"    issue(stage(c{i}, {i}, o, False), -1)", "o = next_stage(o)"]
        lines += ["kt = 0", "while kt < ktiles:"]
        for i in range(sets):
            lines += [f"    if kt + {i} < ktiles:", f"        acquire(c{i}, g, off)", f"        land(c{i}, off)",
                      f"        if kt + {i + sets} < ktiles:",
                      f"            issue(stage(c{i}, kt + {i + sets}, o, False), -1)",
                      "        g, off, o = g + 1, next_stage(off), next_stage(o)"]
        lines += [f"    kt += {sets}", "return g, off"]
    env = {"setup": setup, "stage": stage, "issue": issue, "land": land, "acquire": acquire,
           "next_stage": next_stage, "commit": commit}
    if cfg.widen_in == "stage":     # the groups of the k-tiles after this one may still be in flight
        env["landed"] = getattr(P.routines(cfg.linkage), f"cp_async_wait_{sets - 1}")
    return generated("widen_tile", "ctx, sbase, A, B, z, zb, m0, n0, tid, dims, g, off, k0, kb, ktiles", lines, env)


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
