"""W4A16: FP16 or BF16 activations times INT4 weights, widened in registers.

At the sizes a model decodes at (M of 1 to 64 tokens), a GEMM with an
N x K weight is the time it takes to read the weight: INT4 reads a quarter
of FP16's bytes. So the weight goes straight from global memory into the
mma.sync B fragments, with no shared memory on its way (Marlin's plan):
numgemm.quant.prepack_w4 lays it out so that one 16-byte load gives a lane
its four B registers of eight k16 steps (128 k: a group) of one column
block, and ptx_asm/dequant_u4.ptx widens a register of eight u4 into four
f16x2 (or bf16x2) B registers, exact, the zero point taken off. A group's
mmas start from zero; their f32 sums are then scaled by the group's scale of
each column and added, so the scale costs one FMA per sum and group, and no
rounding of the weight.

K is permuted within each group, alike for A and B (the sum does not care):
lane t's k are 32 t .. 32 t + 31 of the group, so its A registers of the
group are 16 consecutive words of a row: four 16-byte loads, which the warps
of a block mostly find in L1. The block's warps split the groups among them
(each its every warps-th) for the same columns; their sums meet in shared
memory and one pass stores C. A warp holds mtiles 16-row tiles, so larger M
reads the weight fewer times (from L2, the blocks of one column block
running side by side).

Its own kernel, with no seams: no tile reaches shared memory, so there is
no copy routine, and its warp routine is the loop below.
"""

import functools
from dataclasses import dataclass

from numba import cuda, types

from .. import primitives as P
from ..precision import NARROW, PRECISIONS, W4A16_ACTIVATIONS
from ..quant import GROUP  # K of a group: one scale per column, one 16-byte load of a lane's weights
from .regs import OUT, device, getter, i32, setter, u8, u32


def _widen_f16(dq):
    # 1024 + z in f16 is 0x6400 | z; -(64 + z) is 0xD400 + 16 z (z < 16), in both halves
    return device(lambda x, z: dq(x, u32(0x64006400) | (z * u32(0x10001)), u32(0xD400D400) + ((z << 4) * u32(0x10001))))


def _widen_bf16(dq):
    # -(128 + z) in bf16 is 0xC300 | z (z < 16), in both halves
    return device(lambda x, z: dq(x, u32(0xC300C300) | (z * u32(0x10001))))


#: widen(x, z): a word of eight u4 as four B registers, less z, by the activations' format
#: (ptx_asm/dequant_u4.ptx's routine of that format, and the zero terms it takes).
_WIDEN = {"f16": _widen_f16, "bf16": _widen_bf16}
#: The precisions W4A16 takes as activations (precision.py's fact), each a format it widens to.
ACTIVATIONS = W4A16_ACTIVATIONS
assert all(PRECISIONS[p].narrow in _WIDEN for p in ACTIVATIONS), "a W4A16 activation format without its widening"


@dataclass(frozen=True)
class W4A16:
    """A W4A16 kernel, as numgemm's kernel cache keys it (describe()); its
    name derives from its fields."""

    act: str = "fp16"           # activations (A) and the widened weights: fp16 | bf16
    out: str = "f16"            # C: f16 | bf16 (the activations' own) | f32
    zeros: bool = False         # zero points per group and column (else signed weights: z = 8)
    n8s: int = 4                # 8-column blocks a warp (and its block) computes
    warps: int = 8              # warps splitting a block's groups
    mtiles: int = 1             # 16-row tiles a warp computes
    half: bool = False          # the tile's first 8 rows only (M <= 8: the mma's rows 8..15 are zeros, not loaded)
    min_blocks: int = 2         # blocks an SM holds at once (registers: 128 a thread for two of 8 warps)
    ahead: bool = True          # the next group's weights loaded before this group's mmas (ring 0)
    ring: int = 0               # groups of weights a warp keeps in flight by cp.async through its own
                                # ring of shared memory (0: straight into registers)
    swap: bool = False          # the weights as the mma's A, rows as its n8 (half only: M <= 8)

    def __post_init__(self):
        if self.act not in ACTIVATIONS or self.out not in ("f32", *NARROW):
            raise ValueError(f"W4A16: act one of {', '.join(ACTIVATIONS)}, out f32 or one of {', '.join(NARROW)}; "
                             f"got act={self.act!r}, out={self.out!r}")
        if not (1 <= self.n8s <= 8 and 1 <= self.warps <= 16 and 1 <= self.mtiles <= 4) or \
                (self.half and self.mtiles > 1) or self.ring not in (0, 2, 3, 4, 5):
            raise ValueError(f"W4A16: n8s 1..8, warps 1..16, mtiles 1..4 (1 with half), ring 0 or 2..5 "
                             f"(cp.async.wait_group 0..3); got {self.n8s}, {self.warps}, {self.mtiles}, "
                             f"half={self.half}, ring={self.ring}")

        if self.swap and not (self.half and self.n8s % 2 == 0):
            raise ValueError(f"W4A16: swap takes half (M <= 8) and column blocks in pairs (n8s even); "
                             f"got half={self.half}, n8s={self.n8s}")
        if not self.ring and self.sums_bytes > 48 * 1024:
            raise ValueError(f"W4A16: the warps' sums take {self.sums_bytes} bytes of shared memory, more than "
                             "the 48 KiB a kernel may declare (fewer warps, n8s or mtiles)")
        if self.dynamic_bytes > 227 * 1024:
            raise ValueError(f"W4A16: the warps' rings take {self.dynamic_bytes} bytes of shared memory, more "
                             "than the 227 KiB a block may have (a shorter ring, fewer warps or n8s)")

    @property
    def accumulators(self):
        """f32 sums a thread keeps: 4 an mma's tile (swap: 2 column blocks' 8 rows)."""
        return self.n8s * 2 if self.swap else self.mtiles * self.n8s * 4

    @property
    def sums_bytes(self):
        """The shared memory its warps' sums meet in: an f32 a warp, accumulator and lane."""
        return self.warps * self.accumulators * 32 * 4

    @property
    def ring_bytes(self):
        """A warp's ring: ring groups of its n8s column blocks' 512 bytes."""
        return self.ring * self.n8s * 512

    @property
    def dynamic_bytes(self):
        """The dynamic shared memory a launch gives it: the warps' rings, which
        the sums reuse once the k loop is done (0: no ring, the sums static)."""
        return max(self.warps * self.ring_bytes, self.sums_bytes) if self.ring else 0

    @property
    def threads(self):
        return 32 * self.warps

    @property
    def rows(self):
        return 8 if self.half else 16 * self.mtiles

    @property
    def cols(self):
        return 8 * self.n8s

    @property
    def name(self):
        return (f"w4a16_{self.act}_{self.rows}x{self.cols}x{GROUP}_w{self.warps}"
                f"{'_zp' if self.zeros else ''}_c{self.out}{'' if self.min_blocks == 2 else f'_b{self.min_blocks}'}"
                f"{'' if self.ahead or self.ring else '_now'}{f'_r{self.ring}' if self.ring else ''}"
                f"{'_swap' if self.swap else ''}")

    def describe(self):
        return {"kernel": self.name, "act": self.act, "out": self.out, "zeros": self.zeros, "n8s": self.n8s,
                "warps": self.warps, "mtiles": self.mtiles, "half": self.half, "min_blocks": self.min_blocks,
                "ahead": self.ahead, "ring": self.ring, "swap": self.swap}

    def argtypes(self):
        """A (M, K/2) uint32: each two activations, rows 16-byte aligned, any
        row stride; the weight's words (N/8, K/128, 32, 4), scales (K/128,
        N/2) uint32 (two columns' a word), zeros (K/128, N) uint8 (1 x 1
        where there are none); C (M, N) in out's format (f16, bf16 as
        their bits), any row stride; M, N, K."""
        a2 = lambda t: types.Array(t, 2, "A")  # noqa: E731
        c4 = lambda t, n: types.Array(t, n, "C")  # noqa: E731
        return (a2(u32), c4(u32, 4), c4(u32, 2), c4(u8, 2), a2(OUT[self.out]), i32, i32, i32)

    def function(self):
        return _kernel(self)

    def grid(self, M, N):
        """The row tiles side by side (x), so the blocks that read one column
        block's weights run together; then the column blocks (y)."""
        return -(-M // self.rows), -(-N // self.cols), 1


def choose(M, N, sms, act="fp16", out="f16", zeros=False):
    """The W4A16 kernel for an M x N output on a GPU of sms SMs: a warp's
    16-row tiles by M, then the widest column block (at most 32 columns)
    that still gives every SM a block, within the shared memory of its
    warps' sums: wider blocks read A fewer times (each block reads all of
    its rows' K), and 32 beat 16 and 64 at M = 1 and 16, N = K = 8192
    (docs/findings.md, W4A16)."""
    mtiles = 1 if M <= 16 else 2 if M <= 64 else 4
    rows = -(-M // (16 * mtiles))
    n8s = next((n for n in (4, 2) if rows * -(-N // (8 * n)) >= sms and mtiles * n <= 8), 1)
    return W4A16(act, out, zeros, n8s, 8, mtiles, half=M <= 8, min_blocks=2 if mtiles == 1 else 1)


@functools.cache
def _kernel(spec):
    ptx = P.routines("inline")
    ld4, put4 = ptx.ld_global_ca_v4, setter(4)
    n8s, warps, mt, threads, rows = spec.n8s, spec.warps, spec.mtiles, spec.threads, spec.rows
    halves, nacc, ring, ring_bytes = 1 if spec.half else 2, spec.accumulators, spec.ring, spec.ring_bytes
    nq, na, nsums = n8s * 4, mt * 32, warps * nacc * 32       # (local arrays' sizes are constants)
    start, fetch = _fetch(spec, ptx)
    group = (_swapped_group if spec.swap else _row_group)(spec, ptx)
    finish = _finish(spec, ptx)

    def w4a16(A, Q, S, Z, C, M, N, K):
        tid = cuda.threadIdx.x
        warp, lane = tid >> 5, tid & 31
        g, t = lane >> 2, lane & 3
        row0 = cuda.blockIdx.x * rows
        nb0 = cuda.blockIdx.y * n8s                          # the first 8-column block
        groups, n8_all = K >> 7, N >> 3
        qbase, abase = P.global_addr(Q, 0), P.global_addr(A, 0)
        astride = A.strides[0]
        acc = cuda.local.array(nacc, types.float32)
        for e in range(nacc):
            acc[e] = 0
        q = cuda.local.array(nq, u32)
        nxt = cuda.local.array(nq, u32)
        a = cuda.local.array(na, u32)
        gacc = cuda.local.array(nacc, types.float32)
        shared = cuda.shared.array(0, u32)               # dynamic: the rings (ring > 0)
        rbase = P.shared_addr(shared, 0) + warp * ring_bytes
        start(nxt, rbase, qbase, nb0, warp, groups, n8_all, lane)
        it = 0
        for grp in range(warp, groups, warps):
            fetch(q, nxt, rbase, it, qbase, nb0, grp, groups, n8_all, lane)
            it += 1
            for i in range(mt):
                for h in range(halves):
                    r = row0 + 16 * i + 8 * h + g
                    src = abase + r * astride + grp * 256 + t * 64
                    for v in range(4):
                        put4(a, (2 * i + h) * 16 + 4 * v, ld4(src + 16 * v, r < M))
            group(q, a, gacc, acc, S, Z, grp, nb0, n8_all, g, t)
        # the warps' sums meet in shared memory: [warp][accumulator][lane]; over the rings, once all are read
        sums = cuda.shared.array(0 if ring else nsums, types.float32)
        if ring:
            cuda.syncthreads()
        for e in range(nacc):
            sums[(warp * nacc + e) * 32 + lane] = acc[e]
        cuda.syncthreads()
        finish(sums, C, row0, nb0, M, N, tid)

    w4a16.__name__ = spec.name
    return w4a16


def _fetch(spec, ptx):
    """(start, fetch): a warp's weights of a group into q, ahead of their use.
    ring > 0: cp.async into the warp's ring, ring - 1 groups ahead; else
    ahead: 16-byte loads into nxt a group ahead; else loaded when used."""
    ld4, put4 = ptx.ld_global_ca_v4, setter(4)
    n8s, warps, ring, nq = spec.n8s, spec.warps, spec.ring, spec.n8s * 4
    slot_bytes = n8s * 512

    @device
    def load_b(q, qbase, nb0, grp, groups, n8_all, lane):
        """A group's weights of the block's column blocks: a 16-byte load each (0 past N or K)."""
        for j in range(n8s):
            n8 = nb0 + j
            src = qbase + ((n8 * groups + grp) * 32 + lane) * 16
            put4(q, 4 * j, ld4(src, n8 < n8_all and grp < groups))

    if ring:
        cp_async, commit, ld_shared = ptx.cp_async_cg, ptx.cp_async_commit, ptx.ld_shared_v4_b32
        wait_landed = getattr(ptx, f"cp_async_wait_{ring - 2}")     # the oldest of ring - 1 groups

        @device
        def copy_b(dst, qbase, nb0, grp, groups, n8_all, lane):
            """load_b's pieces by cp.async into a slot of the ring (each lane's
            own 16 bytes: no other lane reads them); 0 past N, none past K."""
            if grp < groups:
                for j in range(n8s):
                    n8 = nb0 + j
                    cp_async(dst + (j * 32 + lane) * 16, qbase + ((n8 * groups + grp) * 32 + lane) * 16,
                             n8 < n8_all)
            commit()

        def start(nxt, rbase, qbase, nb0, warp, groups, n8_all, lane):
            for s in range(ring - 1):
                copy_b(rbase + s * slot_bytes, qbase, nb0, warp + s * warps, groups, n8_all, lane)

        def fetch(q, nxt, rbase, it, qbase, nb0, grp, groups, n8_all, lane):
            slot = it % ring             # has landed; the slot read last group gets ring - 1 groups ahead
            wait_landed()
            for j in range(n8s):
                put4(q, 4 * j, ld_shared(rbase + slot * slot_bytes + (j * 32 + lane) * 16))
            fill = (it + ring - 1) % ring
            copy_b(rbase + fill * slot_bytes, qbase, nb0, grp + (ring - 1) * warps, groups, n8_all, lane)
    elif spec.ahead:
        def start(nxt, rbase, qbase, nb0, warp, groups, n8_all, lane):
            load_b(nxt, qbase, nb0, warp, groups, n8_all, lane)

        def fetch(q, nxt, rbase, it, qbase, nb0, grp, groups, n8_all, lane):
            for e in range(nq):          # this group's weights arrived during the last one's mmas
                q[e] = nxt[e]
            load_b(nxt, qbase, nb0, grp + warps, groups, n8_all, lane)
    else:
        def start(nxt, rbase, qbase, nb0, warp, groups, n8_all, lane):
            pass

        def fetch(q, nxt, rbase, it, qbase, nb0, grp, groups, n8_all, lane):
            load_b(q, qbase, nb0, grp, groups, n8_all, lane)
    return device(start), device(fetch)


def _math(spec, ptx):
    """(mma, widen, to_f32, zero) of the activations' format; zero(Z, grp,
    n8, g): column g of 8-column block n8's zero point (8 without zero points)."""
    prec = PRECISIONS[spec.act]
    widen = _WIDEN[prec.narrow](getattr(ptx, f"dequant_u4_{prec.narrow}x8"))
    if spec.zeros:
        zero = device(lambda Z, grp, n8, g: u32(Z[grp, n8 * 8 + g]))
    else:
        zero = device(lambda Z, grp, n8, g: u32(8))
    return getattr(ptx, f"mma_m16n8k16_{prec.mma_types['f32']}"), widen, getattr(ptx, f"{prec.narrow}x2_f32"), zero


def _row_group(spec, ptx):
    """A group's mmas with the activations as A (mtiles 16-row tiles; half:
    rows 0..7 only) and the widened weights as B, then its sums scaled into
    acc: accumulator (i * n8s + j) * 4 + r is row 16 i + 8 (r >> 1) + g,
    column 8 j + 2 t + (r & 1)."""
    mma, widen, to_f32, zero = _math(spec, ptx)
    get4, put4 = getter(4), setter(4)
    n8s, mt, half, nacc = spec.n8s, spec.mtiles, spec.half, spec.accumulators

    def group(q, a, gacc, acc, S, Z, grp, nb0, n8_all, g, t):
        for e in range(nacc):
            gacc[e] = 0
        for j in range(n8s):
            z = zero(Z, grp, min(nb0 + j, n8_all - 1), g)
            for w in range(4):
                b = widen(q[4 * j + w], z)
                for sub in range(2):
                    for i in range(mt):
                        lo = 2 * i * 16 + 2 * (2 * w + sub)
                        hi = lo + 16
                        if half:
                            frag = (a[lo], u32(0), a[lo + 1], u32(0))
                        else:
                            frag = (a[lo], a[hi], a[lo + 1], a[hi + 1])
                        at = (i * n8s + j) * 4
                        put4(gacc, at, mma(frag, (b[2 * sub], b[2 * sub + 1]), get4(gacc, at)))
        for j in range(n8s):
            s0, s1 = to_f32(S[grp, (min(nb0 + j, n8_all - 1) * 8 + 2 * t) >> 1])
            for i in range(mt):
                at = (i * n8s + j) * 4
                acc[at] += gacc[at] * s0
                acc[at + 1] += gacc[at + 1] * s1
                acc[at + 2] += gacc[at + 2] * s0
                acc[at + 3] += gacc[at + 3] * s1
    return device(group)


def _swapped_group(spec, ptx):
    """A group's mmas with the widened weights as A and the activations
    (rows 0..7) as B: C^T = W X^T, so M <= 8 fills the mma's n8 where it left
    the m16's rows 8..15 empty, half the mmas. Two column blocks' B
    fragments are an A fragment (a0..a3 = j0's b0, j1's b0, j0's b1, j1's
    b1); a row's A fragment registers (k 2t.., 2t + 8..) are its B fragment.
    Accumulator 4 p + r is column 8 (2 p + (r >> 1)) + g, row 2 t + (r & 1)."""
    mma, widen, to_f32, zero = _math(spec, ptx)
    get4, put4 = getter(4), setter(4)
    pairs, nacc = spec.n8s // 2, spec.accumulators

    def group(q, a, gacc, acc, S, Z, grp, nb0, n8_all, g, t):
        for e in range(nacc):
            gacc[e] = 0
        for p in range(pairs):
            z0 = zero(Z, grp, min(nb0 + 2 * p, n8_all - 1), g)
            z1 = zero(Z, grp, min(nb0 + 2 * p + 1, n8_all - 1), g)
            for w in range(4):
                b0, b1 = widen(q[8 * p + w], z0), widen(q[8 * p + 4 + w], z1)
                for sub in range(2):
                    lo = 2 * (2 * w + sub)
                    frag = (b0[2 * sub], b1[2 * sub], b0[2 * sub + 1], b1[2 * sub + 1])
                    put4(gacc, 4 * p, mma(frag, (a[lo], a[lo + 1]), get4(gacc, 4 * p)))
        for p in range(pairs):
            for h in range(2):
                s0, s1 = to_f32(S[grp, (min(nb0 + 2 * p + h, n8_all - 1) * 8 + g) >> 1])
                sc = s1 if g & 1 else s0
                acc[4 * p + 2 * h] += gacc[4 * p + 2 * h] * sc
                acc[4 * p + 2 * h + 1] += gacc[4 * p + 2 * h + 1] * sc
    return device(group)


def _finish(spec, ptx):
    """finish(sums, C, row0, nb0, M, N, tid): the warps' sums added and
    stored, each thread its pairs of columns (swap: its elements) in turn."""
    n8s, warps, threads, nacc = spec.n8s, spec.warps, spec.threads, spec.accumulators
    if spec.out == "f32":
        def store1(C, r, c, v):
            C[r, c] = v
    else:
        pack = getattr(ptx, f"cvt_{spec.out}x2_f32")

        def store1(C, r, c, v):
            C[r, c] = pack(v, v) & 0xFFFF
    store1 = device(store1)

    @device
    def total(sums, e, ln):
        v = types.float32(0)
        for w in range(warps):
            v += sums[(w * nacc + e) * 32 + ln]
        return v

    if spec.swap:
        def finish(sums, C, row0, nb0, M, N, tid):
            for it in range(-(-nacc * 32 // threads)):
                idx = tid + it * threads
                if idx < nacc * 32:
                    e, ln = idx >> 5, idx & 31
                    r = row0 + 2 * (ln & 3) + (e & 1)
                    c = (nb0 + 2 * (e >> 2) + ((e >> 1) & 1)) * 8 + (ln >> 2)
                    if r < M and c < N:
                        store1(C, r, c, total(sums, e, ln))
        return device(finish)

    half = spec.half

    def finish(sums, C, row0, nb0, M, N, tid):
        for it in range(-(-nacc * 16 // threads)):
            idx = tid + it * threads
            if idx < nacc * 16:
                p, ln = idx >> 5, idx & 31
                e = 2 * p                                  # accumulators e, e + 1: columns 2t, 2t + 1
                ij, h = e >> 2, (e >> 1) & 1
                i, j = ij // n8s, ij % n8s
                r = row0 + 16 * i + 8 * h + (ln >> 2)
                c = (nb0 + j) * 8 + 2 * (ln & 3)
                if r < M and c < N and not (half and h):
                    store1(C, r, c, total(sums, e, ln))
                    store1(C, r, c + 1, total(sums, e + 1, ln))
    return device(finish)
