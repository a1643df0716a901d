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
from ..precision import NARROW, PRECISIONS
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
#: The precisions W4A16 takes as activations: the 16-bit floats whose format it widens to.
ACTIVATIONS = tuple(p.name for p in PRECISIONS.values() if p.kind == "float" and p.bits == 16 and p.narrow in _WIDEN)


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
    ahead: bool = True          # the next group's weights loaded before this group's mmas

    def __post_init__(self):
        if self.act not in ACTIVATIONS or self.out not in ("f32", *NARROW):
            raise ValueError(f"W4A16: act one of {', '.join(ACTIVATIONS)}, out f32 or one of {', '.join(NARROW)}; "
                             f"got act={self.act!r}, out={self.out!r}")
        if not (1 <= self.n8s <= 8 and 1 <= self.warps <= 16 and 1 <= self.mtiles <= 4) or \
                (self.half and self.mtiles > 1):
            raise ValueError(f"W4A16: n8s 1..8, warps 1..16, mtiles 1..4 (1 with half); got {self.n8s}, "
                             f"{self.warps}, {self.mtiles}, half={self.half}")

        if self.smem_bytes > 48 * 1024:
            raise ValueError(f"W4A16: the warps' sums take {self.smem_bytes} bytes of shared memory, more than "
                             "the 48 KiB a kernel may declare (fewer warps, n8s or mtiles)")

    @property
    def smem_bytes(self):
        """The shared memory its warps' sums meet in: an f32 a warp, accumulator and lane."""
        return self.warps * self.mtiles * self.n8s * 4 * 32 * 4

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
                f"{'' if self.ahead else '_now'}")

    def describe(self):
        return {"kernel": self.name, "act": self.act, "out": self.out, "zeros": self.zeros, "n8s": self.n8s,
                "warps": self.warps, "mtiles": self.mtiles, "half": self.half, "min_blocks": self.min_blocks,
                "ahead": self.ahead}

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
    ld4, get4, put4 = ptx.ld_global_ca_v4, getter(4), setter(4)
    prec = PRECISIONS[spec.act]
    mma = getattr(ptx, f"mma_m16n8k16_{prec.mma_types['f32']}")
    to_f32 = getattr(ptx, f"{prec.narrow}x2_f32")
    n8s, warps, mt, threads, rows = spec.n8s, spec.warps, spec.mtiles, spec.threads, spec.rows
    halves = 1 if spec.half else 2
    nacc = mt * n8s * 4
    pairs = (nacc // 2) * 32                     # C's pairs of columns a block stores
    nq, na, nsums = n8s * 4, mt * 32, warps * nacc * 32       # (local arrays' sizes are constants)
    zeros, ahead = spec.zeros, spec.ahead

    widen = _WIDEN[prec.narrow](getattr(ptx, f"dequant_u4_{prec.narrow}x8"))

    if spec.out == "f32":
        def store(C, r, c, v0, v1):
            C[r, c] = v0
            C[r, c + 1] = v1
    else:
        pack = getattr(ptx, f"cvt_{spec.out}x2_f32")

        def store(C, r, c, v0, v1):
            bits = pack(v0, v1)
            C[r, c] = bits & 0xFFFF
            C[r, c + 1] = bits >> 16
    store = device(store)

    @device
    def load_b(q, qbase, nb0, grp, groups, n8_all, lane):
        """A group's weights of the block's column blocks: a 16-byte load each (0 past N or K)."""
        for j in range(n8s):
            n8 = nb0 + j
            src = qbase + ((n8 * groups + grp) * 32 + lane) * 16
            put4(q, 4 * j, ld4(src, n8 < n8_all and grp < groups))

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
        if ahead:
            load_b(nxt, qbase, nb0, warp, groups, n8_all, lane)
        for grp in range(warp, groups, warps):
            if ahead:                    # this group's weights arrived during the last one's mmas
                for e in range(nq):
                    q[e] = nxt[e]
                load_b(nxt, qbase, nb0, grp + warps, groups, n8_all, lane)
            else:
                load_b(q, qbase, nb0, grp, groups, n8_all, lane)
            for i in range(mt):
                for h in range(halves):
                    r = row0 + 16 * i + 8 * h + g
                    src = abase + r * astride + grp * 256 + t * 64
                    for v in range(4):
                        put4(a, (2 * i + h) * 16 + 4 * v, ld4(src + 16 * v, r < M))
            for e in range(nacc):
                gacc[e] = 0
            for j in range(n8s):
                z = u32(8)
                if zeros:
                    z = u32(Z[grp, min(nb0 + j, n8_all - 1) * 8 + g])
                for w in range(4):
                    b = widen(q[4 * j + w], z)
                    for sub in range(2):
                        s = 2 * w + sub
                        for i in range(mt):
                            lo = 2 * i * 16 + 2 * s
                            hi = lo + 16
                            if halves == 1:
                                frag = (a[lo], u32(0), a[lo + 1], u32(0))
                            else:
                                frag = (a[lo], a[hi], a[lo + 1], a[hi + 1])
                            at = (i * n8s + j) * 4
                            put4(gacc, at, mma(frag, (b[2 * sub], b[2 * sub + 1]), get4(gacc, at)))
            for j in range(n8s):
                col = min(nb0 + j, n8_all - 1) * 8 + 2 * t
                s0, s1 = to_f32(S[grp, col >> 1])
                for i in range(mt):
                    at = (i * n8s + j) * 4
                    acc[at] += gacc[at] * s0
                    acc[at + 1] += gacc[at + 1] * s1
                    acc[at + 2] += gacc[at + 2] * s0
                    acc[at + 3] += gacc[at + 3] * s1
        # the warps' sums meet in shared memory: [warp][accumulator][lane]
        sums = cuda.shared.array(nsums, types.float32)
        for e in range(nacc):
            sums[(warp * nacc + e) * 32 + lane] = acc[e]
        cuda.syncthreads()
        for it in range(-(-pairs // threads)):
            idx = tid + it * threads
            if idx < pairs:
                p, ln = idx >> 5, idx & 31
                e = 2 * p                                  # accumulators e, e + 1: columns 2t, 2t + 1
                v0, v1 = types.float32(0), types.float32(0)
                for w in range(warps):
                    v0 += sums[(w * nacc + e) * 32 + ln]
                    v1 += sums[(w * nacc + e + 1) * 32 + ln]
                ij, h = e >> 2, (e >> 1) & 1
                i, j = ij // n8s, ij % n8s
                r = row0 + 16 * i + 8 * h + (ln >> 2)
                c = (nb0 + j) * 8 + 2 * (ln & 3)
                if r < M and c < N and (halves == 2 or h == 0):
                    store(C, r, c, v0, v1)

    w4a16.__name__ = spec.name
    return w4a16
