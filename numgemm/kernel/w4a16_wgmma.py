"""W4A16 on wgmma (sm_90a): INT4 weights widened in registers as wgmma's A.

Past a few dozen tokens W4A16 is a GEMM, not a read of the weight, and
mma.sync tops out near 500 TFLOPS on Hopper (docs/findings.md, W4A16).
This kernel computes C^T = W X^T with wgmma m64nNk16, the weight's rows as
the instruction's M (Machete's plan): each consumer thread takes its A
registers of a group (128 k) from two 16-byte pieces in numgemm.quant's
wgmma layout (PackedW4.wgmma_words: a word is one row's eight k of two k16
steps), widens them with ptx_asm/dequant_u4.ptx's _scaled routine into
(u - z) * s, rounded once to the activations' format, and issues wgmma with
A from registers. The activations (X's rows: the instruction's N) are B,
read through a K-major descriptor from the 128-byte swizzle. Unlike the
mma.sync kernel (numgemm/kernel/w4a16.py), whose f32 sums are scaled a
group at a time, the scale rounds each weight: the accumulators span every
group.

Everything a k-tile reads comes through one ring of stages: the
activations' k-tile (64 k, 128 bytes a row), and with each even k-tile its
group's weights (each thread's own two pieces), scales and zero points, so
that the k-tiles in flight hide the weights' latency too (loaded a group
ahead into registers they were not: at 64 rows a k-tile's wgmmas take less
time than a load from memory). Every thread widens and issues; a block is
`wgs` warpgroups of 64 weight rows over `bn` activation rows, and a k-tile
ends with wgmma.wait_group 1. Two ways to fill a stage (`copy`):

    "cp.async": every thread copies 16-byte pieces, stages - 2 k-tiles
    ahead; a k-tile starts once each thread's copies have landed and been
    fenced into wgmma's proxy (fence.proxy.async, whose MEMBAR waits for
    the copies the thread issued since) and the block has met, which also
    frees the stage read two k-tiles before;

    "tma": one thread of a producer warp fills each stage, as many k-tiles
    ahead as there are stages: a TMA box of the activations (rows past M
    zero-filled) and the group's weight blocks, scales and zero points as
    1-D bulk copies, all in the async proxy and counted on the stage's
    "full" mbarrier, which each consumer thread waits on; after its wgmma
    wait for a k-tile, each consumer warp releases the stage of the k-tile
    before on its "empty" mbarrier, which the producer waits on before it
    fills the stage again. No block-wide barrier stands in the k loop.

C^T leaves through shared memory, staged as C's rows in
f32 and rounded to C's format only after the barrier, on its way to C, 16
bytes a store: rounded before, as the accumulators themselves, the H100
image's ptxas scheduled the conversions above the wgmma wait (findings.md).
"""

import functools
from dataclasses import dataclass

from numba import cuda, types

from .. import primitives as P
from ..precision import NARROW, PRECISIONS, W4A16_ACTIVATIONS
from ..quant import GROUP
from . import ring
from .regs import OUT, device, generated, i32, u8, u32, u64

#: activation rows a tile (the wgmma's N) with a routine in ptx_asm/wgmma.ptx's _rs forms
BNS = (64, 128, 256)
#: how a stage is filled: "cp.async", 16 bytes a thread, each thread waiting for its own copies and
#: making them visible to wgmma's proxy (fence.proxy.async) before the block meets; "tma", one thread
#: issuing the activations' box (a tensor map) and the group's weights, scales and zero points as bulk
#: copies, all in the async proxy, every thread waiting on the stage's mbarrier
COPIES = ("cp.async", "tma")
_ROW = 128                  # bytes of a stage's row: 64 k of f16 or bf16, the 128-byte swizzle
_SBO = 8 * _ROW             # the swizzle's 8-row period


@dataclass(frozen=True)
class W4A16Wgmma:
    """A wgmma W4A16 kernel, as numgemm's kernel cache keys it (describe());
    its name derives from its fields."""

    act: str = "fp16"           # activations and the widened weights: fp16 | bf16
    out: str = "f16"            # C: f16 | bf16 (the activations' own) | f32
    zeros: bool = False         # zero points per group and row (else signed weights: z = 8)
    bn: int = 128               # activation rows a tile: the wgmma's N
    wgs: int = 2                # consumer warpgroups, 64 weight rows (C columns) each
    stages: int = 6             # k-tiles in shared memory (stages - 2 in flight; tma: all of them)
    groups: int = 2             # wgmma commit groups a k-tile: 2 (its two pairs of k16 steps) or 1
    copy: str = "cp.async"      # how a stage is filled: cp.async by every thread, or "tma" by one

    min_blocks = 1
    arch_specific = True        # wgmma: sm_90a; ptxas's serialised wgmmas are refused

    def __post_init__(self):
        if self.act not in W4A16_ACTIVATIONS or self.out not in ("f32", *NARROW):
            raise ValueError(f"W4A16 wgmma: act one of {', '.join(W4A16_ACTIVATIONS)}, out f32 or one of "
                             f"{', '.join(NARROW)}; got act={self.act!r}, out={self.out!r}")
        if self.bn not in BNS or self.wgs not in (1, 2) or not 4 <= self.stages <= 8:
            raise ValueError(f"W4A16 wgmma: bn one of {BNS}, wgs 1 or 2, stages 4..8 (cp.async.wait_group "
                             f"1..6); got bn={self.bn}, wgs={self.wgs}, stages={self.stages}")
        if self.groups not in (1, 2) or (self.groups == 1 and self.bn == 256):
            raise ValueError(f"W4A16 wgmma: groups 1 or 2 commit groups a k-tile, 2 at bn 256 (a k-tile's 16 A "
                             f"registers beside 128 accumulators spill); got groups={self.groups}, bn={self.bn}")
        if self.copy not in COPIES:
            raise ValueError(f"W4A16 wgmma: copy one of {', '.join(COPIES)}, got {self.copy!r}")
        if (self.bn * 8) % self.consumers:
            raise ValueError(f"W4A16 wgmma: a stage's {self.bn * 8} pieces of 16 bytes must split evenly over "
                             f"{self.consumers} threads")
        if self.dynamic_bytes > 227 * 1024:
            raise ValueError(f"W4A16 wgmma: {self.dynamic_bytes} bytes of shared memory, more than the 227 KiB "
                             "a block may have (fewer stages or a smaller bn)")

    @property
    def consumers(self):
        """The threads that widen and issue: `wgs` warpgroups."""
        return 128 * self.wgs

    @property
    def threads(self):
        """A block's: the consumers, and with tma a producer warp that fills the stages."""
        return self.consumers + (32 if self.copy == "tma" else 0)

    @property
    def cols(self):
        """C's columns a block computes (the weight's rows)."""
        return 64 * self.wgs

    @property
    def act_bytes(self):
        """A stage's activations: bn rows of 128 bytes."""
        return self.bn * _ROW

    @property
    def group_bytes(self):
        """A group's weights (16 bytes a piece, two a thread), scales (2 bytes
        a row) and zero points (1), as an even k-tile's stage holds them."""
        return self.consumers * 32 + self.cols * 2 + (self.cols if self.zeros else 0)

    @property
    def stage_bytes(self):
        """Activations, then a group's weights, scales and zeros; a multiple
        of 1024, the swizzle's alignment."""
        return self.act_bytes + -(-self.group_bytes // 1024) * 1024

    @property
    def c_pitch(self):
        """Bytes of a staged row of C, in f32 whatever C's format: its columns
        and 16 bytes more, so that lanes writing 2t rows apart fall in
        different banks."""
        return self.cols * 4 + 16

    @property
    def c_size(self):
        return 4 if self.out == "f32" else 2

    @property
    def bars_at(self):
        """Where the stages' mbarriers lie (copy="tma"), past the stages and C's staging."""
        return max(self.stages * self.stage_bytes, self.bn * self.c_pitch)

    @property
    def dynamic_bytes(self):
        """The stages (C's staging reuses them), their mbarriers (tma), and
        1024 to align their base."""
        return self.bars_at + (16 * self.stages if self.copy == "tma" else 0) + 1024

    @property
    def name(self):
        return (f"w4a16_{self.act}_wgmma_{self.cols}x{self.bn}x{GROUP}_s{self.stages}"
                f"{'_zp' if self.zeros else ''}{'_g1' if self.groups == 1 else ''}"
                f"{'_tma' if self.copy == 'tma' else ''}_c{self.out}")

    def describe(self):
        return {"kernel": self.name, "act": self.act, "out": self.out, "zeros": self.zeros, "bn": self.bn,
                "wgs": self.wgs, "stages": self.stages, "groups": self.groups, "copy": self.copy}

    def argtypes(self):
        """A (M, K/2) uint32: rows 16-byte aligned, any row stride; the
        weight's words (N/16, K/128, 2, 32, 4) (PackedW4.wgmma_words), scales
        (K/128, N) uint16 and zeros (K/128, N) uint8 (1 x 1 where there are
        none); C (M, N) in out's format, rows 16-byte aligned; M, N, K; the
        address of A's tensor map (tma: boxes of bn rows x 128 bytes in the
        128-byte swizzle, A as (1, M, 2K) bytes; else 0)."""
        return (types.Array(u32, 2, "A"), types.Array(u32, 5, "C"), types.Array(types.uint16, 2, "C"),
                types.Array(u8, 2, "C"), types.Array(OUT[self.out], 2, "A"), i32, i32, i32, u64)

    def function(self):
        return _kernel(self)

    def grid(self, M, N):
        """The activation tiles side by side (x), so that the blocks reading
        one block of weights run together; then the weights' blocks (y)."""
        return -(-M // self.bn), -(-N // self.cols), 1


def choose(M, N, act="fp16", out="f16", zeros=False):
    """The tile for M activation rows: bn the smallest that holds them up to
    128 (past it, tiles of 128 rows); two warpgroups a block where the blocks
    still fill a GPU of 132 SMs, else one (more blocks, each reading all of its
    activations); a k-tile one commit group; the deepest ring that fits, up to
    6 stages at 128 rows, where 7 and 8 were slower (docs/findings.md)."""
    bn = next((b for b in BNS[:2] if M <= b), 128)
    wgs = 2 if -(-M // bn) * -(-N // 128) >= 120 else 1
    stage = W4A16Wgmma(act, out, zeros, bn, wgs, 4).stage_bytes
    stages = next(s for s in range(6 if bn == 128 else 8, 3, -1) if s * stage + 1024 <= 227 * 1024)
    return W4A16Wgmma(act, out, zeros, bn, wgs, stages, groups=1)


def _terms(act):
    """terms(z, s): the widening routine's zero terms and scale of a row, for
    z its zero point and s its scale's 16 bits, in both halves of a word."""
    if PRECISIONS[act].narrow == "f16":
        # 1024 + z in f16 is 0x6400 | z; -(64 + z) is 0xD400 + 16 z (z < 16)
        return device(lambda z, s: (u32(0x64006400) | (z * u32(0x10001)),
                                    u32(0xD400D400) + ((z << 4) * u32(0x10001)), s * u32(0x10001)))
    # -(128 + z) in bf16 is 0xC300 | z (z < 16)
    return device(lambda z, s: (u32(0xC300C300) | (z * u32(0x10001)), u32(0), s * u32(0x10001)))


@functools.cache
def _kernel(spec):
    ptx = P.routines("inline")
    bn, S, threads, cols, zeros = spec.bn, spec.stages, spec.consumers, spec.cols, spec.zeros
    stage_bytes, act_bytes, pieces = spec.stage_bytes, spec.act_bytes, spec.bn * 8 // threads
    s_at, z_at = act_bytes + threads * 32, act_bytes + threads * 32 + cols * 2     # a stage's scales, zeros
    wait_landed = getattr(ptx, f"cp_async_wait_{S - 3}")        # k-tile kt of the S - 2 in flight
    cp_async, cp_async_4, commit = ptx.cp_async_cg, ptx.cp_async_ca_4, ptx.cp_async_commit
    ld_shared = ptx.ld_shared_v4_b32
    terms = _terms(spec.act)
    ktile0, ktile1 = (_ktile(spec, ptx, half) for half in (0, 1))
    store = _store(spec, ptx)
    n_acc = bn // 2

    n_src = pieces + 3                           # sources(): the activations' pieces, weights, scales, zeros
    rows_apart = threads // 8                    # rows between a thread's pieces of a stage (a multiple of 8)

    @device
    def sources(A, Q, S16, Z, src, m0, n0, M, N, KT, tid):
        """src: thread tid's .global addresses of k-tile 0, once: its pieces'
        activation rows (clamped into M: rows past it are zero-filled), its
        two pieces of weights (its warp's rows, its lane's words), the scales
        and zero points of its 8 (4) rows (clamped into N: rows past it are
        never stored). load_stage adds k-tile kt's (its group's) offset, so
        that a k-tile's copies cost an add an address, not their address
        arithmetic again: every thread also widens and issues, and the k
        loop is bound by what it issues (docs/findings.md, W4A16)."""
        abase, astride, ch = P.global_addr(A, 0), A.strides[0], tid & 7
        for i in range(pieces):
            r = (tid >> 3) + i * rows_apart
            src[i] = abase + u64(min(m0 + r, M - 1)) * u64(astride) + u64(ch * 16)
        blk = (n0 >> 4) + (tid >> 5)
        src[pieces] = P.global_addr(Q, 0) + u64(((blk * (KT >> 1)) * 2 * 32 + (tid & 31)) * 16)
        src[pieces + 1] = P.global_addr(S16, min(n0 + (tid & (cols // 8 - 1)) * 8, N - 8))
        src[pieces + 2] = P.global_addr(Z, min(n0 + (tid & (cols // 4 - 1)) * 4, N - 4)) if zeros else u64(0)

    @device
    def load_stage(stage, Q, src, n0, N, kt, KT, tid, m_left, dst):
        """k-tile kt of the block's activation rows into `stage` (zeros past
        M: m_left is M - m0 - the thread's first row), and where kt is even its
        group's weights, scales and zero points; a commit group each call,
        empty past K, so that the counts hold."""
        if kt < KT:
            grp, at = u64(kt >> 1), u64(kt) * u64(_ROW)
            for i in range(pieces):
                cp_async(stage + dst + u32(i * rows_apart * _ROW), src[i] + at, i * rows_apart < m_left)
            if (kt & 1) == 0:
                live = (n0 >> 4) + (tid >> 5) < Q.shape[0]
                for h in range(2):
                    cp_async(stage + u32(act_bytes + (2 * tid + h) * 16), src[pieces] + grp * u64(1024) + u64(h * 512),
                             live)
                if tid < cols // 8:                             # 8 rows' scales a piece
                    cp_async(stage + u32(s_at + tid * 16), src[pieces + 1] + grp * u64(2 * N), True)
                if zeros and tid < cols // 4:                   # 4 rows' zero points a piece
                    cp_async_4(stage + u32(z_at + tid * 4), src[pieces + 2] + grp * u64(N))
        commit()

    @device
    def ready():
        """cp.async: once every thread's copies into the oldest stage in
        flight have landed and every warpgroup has waited for its wgmmas of
        the k-tile two before it (so that the stage they read is free for
        the next)."""
        wait_landed()
        P.fence_proxy_async()                      # cp.async's writes, seen by wgmma's proxy
        cuda.syncthreads()

    # tma: a full mbarrier a stage that the producer's bytes complete, an empty one that its consumer warps do
    tma, wblocks = spec.copy == "tma", spec.wgs * 4
    rg = ring.mbarriers(S, stage_bytes, spec.bars_at, threads // 32)

    @device
    def tma_sources(Q, S16, Z, n0, N, KT):
        """tma: the block's .global addresses of group 0's weights (its first
        16-row block's), scales and zero points, and the bytes an even
        k-tile's stage receives: the activations' box, the weight blocks
        inside the weight, the scales and zero points of the columns inside N."""
        q = P.global_addr(Q, 0) + u64((n0 >> 4) * (KT >> 1)) * u64(1024)
        live = min(wblocks, Q.shape[0] - (n0 >> 4))
        inside = min(cols, N - n0)
        group = act_bytes + live * 1024 + inside * 2 + (inside if zeros else 0)
        return q, P.global_addr(S16, n0), P.global_addr(Z, n0) if zeros else u64(0), live, inside, u32(group)

    @device
    def tma_issue(stage, bar, tmap, srcs, m0, N, kt, KT):
        """tma, by the producer: k-tile kt's box of activations into `stage`
        (rows past M zero-filled by TMA), and where kt is even its group's
        weight blocks, scales and zero points, as bulk copies; each counted
        on the stage's full mbarrier."""
        q, sc, zp, live, inside, group = srcs
        even = (kt & 1) == 0
        ptx.mbarrier_arrive_expect_tx(bar, group if even else u32(act_bytes))
        ptx.tma_load_3d(stage, tmap, (u32(kt * _ROW), u32(m0), u32(0)), bar)
        if even:
            grp = u64(kt >> 1)
            for j in range(wblocks):            # block j's group: 1024 bytes, KT / 2 groups apart
                if j < live:
                    ptx.bulk_load(stage + u32(act_bytes + j * 1024),
                                  q + (u64(j) * u64(KT >> 1) + grp) * u64(1024), u32(1024), bar)
            ptx.bulk_load(stage + u32(s_at), sc + grp * u64(2 * N), u32(2 * inside), bar)
            if zeros:
                ptx.bulk_load(stage + u32(z_at), zp + grp * u64(N), u32(inside), bar)

    # The ring's offsets move on a stage a k-tile: carried, not (kt % S) again, which Numba's 64-bit signed
    # arithmetic makes a dozen instructions; with them (tma) the parity of the stage's use.
    step, turn = ring.step(spec), ring.turn

    @device
    def row_terms(stage, raw, r):
        """(zl, zh, s) of the block's weight row r, from its group's stage."""
        s = cuda.shared.array(0, types.uint16)[(stage - raw + u32(s_at)) // u32(2) + u32(r)]
        z = u32(cuda.shared.array(0, u8)[stage - raw + u32(z_at) + u32(r)]) if zeros else u32(8)
        return terms(z, u32(s))

    @device
    def produce(base, bars, tmap, srcs, m0, N, KT):
        """tma, by the producer warp's first thread: every k-tile in turn
        into the ring, a stage once its consumer warps have released the
        use before (the stage's empty mbarrier)."""
        ptx.tensormap_acquire(tmap)
        kt, wr, ph = i32(0), u32(0), u32(0)     # ph: the parity of this use of the stage
        while kt < KT:
            if kt >= S:
                rg.acquire(bars, wr, ph ^ u32(1))
            tma_issue(base + wr, rg.full(bars, wr), tmap, srcs, m0, N, kt, KT)
            wr = step(wr)
            ph = turn(wr, ph)
            kt = i32(kt + 1)

    @device
    def landed(bars, rd, ph):
        """Until a k-tile's stage (at rd) may be read: cp.async, every
        thread's copies landed and the block met; tma, the stage's full
        mbarrier's phase of this use (ph) complete."""
        if tma:
            rg.wait(bars, rd, ph)
        else:
            ready()

    @device
    def release(bars, at, lane):
        """tma: this warp's wgmmas are done with the stage at `at`."""
        if tma and lane == 0:
            rg.release(bars, at)

    def w4a16_wgmma(A, Q, S16, Z, C, M, N, K, tmap):
        tid = cuda.threadIdx.x
        lane, warp = tid & 31, tid >> 5                   # warp: of the block; its 16 weight rows
        m0, n0 = cuda.blockIdx.x * bn, cuda.blockIdx.y * cols
        KT = K >> 6
        raw = P.shared_addr(cuda.shared.array(0, u8), 0)
        base, bars = rg.place(raw)
        src = cuda.local.array(n_src, u64)
        m_left = M - m0 - (tid >> 3)
        dst = u32((tid >> 3) * _ROW + (((tid & 7) ^ ((tid >> 3) & 7)) << 4))
        # rd, wr: the stages of k-tile kt and (cp.async) of kt + S - 2, copied once kt's wgmmas are issued into
        # the stage that kt - 2's read; ph (tma): the parity of rd's use
        kt, rd, ph = i32(0), u32(0), u32(0)
        wr = u32((S - 2) * stage_bytes)
        if tma:
            if tid == 0:
                rg.init(bars)
                ptx.mbarrier_init_fence()
            cuda.syncthreads()
            if tid >= threads:              # the producer warp; then the block's two barriers around C's staging
                if tid == threads:
                    produce(base, bars, tmap, tma_sources(Q, S16, Z, n0, N, KT), m0, N, KT)
                cuda.syncwarp()             # the warp meets the block whole (bar.sync counts warps)
                cuda.syncthreads()
                cuda.syncthreads()
                return
            mine = u32(act_bytes + 1024 * warp + 16 * lane)   # its pieces: bulk copies keep the global order
            other = u32(512)
        else:
            sources(A, Q, S16, Z, src, m0, n0, M, N, KT, tid)
            for s in range(S - 2):
                load_stage(base + u32(s * stage_bytes), Q, src, n0, N, s, KT, tid, m_left, dst)
            mine = u32(act_bytes + 32 * tid)                 # its two pieces, side by side
            other = u32(16)
        acc = cuda.local.array(n_acc, types.float32)
        for e in range(n_acc):
            acc[e] = 0
        q = cuda.local.array(8, u32)
        row = warp * 16 + (lane >> 2)
        # cp.async: each k-tile's copies are sent once its wgmmas are, so that they run while the copies
        # issue. tma: after each k-tile's wgmma wait, the stage of the k-tile before is released.
        # The loop makes one pass at least (K >= 128: weight_only._on_wgmma), so that the accumulators' zeros
        # reach the first wgmmas alone: with a path around the loop, LLVM gave that path zeros of its own,
        # and ptxas serialised every wgmma (C7515).
        last = u32(0)
        while True:
            landed(bars, rd, ph)
            stage = base + rd
            w0, w1 = ld_shared(stage + mine), ld_shared(stage + mine + other)
            for e in range(4):
                q[e] = w0[e]
                q[4 + e] = w1[e]
            t0, t1 = row_terms(stage, raw, row), row_terms(stage, raw, row + 8)
            ktile0(acc, q, t0, t1, stage)
            if not tma:
                load_stage(base + wr, Q, src, n0, N, i32(kt + S - 2), KT, tid, m_left, dst)
            P.wgmma_wait_1()
            if kt > 0:
                release(bars, last, lane)
            last, rd, wr = rd, step(rd), step(wr)
            ph = turn(rd, ph)
            landed(bars, rd, ph)
            ktile1(acc, q, t0, t1, base + rd)
            if not tma:
                load_stage(base + wr, Q, src, n0, N, i32(kt + S - 1), KT, tid, m_left, dst)
            P.wgmma_wait_1()
            release(bars, last, lane)
            last, rd, wr = rd, step(rd), step(wr)
            ph = turn(rd, ph)
            kt = i32(kt + 2)
            if kt >= KT:
                break
        P.wgmma_wait_0()
        cuda.syncthreads()
        store(acc, C, base, raw, m0, n0, M, N, tid)

    w4a16_wgmma.__name__ = spec.name
    return w4a16_wgmma


def _ktile(spec, ptx, half):
    """ktile(acc, q, t0, t1, b_tile): a k-tile's four k16 steps. Word
    2 half + p of rows g (q[0..3]) and g + 8 (q[4..7]) widened gives steps 2p
    and 2p + 1's A registers. With `groups` 2 each pair is a commit group (the
    INT4 wgmma's A_GROUP), the second pair widened after wait_group 1 has seen
    the group before the first end, so that no register an issued wgmma still
    reads is written; with 1 all four words are widened first and the k-tile
    is one group, so that the whole of it runs while the next is widened."""
    prec = PRECISIONS[spec.act]
    narrow = prec.narrow
    widen = getattr(ptx, f"dequant_u4_{narrow}x8_scaled")
    mma = getattr(ptx, f"wgmma_m64n{spec.bn}k16_f32_{narrow}_{narrow}_rs")
    n_acc = spec.bn // 2
    if narrow == "f16":
        call = "widen(q[{w}], {t}[0], {t}[1], {t}[2])"
    else:
        call = "widen(q[{w}], {t}[0], {t}[2])"
    widened_before = {0: (0, 1)} if spec.groups == 1 else {0: (0,), 1: (1,)}     # pair p: the words widened
    lines = ["db = desc(b_tile, u32(16), u32(sbo))", "d = (" + ", ".join(f"acc[{e}]" for e in range(n_acc)) + ")"]
    for p in range(2):
        if p and spec.groups == 2:
            lines += ["commit()", "wait_1()"]
        for w in widened_before.get(p, ()):       # word w of rows g (t0's) and of rows g + 8 (t1's)
            lines += [f"x{w} = " + call.format(w=2 * half + w, t="t0"),
                      f"y{w} = " + call.format(w=2 * half + w + 4, t="t1")]
        if p in widened_before:
            lines.append("fence()")
        for s in range(2):
            kk = 2 * p + s          # k step in the k-tile: 32 bytes along the swizzled row
            lines.append(f"d = mma(d, (x{p}[{2 * s}], y{p}[{2 * s}], x{p}[{2 * s + 1}], y{p}[{2 * s + 1}]), "
                         f"db + u64({2 * kk}), u32(1))")
    lines.append("commit()")
    lines += [f"acc[{e}] = d[{e}]" for e in range(n_acc)]
    env = {"desc": ptx.wgmma_desc_sw128, "widen": widen, "mma": mma, "fence": ptx.wgmma_fence,
           "commit": ptx.wgmma_commit, "wait_1": ptx.wgmma_wait_1, "u32": u32, "u64": u64, "sbo": _SBO}
    return generated(f"ktile{half}", "acc, q, t0, t1, b_tile", lines, env)


def _store(spec, ptx):
    """store(acc, C, base, raw, m0, n0, M, N, tid): C^T's accumulators
    (d[4j + 2h + e] = C^T(16 w + g + 8h, 8j + 2t + e) of warp w) into the
    stages as C's rows in f32, then, after the barrier, 16 bytes of C a
    thread at a time (four staged values, or eight rounded to out's format),
    rows past M and columns past N left out. A conversion reads a value
    loaded after the barrier, so no schedule can take it above the wgmma
    wait. Written out: accumulators indexed in a loop would live in local
    memory."""
    size, pitch, bn, threads = spec.c_size, spec.c_pitch, spec.bn, spec.consumers
    per_row = spec.cols * size // 16                # C's 16-byte pieces a row
    staged = 16 // size * 4                         # bytes of f32 staged for one of them
    lines = ["buf = cuda.shared.array(0, float32)", "lane, warp = tid & 31, tid >> 5", "g, t = lane >> 2, lane & 3",
             f"first = (base - raw) // u32(4) + u32(2 * t * {pitch // 4} + warp * 16 + g)"]
    for e in range(bn // 2):
        j, h, x = e >> 2, (e >> 1) & 1, e & 1
        lines.append(f"buf[first + u32({(8 * j + x) * (pitch // 4) + 8 * h})] = acc[{e}]")
    lines += ["cuda.syncthreads()",
              f"for i in range({-(-bn * per_row // threads)}):",
              f"    c = tid + i * {threads}",
              f"    r, piece = c // {per_row}, c % {per_row}",
              f"    col = n0 + piece * {16 // size}",
              f"    if r < {bn} and m0 + r < M and col < N:",
              f"        at = base + u32(r * {pitch} + piece * {staged})",
              "        v = " + ("ld4(at)" if size == 4 else "narrow(ld4(at), ld4(at + u32(16)))"),
              f"        st4(global_addr(C, 0) + u64(m0 + r) * u64(C.strides[0]) + u64(col * {size}), v)"]
    if size == 4:
        narrow, ld4 = None, ptx.ld_shared_v4_b32
    else:
        to_bits = getattr(ptx, NARROW[spec.out].cvt)
        narrow = device(lambda a, b: (to_bits(a[0], a[1]), to_bits(a[2], a[3]), to_bits(b[0], b[1]),
                                      to_bits(b[2], b[3])))
        ld4 = ptx.ld_shared_v4_f32
    env = {"cuda": cuda, "float32": types.float32, "u32": u32, "u64": u64, "ld4": ld4, "narrow": narrow,
           "st4": ptx.st_global_v4_b32, "global_addr": P.global_addr}
    return generated("store", "acc, C, base, raw, m0, n0, M, N, tid", lines, env)
