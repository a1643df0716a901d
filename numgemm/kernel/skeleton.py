"""The GEMM kernel skeleton, written once, reading two seams.

A kernel computes C[z] = A[z] @ op(B[z]) for one output tile per block:

    grid.x walks the output tiles (grouped by KernelConfig.raster for L2
    reuse), grid.z the batch (split-K: batch x split_k, each block of a tile
    summing one run of k-tiles into a workspace slice, added up by
    split_k.py or, split_sum="last", by the tile's last block to finish).
    Each k-tile of A and B travels global ->
    shared through a ring of KernelConfig.stages stages by the config's copy
    routine (cp.async, TMA, or widen-on-load), and each warp runs the
    config's warp routine (mma.sync, WMMA) over its warp tile. The stages are
    byte offsets into dynamic shared memory: `read` is the one the warps
    read, `write` the one the copies fill, stages - 1 k-tiles ahead.

The phases, in order: the block's tile and the warp's place in it; the copy
routine's start and setup; the prologue (the first stages - 1 k-tiles);
the k loop (a tile's k steps, the copies of a later tile started among
them, the wait and the barrier, the ring advanced); the reduction of warps
that share a warp tile (warps_k); the store.

The kernel sees every operand as bytes: A is (batch, M, K bytes), B is
(batch, N, K bytes) or (batch, K, N bytes), with any row pitch that is a
multiple of 16 bytes. Fragment arrays are indexed only by loops with
constant trip counts, so LLVM unrolls them into registers (see regs).
"""

from numba import cuda

from .. import primitives as P
from ..tiles import SWIZZLE_BYTES
from . import ring
from .regs import ACC, device, divmod32, generated, i32, u8, u32
from .split_k import slices_sum


def kernel_function(cfg, warp_rt, copy_rt):
    """The Python function of cfg's kernel with this WarpRoutine and CopyRoutine."""
    # Shared memory and the warps see sv: cfg itself, or (unpack="tile") its s8 tiles.
    sv = cfg.shared_view
    init, frags, load_frags, compute, store = warp_rt[:5]      # (no prefetch: its epilogue loads its factors)
    start_copies, setup_copies, stage_copies, issue, land, commit, wait, all_inside, _, _, _ = copy_rt  # no producer
    tile_steps = _tile_steps(sv, warp_rt, issue)
    tile_of, warp_tiles, copiers, barrier, next_stage = (tile_order(cfg), _warp_tiles(cfg), _copiers(cfg),
                                                         _barrier(cfg), ring.step(sv))
    bm, bn, bkb, stages, stage_bytes = cfg.bm, cfg.bn, cfg.bk_bytes, cfg.stages, sv.stage_bytes
    warps_n, warps_k, warps_mn = cfg.warps_n, cfg.warps_k, cfg.warps_m * cfg.warps_n
    k_stagger, spread, double, interior = cfg.k_stagger, cfg.copy_parts > 1, cfg.reg_buffers == 2, cfg.interior
    k_part, split, stage_of = split_k_part(cfg), cfg.split_k, _stage_of(cfg, stage_copies)
    finish = _finish(cfg, sv, store)

    def gemm_kernel(A, B, C, M, N, K, KB, NB, c_aligned, tmaps):
        """K: rows of B when it is K x N (k units), else unused; KB: bytes of K
        in a row of A; NB: bytes in a row of a K x N B; tmaps: copy="tma", the
        global address of A's tensor map, B's 128 bytes after it."""
        # -- the block's output tile, this warp's place in it
        tid = cuda.threadIdx.x
        warp, lane = tid >> 5, tid & 31
        wmn, wk = (warp % warps_mn, warp // warps_mn) if warps_k > 1 else (warp, 0)
        wr, wc = wmn // warps_n, wmn % warps_n
        tiles_m, tiles_n = (M + bm - 1) // bm, (N + bn - 1) // bn
        tm, tn = tile_of(cuda.blockIdx.x, tiles_m, tiles_n)
        z = zc = cuda.blockIdx.z            # A's and B's batch; C's (split-K: the workspace's slice)
        if split > 1:
            z = zc // split
        zb = z if B.shape[0] > 1 else 0
        m0, n0 = i32(tm * bm), i32(tn * bn)
        dims = (M, N, K, KB, NB)

        # -- the copy routine's start and this thread's part of its copies
        sbase, ctx = start_copies(P.shared_addr(cuda.shared.array(0, u8), 0), tmaps, tid)
        a_row0, b_row0, copier, tile_off, a_warp, b_warp = copiers(m0, n0, wr, wc, warp, lane, tid)
        cs = setup_copies(ctx, sbase, A, B, z, zb, a_row0, b_row0, copier, tile_off, dims)
        ktiles, k0 = (KB + bkb - 1) // bkb, 0
        if split > 1:                       # split-K: the run of k-tiles summed here
            k0, ktiles = k_part(zc, ktiles)
        k_first = divmod32(cuda.blockIdx.x * k_stagger, ktiles)[1] if k_stagger else 0
        acc = init()

        def stage(step, off, inside):
            return stage_of(cs, step + k_first, off, inside, k0, ktiles)

        # -- the prologue: the first stages - 1 k-tiles
        for s in range(stages - 1):
            if s < ktiles:
                issue(stage(s, s * stage_bytes, False), -1)
                land(cs, s * stage_bytes)
            commit()
        wait(cs, 0, 0, ktiles)              # tile 0 has landed (this thread's copies)
        barrier()                           # ... everyone's

        fa, fb = frags()
        if double:
            a_tile, b_tile = warp_tiles(sbase, 0, tile_off, a_warp, b_warp)
            load_frags(fa, fb, 0, a_tile, b_tile, wk, lane)

        def k_loop(inside):
            """The k loop; inside: a constant (two copies of the loop)."""
            read, write = 0, (stages - 1) * stage_bytes       # byte offsets of two stages
            for kt in range(ktiles):
                more = kt + stages - 1 < ktiles     # a k-tile left to copy, into the stage tile kt-1 left
                st = stage(kt + stages - 1, write, inside)
                if not spread:                  # all the copies, then the mmas
                    if more:
                        issue(st, -1)
                    commit()
                a_tile, b_tile = warp_tiles(sbase, read, tile_off, a_warp, b_warp)
                tile_steps(acc, fa, fb, a_tile, b_tile, lane, wk, st, more)
                if spread:                      # the tile's steps started the copies
                    commit()
                if more:                        # registers -> shared, behind this tile's mmas
                    land(cs, write)
                wait(cs, kt + 1, next_stage(read), ktiles)   # tile kt+1 has landed
                barrier()                       # ... everyone's, and stage kt is read
                read, write = next_stage(read), next_stage(write)
                if double:                      # the next tile's first fragments, then this one's last mmas
                    if kt + 1 < ktiles:
                        a_tile, b_tile = warp_tiles(sbase, read, tile_off, a_warp, b_warp)
                        load_frags(fa, fb, 0, a_tile, b_tile, wk, lane)
                    compute(acc, fa, fb, 1)

        # -- the k loop: blocks whose copies are all in bounds run one without
        # their checks (interior_loop: ~3 instructions a copy)
        if interior and all_inside(m0, n0, dims):
            k_loop(True)
        else:
            k_loop(False)

        finish(acc, C, z, zc, m0, n0, wr, wc, wk, wmn, lane, M, N, tid, c_aligned)

    gemm_kernel.__name__ = cfg.name
    return gemm_kernel


def _finish(cfg, sv, store):
    """finish(acc, C, z, zc, m0, n0, wr, wc, wk, wmn, lane, M, N, tid,
    c_aligned): the block's end, after its k loop: the sums of warps that
    share a warp tile meet (warps_k), and warp k 0 stores them, into C or,
    split_sum="last", into the workspace (C is then the workspace, C and the
    arrival counts), whose slices the tile's last block adds into C."""
    k_reduce = _k_reduce(sv) if cfg.warps_k > 1 else None
    last, sum_last = cfg.split_sum == "last", _sum_last(cfg)
    wm, wn = cfg.warp_tile
    warps_k = cfg.warps_k

    def finish(acc, C, z, zc, m0, n0, wr, wc, wk, wmn, lane, M, N, tid, c_aligned):
        if warps_k > 1:
            k_reduce(acc, wk, wmn, lane)
        if last:
            W, Cout, counts = C
            if wk == 0:
                store(acc, W, zc, m0, n0, wr * wm, wc * wn, M, N, tid, c_aligned)
            sum_last(W, Cout, counts, z, m0, n0, M, N, tid)
        elif wk == 0:
            store(acc, C, zc, m0, n0, wr * wm, wc * wn, M, N, tid, c_aligned)
    return device(finish)


def _sum_last(cfg):
    """sum_last(W, C, counts, z, m0, n0, M, N, tid), split_sum="last": after
    every thread's part of the block's slice is stored (and fenced), one
    thread counts the tile's arrivals; the block that arrives last adds the
    split_k slices of its tile into C as the second kernel adds them
    (split_k.slices_sum), and sets the count back to 0 for the next launch."""
    split, bm, bn, threads = cfg.split_k, cfg.bm, cfg.bn, cfg.threads

    def sum_last(W, C, counts, z, m0, n0, M, N, tid):
        cuda.threadfence()
        cuda.syncthreads()
        is_last = cuda.shared.array(1, i32)
        t = z * cuda.gridDim.x + cuda.blockIdx.x
        if tid == 0:
            is_last[0] = i32(cuda.atomic.add(counts, t, 1) == split - 1)
        cuda.syncthreads()
        if is_last[0]:
            cuda.threadfence()
            for i in range(tid, bm * bn, threads):
                r, c = divmod32(i, bn)
                row, col = m0 + r, n0 + c
                if row < M and col < N:
                    C[z, row, col] = slices_sum(W, z, split, row, col)
            if tid == 0:
                counts[t] = 0
    return device(sum_last)


def _stage_of(cfg, stage_copies):
    """stage_of(cs, kt, off, inside, k0, ktiles): the copies of the loop's
    k-tile kt (k_stagger: rotated by the block's first; split-K: from the
    run's first, k0) into the stage at byte offset off."""
    k_stagger, split = cfg.k_stagger, cfg.split_k

    def stage_of(cs, kt, off, inside, k0, ktiles):
        if k_stagger and kt >= ktiles:
            kt -= ktiles
        if split > 1:
            kt += k0
        return stage_copies(cs, kt, off, inside)
    return device(stage_of)


def split_k_part(cfg):
    """k_part(zc, ktiles) -> (k0, count) of a split-K kernel: the k-tiles the
    block of grid.z index zc sums, the zc % split_k-th of split_k equal runs
    (the last shorter or empty), k0 its first."""
    split = cfg.split_k

    def k_part(zc, ktiles):
        run = (ktiles + split - 1) // split
        k0 = (zc % split) * run
        return k0, max(0, min(run, ktiles - k0))
    return device(k_part)


def _copiers(cfg):
    """copiers(m0, n0, wr, wc, warp, lane, tid) -> (row_a, row_b, copier,
    tile_off, a_warp, b_warp): the first row of A and column of B that this
    thread's shared tiles cover, its index among the threads that copy them,
    the byte offset of its tiles in a stage, and its warp's first row and
    column in them. private_tiles: each warp stages its own A rows and B
    columns, copied by its own lanes; else the block shares one tile of each."""
    tile_ab = cfg.shared_view.tile_bytes_a + cfg.shared_view.tile_bytes_b
    wm, wn = cfg.warp_tile
    if cfg.private_tiles:
        def copiers(m0, n0, wr, wc, warp, lane, tid):
            return m0 + wr * wm, n0 + wc * wn, lane, warp * tile_ab, 0, 0
    else:
        def copiers(m0, n0, wr, wc, warp, lane, tid):
            return m0, n0, tid, 0, wr * wm, wc * wn
    return device(copiers)


def _barrier(cfg):
    """The barrier after which a stage's copies are everyone's: the warp's
    (private tiles) or the block's."""
    if cfg.private_tiles:
        return device(lambda: cuda.syncwarp())
    return device(lambda: cuda.syncthreads())


def tile_order(cfg):
    """tile_of(pid, tiles_m, tiles_n): the output tile (row, column) of block
    pid; groups of `raster` tile rows share their B tiles in L2 while they run."""
    raster = cfg.raster

    def tile_of(pid, tiles_m, tiles_n):
        if raster == 1:
            return divmod32(pid, tiles_n)
        group, local = divmod32(pid, tiles_n * raster)
        first = group * raster
        size = min(tiles_m - first, raster)
        col, row = divmod32(local, size)
        return first + row, col
    return device(tile_of)


def _warp_tiles(cfg):
    """warp_tiles(sbase, read, tile_off, a_warp, b_warp): the shared addresses
    of this warp's first A row and first B row (K x N: column) in the stage at
    byte offset `read`."""
    sv = cfg.shared_view
    tile_a, pitch_a, pitch_b = sv.tile_bytes_a, sv.pitch_a, sv.pitch_b
    b_esize, b_box_bytes = 2, cfg.b_tile_shape[0] * SWIZZLE_BYTES     # K x N B: 16-bit units
    # Each sum is written out whole: handing a partial sum (sbase + read) to
    # the function changes what NVVM makes of the addresses.
    if cfg.b_layout == "kn" and sv.swizzle:     # the warp's columns are one box of the K x N tile
        def warp_tiles(sbase, read, tile_off, a_warp, b_warp):
            return (sbase + read + tile_off + a_warp * pitch_a,
                    sbase + read + tile_a + b_warp * b_esize // SWIZZLE_BYTES * b_box_bytes)
    elif cfg.b_layout == "kn":
        def warp_tiles(sbase, read, tile_off, a_warp, b_warp):
            return sbase + read + tile_off + a_warp * pitch_a, sbase + read + tile_off + tile_a + b_warp * b_esize
    else:
        def warp_tiles(sbase, read, tile_off, a_warp, b_warp):
            return sbase + read + tile_off + a_warp * pitch_a, sbase + read + tile_off + tile_a + b_warp * pitch_b
    return device(warp_tiles)


def _tile_steps(cfg, warp, copy_part):
    """tile_steps(acc, fa, fb, a_tile, b_tile, lane, wk, st, more): this warp's
    k steps of one k-tile, written out (LLVM leaves a loop of 4 steps rolled):
    steps wk, wk + warps_k, ... With two fragment buffers each step loads the
    next step's fragments before its own mmas, and the last step's mmas are
    the skeleton's: it issues them after the barrier that ends the tile,
    behind the next tile's first loads.

    With copy_parts > 1, where `more`, the first copy_parts steps each start
    one part of a later k-tile's copies (st: the copy routine's stage), so
    that no stretch of address math and copies holds back every warp's mmas
    at once; with 1 the skeleton starts them all ahead of the steps."""
    wk_, n = cfg.warps_k, cfg.warp_ksteps
    kk = (lambda s: f"{s * wk_} + wk") if wk_ > 1 else str    # k step of this warp's s-th
    if cfg.reg_buffers == 2:
        steps = [(s + 1, (s + 1) % 2, s % 2) for s in range(n - 1)]
    else:
        steps = [(s, 0, 0) for s in range(n)]
    lines = []
    for slot, (s, into, buf) in enumerate(steps):
        if slot < cfg.copy_parts and cfg.copy_parts > 1:
            lines += ["if more:", f"    copy_part(st, {slot})"]
        lines += [f"load(fa, fb, {into}, a_tile, b_tile, {kk(s)}, lane)", f"compute(acc, fa, fb, {buf})"]
    return generated("tile_steps", "acc, fa, fb, a_tile, b_tile, lane, wk, st, more", lines,
                     {"load": warp.load, "compute": warp.compute, "copy_part": copy_part})


def _k_reduce(cfg):
    """reduce(acc, wk, wmn, lane): warps 1..warps_k-1 of a warp tile put their
    sums in shared memory (the pipeline's, free by now), warp 0 adds them.
    Written out: loops over the accumulators would leave them in local memory."""
    n_acc = cfg.warp_tile[0] * cfg.warp_tile[1] // 32          # per thread (f32/s32)
    slots = cfg.warps_m * cfg.warps_n * n_acc * 32            # one warp_k's accumulators
    lines = ["red = cuda.shared.array(0, acc_t)",
             "if wk > 0:",
             f"    base = (wk - 1) * {slots} + wmn * {n_acc * 32} + lane"]
    lines += [f"    red[base + {e * 32}] = acc[{e}]" for e in range(n_acc)]
    lines += ["cuda.syncthreads()", "if wk == 0:"]
    for q in range(cfg.warps_k - 1):
        lines += [f"    base = {q * slots} + wmn * {n_acc * 32} + lane"]
        lines += [f"    acc[{e}] += red[base + {e * 32}]" for e in range(n_acc)]
    return generated("reduce", "acc, wk, wmn, lane", lines, {"cuda": cuda, "acc_t": ACC[cfg.acc]})


def rules(cfg):
    """warps_k > 1: the warps' f32/s32 mma sums meet in shared memory, of
    shared tiles."""
    if cfg.warp_ksteps and cfg.warps_k > 1 and (cfg.op != "mma" or cfg.acc == "f16" or cfg.private_tiles):
        return ["warps_k > 1 sums f32/s32 mma accumulators of shared tiles"]
    return []
