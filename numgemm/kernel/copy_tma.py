"""The TMA copy path (sm_90): one thread has the tensor memory accelerator
copy each operand's whole k-tile; the warps wait on the stage's mbarrier.

A's k-tile is one box of bm rows of 128 bytes of K (INT4 unpack="pass": 64
bytes of s4, in the 64-byte swizzle); B's is one box (N x K)
or boxes side by side, each 128 bytes of N wide (K x N; one of 64 bytes for
a wgmma tile 32 columns wide). The TMA unit lands them in the swizzle of
their rows' span, zero-fills what lies outside the matrix, and
counts their bytes on the stage's mbarrier (arrive.expect_tx), so there is
no per-thread copy arithmetic and no bounds check in the k loop. A warp
waits for k-tile kt on the parity of its use of the stage (kt / stages).
The tensor maps (numgemm.tensormap) lie in global memory; the kernel
acquires them once.

With a producer (op="wgmma") each stage has a second mbarrier, "empty": one
lane of each consumer warp arrives on it once its warpgroup's wgmmas have
read the stage, and the producer waits on it before it fills the stage
again, so that no block-wide barrier is needed in the k loop. In a cluster
(cfg.cluster CTAs on neighbouring tile rows, the same B tile) each CTA's
producer loads its share of B and multicasts it to every CTA of the
cluster: a stage's "full" barrier still counts the whole stage's bytes, and
its "empty" barrier counts the consumer warps of every CTA, since a share
lands in all of them. With multicast="a" the cluster's CTAs lie on
neighbouring tile columns and share A the same way, each loading all of B.
"""

from collections import namedtuple

from numba import cuda

from .. import primitives as P
from ..tiles import SWIZZLE_BYTES
from . import ring
from .regs import device, divmod32, i32, u32, u64
from .seams import CopyRoutine

#: The block's: the mbarriers' address, the tensor maps' (A's, B's 128 bytes
#: after it), whether this thread issues the copies, its rank in the cluster.
Block = namedtuple("Block", "bars tmaps issuer rank")
State = namedtuple("State", "sbase bars tmaps issuer rank row_a row_b z zb")
#: One stage's copies: where they land, A's box at (kb0, row_a, z), B's first
#: at (b0, b1, zb), the stage's mbarrier.
Boxes = namedtuple("Boxes", "dst kb0 bar issuer rank tmaps row_a b0 b1 z zb")


def ring_of(cfg, full_count=1):
    """cfg's ring of mbarriers (ring.mbarriers), after the stages and C's
    staging: full barriers that full_count arrivals complete, and with a
    producer empty ones that the consumer warps reading a stage
    (cfg.stage_readers) in every CTA of the cluster complete."""
    return ring.mbarriers(cfg.stages, cfg.stage_bytes, cfg.smem_bytes - cfg.tma_bytes, cfg.stage_readers,
                          cfg.cluster, full_count, cfg.producer_threads > 0, cfg.linkage)


def routine(cfg):
    ptx = P.routines(cfg.linkage)
    stage_bytes, tile_a = cfg.stage_bytes, cfg.tile_bytes_a
    rg = ring_of(cfg)
    b_span = cfg.b_swizzle                  # a B box's row bytes
    b_boxes = cfg.b_tile_shape[1] // b_span
    b_box_bytes = cfg.b_tile_shape[0] * b_span
    bkb, b_bkb, kn, b_esize = cfg.bk_bytes, cfg.b_bk_bytes, cfg.b_layout == "kn", 2
    bk_units = cfg.bk // cfg.prec.k_per_unit
    producer = cfg.producer_threads > 0
    cl = cfg.cluster
    # A cluster's CTAs share B: each loads 1 / cl of it (N x K: rows; K x N: boxes,
    # every cl-th where they do not divide).
    share_rows, share_boxes = cfg.tma_box_rows[1], b_boxes // cl
    mask = u32((1 << cl) - 1)
    # multicast="a": they share A instead, each its rows of the tile (whole swizzle periods).
    share_a, a_rows, a_span = cl > 1 and cfg.multicast == "a", cfg.tma_box_rows[0], cfg.tma_box_bytes[0]

    place = rg.place

    def start(smem, tmaps, tid):
        sbase, bars = place(smem)
        rank = ptx.cluster_ctarank() if cl > 1 else u32(0)
        if tid == 0:
            ptx.tensormap_acquire(tmaps)
            ptx.tensormap_acquire(tmaps + u64(128))
            rg.init(bars)
            ptx.mbarrier_init_fence()
        if cl > 1:
            ptx.cluster_sync()          # every CTA's barriers exist before any share lands
        else:
            cuda.syncthreads()
        return sbase, Block(bars, tmaps, tid == 0, rank)

    def setup(blk, sbase, A, B, z, zb, row_a, row_b, copier, tile_off, dims):
        return State(sbase, blk.bars, blk.tmaps, blk.issuer, blk.rank, row_a, row_b, z, zb)

    def stage(st, kt, off, inside):
        kb0 = i32(kt * bkb)
        # B's first box: at (k byte, n row) of N x K B; at (n byte, k row) of K x N B
        b0, b1 = (i32(st.row_b * b_esize), i32(kt * bk_units)) if kn else (i32(kt * b_bkb), st.row_b)
        return Boxes(st.sbase + off, kb0, rg.full(st.bars, off), st.issuer, st.rank, st.tmaps, st.row_a, b0, b1,
                     i32(st.z), i32(st.zb))

    def issue(bx, part):
        """The whole k-tile with the first part (or all): A's box and B's, the
        stage's mbarrier told their bytes."""
        if part <= 0 and bx.issuer:
            ptx.mbarrier_arrive_expect_tx(bx.bar, u32(stage_bytes))
            if share_a:                 # this CTA's rows of A, to every CTA
                rows = bx.rank * u32(a_rows)
                ptx.tma_load_3d_multicast(bx.dst + rows * u32(a_span), bx.tmaps,
                                          (bx.kb0, bx.row_a + i32(rows), bx.z), bx.bar, mask)
            else:
                ptx.tma_load_3d(bx.dst, bx.tmaps, (bx.kb0, bx.row_a, bx.z), bx.bar)
            if cl == 1 or share_a:      # all of B
                for box in range(b_boxes):
                    ptx.tma_load_3d(bx.dst + u32(tile_a + box * b_box_bytes), bx.tmaps + u64(128),
                                    (bx.b0 + i32(box * b_span), bx.b1, bx.zb), bx.bar)
            elif kn and b_boxes % cl:   # boxes that do not divide: every cl-th from the CTA's rank
                for box in range(b_boxes):
                    if u32(box % cl) == bx.rank:
                        ptx.tma_load_3d_multicast(bx.dst + u32(tile_a + box * b_box_bytes), bx.tmaps + u64(128),
                                                  (bx.b0 + i32(box * b_span), bx.b1, bx.zb), bx.bar, mask)
            elif kn:                    # this CTA's boxes of B's columns, to every CTA
                for i in range(share_boxes):
                    box = bx.rank * u32(share_boxes) + u32(i)
                    ptx.tma_load_3d_multicast(bx.dst + u32(tile_a) + box * u32(b_box_bytes), bx.tmaps + u64(128),
                                              (bx.b0 + i32(box * b_span), bx.b1, bx.zb), bx.bar, mask)
            else:                       # this CTA's rows of B, to every CTA
                part = bx.rank * u32(share_rows)
                ptx.tma_load_3d_multicast(bx.dst + u32(tile_a) + part * u32(SWIZZLE_BYTES), bx.tmaps + u64(128),
                                          (bx.b0, bx.b1 + i32(part), bx.zb), bx.bar, mask)

    wait, acquire, release = on_bars(rg, cfg.stages)
    setup, stage, issue = device(setup), device(stage), device(issue)
    next_stage = ring.step(cfg.shared_view)

    def fill(ctx, sbase, A, B, z, zb, m0, n0, tid, dims, g, off, k0, kb, ke):
        cs = setup(ctx, sbase, A, B, z, zb, m0, n0, tid, 0, dims)
        kt, end = i32(kb), i32(ke)
        while kt < end:
            acquire(cs, g, off)
            issue(stage(cs, k0 + kt, off, False), -1)
            g, off, kt = u32(g + 1), next_stage(off), i32(kt + 1)
        return g, off

    return CopyRoutine(device(start), setup, stage, issue,
                       device(lambda st, off: None),            # the TMA unit lands the boxes
                       device(lambda: None),                    # no cp.async groups
                       wait, device(lambda m0, n0, dims: False),   # no bounds checks to drop
                       *((acquire, release, device(fill)) if producer else ()))


def on_bars(rg, stages):
    """The ring's wait, acquire and release as a copy routine's members: of a
    state whose .bars are the barriers' address, for the kt-th use of the
    ring (kt / stages: the stage's use, whose parity its barriers' phase
    follows). wait(st, kt, off, ktiles): k-tile kt has landed in the stage
    at off, if kt < ktiles (None: always); acquire(st, kt, off): the stage
    is free for use kt (its consumers released use kt - stages);
    release(st, off): this consumer warp has read it."""
    def wait(st, kt, off, ktiles):
        if ktiles is not None:              # None: every use is waited for (Numba drops the test)
            if kt >= ktiles:
                return
        rg.wait(st.bars, off, divmod32(kt, stages)[0] & u32(1))

    def acquire(st, kt, off):
        if kt >= stages:
            rg.acquire(st.bars, off, (divmod32(kt, stages)[0] + u32(1)) & u32(1))
    return device(wait), device(acquire), device(lambda st, off: rg.release(st.bars, off))


def rules(cfg):
    """What a TMA copy needs: boxes of at most 256 rows, no evict policy."""
    if cfg.copy == "tma" and (cfg.evict != "none" or max(cfg.tma_box_rows) > 256):
        return [f"copy=tma copies boxes of at most 256 rows, with no evict policy: "
                f"boxes of {cfg.tma_box_rows} rows, evict={cfg.evict}"]
    return []


def host(p):
    """The plan's side (plans.Parts): the tensor maps of the kernel's A and B
    sides for cfg's boxes, A's with B's 128 bytes after it, in memory of the
    plan's own; the kernel takes their address. B is N x K bytes, or K x N:
    then its map's rows are k and a box is 128 (or 64: cfg.b_swizzle) bytes
    of N."""
    if p.cfg.copy == "tma":
        rows, nbytes = p.cfg.tma_box_rows, p.cfg.tma_box_bytes
        p.ab_maps = p.add_maps([(p.A, rows[0], nbytes[0]), (p.B, rows[1], nbytes[1])])
