"""The ring of stages in shared memory that a pipelined kernel walks, and
(sm_90) the mbarriers that say when a stage may be read or filled again.

A stage is a byte offset from the stages' base; step() moves it on, back
to 0 past the last stage. With mbarriers each stage has a "full" barrier,
which the copies of a k-tile complete (the TMA unit's or bulk copies'
bytes, or the producer threads' arrivals), and with a producer an "empty"
one, which each consumer warp reading the stage completes once it is done
with it. A stage's use u (u = g / stages of the ring's g-th use) waits on
its barriers' phase of parity u & 1: derived from g, which costs a
division where stages is not a power of two, or carried from use to use
(turn()).

Used by the TMA copy path and the widening producer (numgemm.kernel's
configs, through copy_tma), and by the W4A16 wgmma kernel (its own spec).
"""

from collections import namedtuple

from .. import primitives as P
from .regs import device, divmod32, u32


def step(sv):
    """next_stage(off): the byte offset of the stage after the one at off,
    of sv's ring (anything with .stages and .stage_bytes)."""
    stage_bytes, pipe_bytes = sv.stage_bytes, sv.stages * sv.stage_bytes

    def next_stage(off):
        nxt = u32(off + stage_bytes)        # 32 bits: Numba's sum is 64, and so would its compare be
        return nxt if nxt < u32(pipe_bytes) else u32(0)
    return device(next_stage)


@device
def turn(off, ph):
    """The parity of the use of the stage at off that follows a use of
    parity ph of the stage before it: flipped where the ring has wrapped."""
    return ph ^ u32(1) if off == u32(0) else ph


#: The ring's mbarriers (mbarriers()): device functions of the barriers' address.
Barriers = namedtuple("Barriers", "place init full wait acquire release")


def mbarriers(stages, stage_bytes, top, readers, cluster=1, full_count=1, producer=True, linkage="inline"):
    """The mbarriers of a ring of `stages` stages of stage_bytes, `top` bytes
    after the stages' base in shared memory:

    place(smem) -> (sbase, bars): the stages' base, dynamic shared memory's
    first byte raised to the 128-byte swizzle's 1024-byte period, and the
    barriers' address; init(bars), by one thread: a full barrier a stage
    that full_count arrivals (and the bytes they announce) complete, and
    with a producer an empty one that `readers` consumer warps of each of
    `cluster` CTAs complete (a cluster's producers multicast into every
    CTA's stage); full(bars, off): the full barrier of the stage at byte
    offset off (its empty one lies 8 x stages bytes after it); wait(bars,
    off, ph): until the stage's full barrier has completed its phase of
    parity ph; acquire(bars, off, ph): until its empty barrier has (ph: the
    parity of the consumers' use before the one to be filled);
    release(bars, off): this consumer warp has read the stage."""
    ptx = P.routines(linkage)
    empty_top = 8 * stages                            # the "empty" barriers, after the "full" ones

    def init(bars):
        for s in range(stages):
            ptx.mbarrier_init(bars + u32(8 * s), u32(full_count))
            if producer:
                ptx.mbarrier_init(bars + u32(empty_top + 8 * s), u32(readers * cluster))

    def full(bars, off):
        return bars + u32(8) * divmod32(off, stage_bytes)[0]
    full = device(full)
    # The empty barrier is written out as full(...) + empty_top where it is used: behind a device function
    # of its own, LLVM added the offset to the base first, and ptxas then held that sum in a register of
    # its own rather than as the instruction's address offset (docs/log.md).

    def release(bars, off):
        if cluster == 1:
            ptx.mbarrier_arrive(full(bars, off) + u32(empty_top))
        else:                           # every CTA's producer multicasts into this stage
            for c in range(cluster):
                ptx.mbarrier_arrive_cluster(full(bars, off) + u32(empty_top), u32(c))

    def place(smem):
        sbase = (smem + u32(1023)) & u32(0xFFFFFC00)
        return sbase, sbase + u32(top)

    return Barriers(device(place), device(init), full,
                    device(lambda bars, off, ph: ptx.mbarrier_wait(full(bars, off), ph)),
                    device(lambda bars, off, ph: ptx.mbarrier_wait(full(bars, off) + u32(empty_top), ph)),
                    device(release))
