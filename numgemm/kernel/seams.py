"""The skeleton's two seams: what it calls of a warp routine and of a copy routine.

A kernel is a skeleton (numgemm.kernel.skeleton; op="wgmma": the
warp-specialised skeleton_ws) with one warp routine and one copy routine,
each chosen once from the config (numgemm.kernel's tables). Adding a path is adding a file that builds one of these tuples and
a line in a table; the skeleton does not change. Every member is a device
function that NVVM inlines (numgemm.kernel.regs.device).
"""

from typing import NamedTuple


class WarpRoutine(NamedTuple):
    """The warp-level routine: fragments from shared memory, the warp tile's
    operations, the epilogue.

    init() -> acc: zeroed accumulators;  frags() -> (fa, fb): fragment registers,
    cfg.reg_buffers sets;  load(fa, fb, buf, a_tile, b_tile, kk, lane): k step kk's
    fragments from shared memory into set buf;  compute(acc, fa, fb, buf): the
    warp tile's operations on set buf;  store(acc, C, z, m0, n0, wr0, wc0, M, N,
    tid, c_aligned): the epilogue. buf and kk are constants where the skeleton
    calls them, so every fragment index folds and the arrays stay in registers.

    wgmma reads its operands from shared memory through descriptors: it has no
    fragments (frags and load are None), and compute(acc, a_tile, b_tile)
    issues a whole k-tile's wgmmas from the warpgroup's tiles as one commit
    group.

    prefetch(C, m0, n0, wr0, M, N, tid), where not None: what the store will
    read besides the accumulators, started as the warp's tile starts (the
    epilogue's staged factors, epilogue.prefetch)."""
    init: object
    frags: object
    load: object
    compute: object
    store: object
    prefetch: object = None


class CopyRoutine(NamedTuple):
    """The global -> shared copy routine: how a k-tile of A and B reaches a
    stage of the ring, and how the warps learn it has.

    start(smem, tmaps, tid) -> (sbase, ctx): the stages' shared base address and
    what the path keeps for the whole block (an L2 policy, the mbarriers), after
    whatever must precede the first copy;  setup(ctx, sbase, A, B, z, zb, row_a,
    row_b, copier, tile_off, M, N, K, NB) -> state: this thread's part of every
    copy, computed once (row_a / row_b: the first row of A / column of B that
    the thread's tiles cover);  stage(state, kt, off, inside) -> st: what copying
    k-tile kt into the stage at byte offset off takes (inside: a constant, True
    where no copy needs a bounds check);  issue(st, part): start part `part` of
    those copies (-1: all of them);  land(state, off): finish what issue started
    (registers -> shared memory, where the path stages there);  commit(): close
    the stage's group of copies;  wait(state, kt, off, ktiles): k-tile kt, in the
    stage at off, has landed (for this thread; the barrier after makes it
    everyone's);  inside(m0, n0, M, N, K, KB, NB) -> whether every copy of the
    block falls inside A and B (interior_loop: the block then runs a k loop
    without the checks).

    A producer/consumer ring (the warp-specialised skeleton) also has
    acquire(state, kt, off): the issuing thread waits until the stage at off
    is free for k-tile kt (its consumers released k-tile kt - stages), and
    release(state, off): one lane of each consumer warp says it has read the
    stage at off; and fill(ctx, sbase, A, B, z, zb, m0, n0, tid, dims, g, off,
    k0, kb, ke) -> (g, off): the producer's k loop over one output tile,
    k-tiles kb .. ke - 1 (k0 + kt of A and B) into the ring from its g-th use
    at offset off, each stage once it is free (TMA: one thread issues each
    stage's boxes; widening: all of the producer's threads load, widen and
    store). The paths without a producer leave them None."""
    start: object
    setup: object
    stage: object
    issue: object
    land: object
    commit: object
    wait: object
    inside: object
    acquire: object = None
    release: object = None
    fill: object = None
