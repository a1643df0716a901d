"""The warp-specialised GEMM skeleton (op="wgmma"): a producer warpgroup and
consumer warpgroups around a ring of stages, reading the same two seams.

A block computes one output tile, as in numgemm.kernel.skeleton (the same
tile walk and rasterisation, the same batch on grid.z, the same operand
views and epilogue); what differs is who does what in its k loop:

    warpgroup 0, the producer, gives most of its registers back
    (setmaxnreg.dec) and runs the copy routine's fill over each of its
    tiles: TMA's, on one thread, waits for each k-tile until the stage is
    free (acquire: the stage's "empty" mbarrier), then has TMA fill it;

    warpgroups 1 .. warps_m / 4, the consumers, take those registers
    (setmaxnreg.inc) and each runs the warp routine on its 64 rows: it waits
    for the stage (wait: the "full" mbarrier that counts TMA's bytes),
    issues the k-tile's wgmmas as one commit group, lets that group run on
    while it waits for the one before (wgmma.wait_group 1), and releases the
    stage that one read.

INT4 (widened once per k-tile, cfg.widens_tile): all 128 of the producer's
threads load s4 cfg.load_sets k-tiles ahead, in as many register sets, and
widen each k-tile into its stage once the consumers have freed it (a_regs:
B only; each consumer widens its A rows in registers); setmaxnreg gives the
consumers what those sets leave (cfg.register_split).

So no block-wide barrier stands in the k loop: copies run stages - 1 tiles
ahead, and each consumer's wgmmas overlap its waits and the other's. With
persistent=True a grid of one block per SM walks the output tiles (every
gridDim.x-th): the producer fills the ring for the next tile while the
consumers store this one. Split-K is the skeleton's: grid.z is the batch
times split_k, and a block sums its run of k-tiles into its workspace slice;
a run may be empty, and then nothing waits on the ring or releases it, and
the consumers store zeros. With stream_k the tiles past the last whole wave
are shared out by runs of k-tiles instead (_stream_k), in the same k loop.

With pingpong each consumer warpgroup computes whole tiles (both halves),
the two taking the block's tiles in turn: the ring's uses of a tile are all
one warpgroup's (the other skips them), and a named barrier a warpgroup
lets the other's k loop start once its own has issued its last k-tile, so
that each waits on a stage's barrier only in the phase after the last one
observed, and one's epilogue runs while the other's wgmmas run.
"""

import numpy as np
from numba import cuda

from .. import primitives as P
from ..tiles import SWIZZLE_BYTES, WGMMA_PARTS
from . import ring
from .regs import device, divmod32, i32, u8, u32
from .skeleton import split_k_part, tile_order
from .warp_wgmma import partials, wait_0, wait_1


def kernel_function(cfg, warp_rt, copy_rt):
    """The Python function of cfg's kernel with this WarpRoutine and CopyRoutine."""
    init, store, start = warp_rt.init, warp_rt.store, copy_rt.start
    prefetch = warp_rt.prefetch
    ptx = P.routines("inline")
    bm, bn, bkb = cfg.bm, cfg.bn, cfg.bk_bytes
    producer_warps = cfg.producer_threads // 32
    widen = cfg.widens_tile
    nothing = device(lambda: None)
    regs = cfg.register_split           # the producer's registers to the consumers
    shrink, grow = (P.setmaxnreg("dec", regs[0]), P.setmaxnreg("inc", regs[1])) if regs else (nothing, nothing)
    persistent, cluster, share_a = cfg.persistent, cfg.cluster, cfg.multicast == "a"
    k_part, split = split_k_part(cfg), cfg.split_k
    c_tma, stagger, swap = cfg.c_tma, cfg.stagger, cfg.swap
    stream = cfg.stream_k
    stream_part, run_of, publish, gather = _stream_k(cfg) if stream else (None,) * 4
    cluster_tile = _cluster_tile(cfg)
    produce, consume = _produce(cfg, copy_rt, cluster_tile, run_of), _consume(cfg, warp_rt, copy_rt)
    a_rows_of = cfg.shared_view.pitch_a * 64                  # a consumer warpgroup's 64 rows of A
    pingpong, stages, stage_bytes = cfg.pingpong, cfg.stages, cfg.stage_bytes
    stage_at = device(lambda g: u32(divmod32(g, u32(stages))[1] * u32(stage_bytes)))    # the stage of use g

    def gemm_kernel(A, B, C, M, N, K, KB, NB, c_aligned, tmaps):
        """Arguments as skeleton.gemm_kernel's; stream_k: C is (the workspace,
        C, the workspace's flags)."""
        tid = cuda.threadIdx.x
        warp, lane = tid >> 5, tid & 31
        tiles_m, tiles_n = (M + bm - 1) // bm, (N + bn - 1) // bn
        if share_a:                                         # tile columns in whole clusters
            pairs_m = tiles_m
            tiles = tiles_m * ((tiles_n + cluster - 1) // cluster) * cluster
        else:
            pairs_m = (tiles_m + cluster - 1) // cluster    # tile rows in whole clusters
            tiles = pairs_m * cluster * tiles_n
        step = cuda.gridDim.x if persistent else tiles      # persistent: every gridDim.x-th tile
        z = zc = cuda.blockIdx.z            # A's and B's batch; C's (split-K: the workspace's slice)
        if split > 1:
            z = zc // split
        zb = z if B.shape[0] > 1 else 0
        za = z if not swap or A.shape[0] > 1 else 0     # swap: A is the caller's B, maybe one for every batch
        dims = (M, N, K, KB, NB)
        sbase, ctx = start(P.shared_addr(cuda.shared.array(0, u8), 0), tmaps, tid)
        ktiles, k0 = (KB + bkb - 1) // bkb, 0
        if split > 1:                       # split-K: the run of k-tiles summed here
            k0, ktiles = k_part(zc, ktiles)
            if widen:       # the producer's loads: views of A and B that start at the run
                A, B = A[:, :, k0 * bkb:], B[:, :, k0 * bkb:]
                dims = (M, N, K, i32(KB - k0 * bkb), NB)
        # The ring's uses are counted across tiles (g): a stage's barrier
        # parities follow its uses, not a tile's k index.
        g, off = u32(0), u32(0)
        tile = cuda.blockIdx.x
        whole, it0, it1 = tiles, 0, 0       # the tiles each computed whole; the cluster's stream-K run
        if stream:
            whole, it0, it1 = stream_part(tiles, ktiles)
        if warp < producer_warps:
            shrink()
            produce(ctx, sbase, A, B, za, zb, tid, dims, k0, ktiles, tile, step, whole, it0, it1, pairs_m, tiles_n)
        else:
            grow()
            cw = warp - producer_warps                  # the consumer's warp: rows 16 cw .. of the tile
            wg = cw >> 2
            # its warpgroup's 64 rows of A (pingpong: all 128 from the tile's first); lane 0's
            # value, so that ptxas knows it is the warp's and keeps the descriptors in uniform registers
            a_rows = u32(cuda.shfl_sync(0xFFFFFFFF, i32(0 if pingpong else wg * a_rows_of), 0))
            wr = 16 * (cw & 3) if pingpong else 16 * cw     # its first row of the tile (pingpong: of each half)
            Cout = C[1] if stream else C            # stream_k: C is (the workspace, C, its flags)
            # stagger: the first warpgroup's go after its first k-tiles, the second's wait for it
            go_at, go_bar = (min(stagger, ktiles) - 1 if stagger and cw < 4 else -1), 1
            stride = step
            if pingpong:    # every other tile of the block's, the other warpgroup's uses of the ring skipped
                stride = 2 * step
                if wg == 1:
                    tile += step
                    g = u32(ktiles)
                    off = stage_at(g)
                go_bar = 3 - wg
            while tile < whole:
                tm, tn = cluster_tile(tile, pairs_m, tiles_n)
                m0, n0 = i32(tm * bm), i32(tn * bn)
                acc = init()
                if prefetch is not None:
                    prefetch(Cout, m0, n0, wr, M, N, tid)
                if stagger and cw >= 4 and g == 0:
                    ptx.bar_sync(u32(1), u32(256))
                if pingpong:        # k loops in turn: this one's after the other's has issued its last wgmmas
                    if tile != cuda.blockIdx.x:
                        ptx.bar_sync(u32(2 + wg), u32(256))
                    go_at = ktiles - 1 if tile + step < whole else -1
                g, off = consume(acc, ctx, sbase, A, B, za, zb, m0, n0, tid, lane, dims, a_rows, g, off, 0, ktiles,
                                 go_at, go_bar)
                if pingpong:
                    g = u32(g + ktiles)
                    off = stage_at(g)
                else:
                    go_at = -1
                store(acc, Cout, zc, m0, n0, wr, 0, M, N, tid, c_aligned)
                tile += stride
            it = it0
            while stream and it < it1:         # stream-K: the runs, each a part of a tile
                tile, kb, ke = run_of(it, it1, whole, ktiles)
                tm, tn = cluster_tile(tile, pairs_m, tiles_n)
                m0, n0 = i32(tm * bm), i32(tn * bn)
                part = init()
                g, off = consume(part, ctx, sbase, A, B, za, zb, m0, n0, tid, lane, dims, a_rows, g, off, kb, ke, -1,
                                 1)
                slot = zc * cuda.gridDim.x + cuda.blockIdx.x
                if kb > 0:          # not the tile's first k-tiles: a partial sum for the CTA that has them
                    publish(part, C, slot, tid - 32 * producer_warps, cw, lane)
                else:
                    if ke < ktiles:     # the tile's later k-tiles: the next clusters' partial sums
                        gather(part, C, zc, tid - 32 * producer_warps, cw, lane, it + ke, it + ktiles, tiles, ktiles)
                    store(part, Cout, zc, m0, n0, cw * 16, 0, M, N, tid, c_aligned)
                it += ke - kb
            if c_tma and lane == 0:     # C's last TMA stores read this block's buffers until they end
                ptx.bulk_wait_0()
        if cluster > 1:             # no CTA leaves while another may still write its stages or barriers
            P.cluster_sync()

    gemm_kernel.__name__ = cfg.name
    return gemm_kernel


def _cluster_tile(cfg):
    """cluster_tile(tile, pairs_m, tiles_n): the output tile of block `tile`:
    a cluster's CTAs take neighbouring tile rows of one column
    (multicast="a": neighbouring columns of one row; tile_of walks the
    clusters); a CTA whose tile lies past M or N computes zeros (TMA fills
    them) and stores nothing."""
    tile_of, cluster, share_a = tile_order(cfg), cfg.cluster, cfg.multicast == "a"

    def cluster_tile(tile, pairs_m, tiles_n):
        if cluster == 1:
            return tile_of(tile, pairs_m, tiles_n)
        if share_a:
            tm, tn = tile_of(tile // cluster, pairs_m, (tiles_n + cluster - 1) // cluster)
            return tm, tn * cluster + tile % cluster
        tm, tn = tile_of(tile // cluster, pairs_m, tiles_n)
        return tm * cluster + tile % cluster, tn
    return device(cluster_tile)


def _produce(cfg, copy_rt, cluster_tile, run_of):
    """produce(ctx, sbase, A, B, za, zb, tid, dims, k0, ktiles, tile, step,
    whole, it0, it1, pairs_m, tiles_n): the producer warpgroup's part, the
    copy routine's fill of the ring for each k-tile the consumers sum, in
    their order: the tiles computed whole (from `tile`, every step-th, below
    `whole`), then the cluster's stream-K runs [it0, it1). TMA: one thread
    issues each stage's copies. Widening: all 128 load and widen, and not at
    all over an empty split-K run."""
    fill = copy_rt.fill
    bm, bn, widen, split, stream = cfg.bm, cfg.bn, cfg.widens_tile, cfg.split_k, cfg.stream_k

    def produce(ctx, sbase, A, B, za, zb, tid, dims, k0, ktiles, tile, step, whole, it0, it1, pairs_m, tiles_n):
        g, off = u32(0), u32(0)
        if widen or tid == 0:
            while tile < whole and (not widen or split == 1 or ktiles > 0):
                tm, tn = cluster_tile(tile, pairs_m, tiles_n)
                g, off = fill(ctx, sbase, A, B, za, zb, i32(tm * bm), i32(tn * bn), tid, dims, g, off, k0, 0, ktiles)
                tile += step
        it = it0
        while stream and tid == 0 and it < it1:            # stream-K (TMA): the tail's runs of k-tiles
            tile, kb, ke = run_of(it, it1, whole, ktiles)
            tm, tn = cluster_tile(tile, pairs_m, tiles_n)
            g, off = fill(ctx, sbase, A, B, za, zb, i32(tm * bm), i32(tn * bn), tid, dims, g, off, 0, kb, ke)
            it += ke - kb
    return device(produce)


def _consume(cfg, warp_rt, copy_rt):
    """consume(acc, ctx, sbase, A, B, z, zb, m0, n0, tid, lane, dims, a_rows,
    g, off, kb, ke, go_at, go_bar) -> (g, off): a consumer warp's sums over
    k-tiles kb .. ke - 1 of the tile at (m0, n0) into acc (zeroed), each
    stage released once the wgmmas after it have been issued; having issued
    k-tile go_at, it arrives on named barrier go_bar, where the other
    warpgroup waits to start (stagger, pingpong)."""
    compute, setup, wait, release = warp_rt.compute, copy_rt.setup, copy_rt.wait, copy_rt.release
    ptx = P.routines("inline")
    sv = cfg.shared_view                    # the stages as the consumers read them
    next_stage, tile_a = ring.step(sv), sv.tile_bytes_a
    split, stream = cfg.split_k, cfg.stream_k

    def consume(acc, ctx, sbase, A, B, z, zb, m0, n0, tid, lane, dims, a_rows, g, off, kb, ke, go_at, go_bar):
        cs = setup(ctx, sbase, A, B, z, zb, m0, n0, tid, 0, dims)
        last = off
        # 32-bit counters, each sum cast back: Numba widens integer arithmetic (and
        # range()) to 64 bits, a dozen instructions more a k-tile
        kt, first, end, go = i32(kb), i32(kb), i32(ke), i32(go_at)
        while kt < end:
            wait(cs, g, off, None)
            compute(acc, sbase + off + a_rows, sbase + off + u32(tile_a))
            if kt == go:
                ptx.bar_arrive(u32(go_bar), u32(256))
            wait_1()
            if kt > first and lane == 0:
                release(cs, last)           # k-tile kt - 1's wgmmas are done with it
            last, g, off, kt = off, u32(g + 1), next_stage(off), i32(kt + 1)
        wait_0()
        if lane == 0 and ((split == 1 and not stream) or ke > kb):
            release(cs, last)
        return g, off
    return device(consume)


def _stream_k(cfg):
    """stream_k: (stream_part, run_of, publish, gather).

    Of a grid of G clusters and U cluster tiles, the first (U // G - 1) G
    are computed whole as by any persistent kernel (every G-th by each
    cluster); the other U % G + G (all U where U < G), K's k-tiles of each one
    after another, are cut into G runs of equal length, one a cluster (from 1
    to 2 tiles' worth where U >= G, so no tile has more than two parts). A run's
    first part ends a tile that an earlier cluster began, or lies inside
    one; its sums go to the CTA's slot of the workspace (publish). A run's
    last part begins a tile; its CTA adds the partial sums of the clusters
    after it that hold the tile's other k-tiles (gather), and stores C. Each
    CTA publishes before it waits, and waits only on later CTAs, so that the
    tiles complete even where not every CTA of the grid is resident at once.

    stream_part(tiles, ktiles) -> (whole, it0, it1): the tiles computed
    whole, the cluster's run [it0, it1) of the streamed k-tiles;
    run_of(it, it1, whole, ktiles) -> (tile, kb, ke): the part of the run
    from it, k-tiles kb .. ke - 1 of tile; publish(acc, C, slot, ct, cw,
    lane): a consumer warp's sums into the slot, then its flag; gather(acc,
    C, zc, ct, cw, lane, done, tile_end, tiles, ktiles): the later clusters'
    sums of the tile's run from `done` to `tile_end`, each once its flag is set
    (the flag set back to 0 for the next launch)."""
    cluster = cfg.cluster
    warps = cfg.partial_shape[1] // 32          # consumer warps: a flag each
    save, add = partials(cfg)

    def split_of(tiles, ktiles):
        """(the tiles computed whole, k-tiles a run, runs one longer)."""
        units, groups = tiles // cluster, cuda.gridDim.x // cluster
        waves, tail = divmod32(units, groups)
        streamed = tail + groups if tail and waves else tail
        q, r = divmod32(streamed * ktiles, groups)
        return (units - streamed) * cluster, q, r
    split_of = device(split_of)
    start_of = device(lambda c, q, r: c * q + min(c, r))

    def stream_part(tiles, ktiles):
        whole, q, r = split_of(tiles, ktiles)
        c = cuda.blockIdx.x // cluster
        return whole, start_of(c, q, r), start_of(c + 1, q, r)

    def run_of(it, it1, whole, ktiles):
        u, kb = divmod32(it, ktiles)
        return whole + u * cluster + cuda.blockIdx.x % cluster, kb, min(ktiles, kb + it1 - it)

    def publish(acc, C, slot, ct, cw, lane):
        W, _, flags = C
        save(acc, W, slot, ct)
        cuda.threadfence()                  # each lane's sums, then the warp's flag
        cuda.syncwarp()
        if lane == 0:
            cuda.atomic.exch(flags, slot * warps + cw, 1)

    def gather(acc, C, zc, ct, cw, lane, done, tile_end, tiles, ktiles):
        W, _, flags = C
        _, q, r = split_of(tiles, ktiles)
        c = cuda.blockIdx.x // cluster + 1
        while done < tile_end:
            end = start_of(c + 1, q, r)
            if end > done:                  # an empty run (fewer k-tiles than clusters) publishes nothing
                slot = zc * cuda.gridDim.x + c * cluster + cuda.blockIdx.x % cluster
                if lane == 0:
                    while cuda.atomic.cas(flags, slot * warps + cw, 1, 0) != 1:
                        pass
                cuda.syncwarp()
                cuda.threadfence()
                add(acc, W, slot, ct)
            done = end
            c += 1
    return tuple(map(device, (stream_part, run_of, publish, gather)))


def rules(cfg):
    """What the warp-specialised skeleton's own features need: persistence,
    clusters and multicast, stream-K, the consumers' stagger or ping-pong, C
    staged through shared memory (and stored by TMA)."""
    err = []
    if (cfg.persistent or cfg.cluster != 1) and cfg.op != "wgmma":
        err.append("persistent and cluster apply to the warp-specialised (wgmma) kernels")
    if cfg.stream_k and (not cfg.persistent or cfg.copy != "tma" or cfg.split_k != 1):
        err.append("stream_k shares the last tiles' k-tiles among a persistent wgmma grid's CTAs "
                   "(op=wgmma, persistent, copy=tma, split_k=1)")
    if cfg.stage_c and (cfg.op != "wgmma" or cfg.widens_tile):
        err.append("stage_c: the epilogue of the TMA wgmma kernels' consumers (op=wgmma, copy=tma; the "
                   "widening kernels' consumers have no registers to spare for it)")
    if cfg.c_tma and (not cfg.stage_c or cfg.split_k > 1 or cfg.stream_k):
        err.append("c_tma: stage_c's buffers stored by TMA into C itself (stage_c; no split-K or stream-K, "
                   "whose partial sums go to a workspace)")
    elif cfg.c_tma and cfg.stages * cfg.stage_bytes % 1024:
        err.append(f"c_tma: the swizzled C buffers after {cfg.stages} stages of {cfg.stage_bytes} bytes "
                   "would not start on the swizzle's 1024-byte period")
    if cfg.stagger and (cfg.op != "wgmma" or cfg.warps_m != 8 or cfg.split_k > 1 or cfg.stream_k
                        or not 0 < cfg.stagger < cfg.stages):
        err.append(f"stagger={cfg.stagger}: a lag of the second consumer warpgroup behind the first (op=wgmma, "
                   "warps_m=8), of fewer k-tiles than the ring's stages, in tiles computed whole (no split-K "
                   "or stream-K)")
    if cfg.pingpong and (cfg.op != "wgmma" or cfg.warps_m != 8 or cfg.copy != "tma" or cfg.a_regs or cfg.swap
                         or cfg.bn > 128 or len(WGMMA_PARTS.get(cfg.bn, ())) != 1 or cfg.split_k > 1
                         or cfg.stream_k or cfg.stagger):
        err.append("pingpong: two consumer warpgroups (op=wgmma, warps_m=8), each computing whole tiles of at most "
                   f"128 columns (bn a thread's accumulators, got bn={cfg.bn}) from TMA's stages with A read there "
                   "(no a_regs, swap, split-K, stream-K or stagger)")
    if cfg.multicast == "a" and (cfg.cluster == 1 or cfg.copy != "tma" or cfg.bm % (cfg.cluster * 8)):
        err.append(f"multicast b, or a (a cluster's CTAs sharing the A tile by TMA, each 8 or more whole "
                   f"rows of it), got {cfg.multicast!r} with cluster={cfg.cluster}, bm={cfg.bm}")
    if cfg.op != "wgmma":
        return err
    if cfg.rows_b % (cfg.cluster * 8):
        err.append(f"wgmma: a cluster splits B's tile into whole boxes: {cfg.rows_b} rows among {cfg.cluster}")
    if cfg.persistent and cfg.min_blocks != 1:
        err.append("persistent: one block per SM (min_blocks=1)")
    return err


def host(p):
    """The plan's side of this skeleton's features (plans.Parts): c_tma's map
    of C, where C's rows allow one, boxes of a warp's 16 rows x 128 bytes in
    the 128-byte swizzle (the kernel finds its address where the c_aligned
    flag was); swap's operands, C^T = B A^T (the caller's B is the kernel's
    A side); stream-K's slots, a slot a CTA of every batch, and a flag a
    slot's consumer warp, zeroed once (each is set back to 0 as it is read)."""
    cfg = p.cfg
    if cfg.c_tma and p.c_aligned:
        p.c_aligned = p.add_maps([(p.bytes_of(p.C), 16, SWIZZLE_BYTES)])
    if cfg.swap:
        p.A, p.B, p.kM, p.kN = p.B, p.A, p.N, p.M
    if cfg.stream_k:
        n_acc, threads = cfg.partial_shape
        p.work = p.new(p.batch * p.tiles() * n_acc * threads, p.sums)
        p.counts = p.zeros(p.batch * p.tiles() * threads // 32, np.int32)
