"""A kernel variant is data: one frozen dataclass names it completely.

A variant is a config with one field changed (``cfg.replace(cache="cg")``);
its name derives from its fields, the way CUTLASS names kernels from tile
shapes and stages. The study's kernel names are aliases in numgemm.registry.
"""

from dataclasses import dataclass, fields, replace

import numpy as np

from .precision import PRECISIONS
from .toolchain import parse_target, target_name

SWIZZLE_BYTES = 128         # a swizzled shared row (and a TMA box's row): the 128-byte swizzle's span
#: op="wgmma": the N of each instruction a k step issues, by the tile's bn (320, the
#: width of cuBLAS's fp16 tiles on sm_90: m64n256 and m64n64 side by side). Which N a
#: precision has routines for, in which B layout: Precision.wgmma_ns, wgmma_kn_ns, wgmma_swap_ns.
WGMMA_PARTS = {16: (16,), 32: (32,), 64: (64,), 128: (128,), 192: (192,), 256: (256,), 320: (256, 64)}
#: copy="tma": the most stages its ring of mbarriers may have (cp.async kernels: 5).
RING_STAGES = 16


def swizzled_offset(offset):
    """Where byte `offset` of a tile of 128-byte rows lies in the 128-byte
    swizzle: 16-byte chunk c of row r at chunk c ^ (r % 8)."""
    return offset ^ (((offset >> 7) & 7) << 4)


@dataclass(frozen=True)
class KernelConfig:
    """Everything that makes one GEMM kernel; see numgemm.kernel for how each
    field is used.

    op: "mma" calls ptx_asm/ (ldmatrix + mma.sync); "wmma" calls baselines/.
    Both share the skeleton: the same block tiling, warp tiling, pipeline and
    loaders, with only the warp-level routine swapped. "wgmma" (sm_90a) runs
    the warp-specialised skeleton: a producer warpgroup has TMA fill the
    stages, warps_m / 4 consumer warpgroups each issue wgmma on 64 rows of
    the block tile (warps_m = bm / 16: warp w holds rows 16w .. 16w + 15, as
    an mma warp tile of 16 x bn would).
    """

    precision: str
    op: str = "mma"            # mma | wmma | wgmma | dp4a
    mma_k: int = 0             # k of m16n8k<k> (mma); 0: the precision's largest
    bm: int = 128              # block tile, in output rows
    bn: int = 128              # block tile, in output columns
    bk: int = 64               # block tile, in K elements
    warps_m: int = 2           # warp grid; warp tile = (bm / warps_m, bn / warps_n)
    warps_n: int = 2
    warps_k: int = 1           # warps sharing one warp tile, each taking every warps_k-th k step
                               # of a k-tile; their sums meet in shared memory at the end
    stages: int = 3            # pipeline depth: 2..5 by cp.async, 2..RING_STAGES by TMA
    a_ldmatrix: int = 4        # ldmatrix width (x1/x2/x4) for A fragments (mma); 0: ld.shared + packing
    b_ldmatrix: int = 4        # ldmatrix width for B fragments (mma); 0: ld.shared + packing
    cache: str = "cg"          # cp.async cache operator: ca (L1 + L2) | cg (L2 only)
    evict: str = "none"        # L2 policy on the copies: none | evict_first | evict_last
    b_layout: str = "nk"       # nk: B is N x K ("B transposed"); kn: B is K x N
    b_global: str = "cp_async"  # B global -> shared: cp_async (16-byte cp.async) | ldg16
                               # (2-byte ld.global + st.shared: the study's K x N INT4 loader)
    acc: str = ""              # f32 | f16 | s32; "": the precision's default
    out: str = ""              # C's elements: "" the accumulator's type (f32, s32; f16 for acc=f16) |
                               # f16 (FP16 with f32 sums, each rounded to half as it is stored: the C
                               # that torch.matmul and cuBLAS's hsh kernels return, half the bytes)
    smem_pad: int = 16         # bytes added to each shared-memory row (bank conflicts)
    swizzle: bool = False      # instead of padding, 128-byte shared rows whose 16-byte chunk c of
                               # row r lies at chunk c ^ (r % 8) (the 128-byte swizzle of CUTLASS
                               # and TMA; copy="tma" sets it): no bank conflicts, 1/9 less shared
                               # memory than 16 bytes of padding; WMMA cannot read it
    private_tiles: bool = False  # each warp stages its own A/B tiles (the study's kernels)
    raster: int = 1            # blocks walk output tiles in groups of this many rows (L2 reuse)
    k_stagger: int = 0         # block b starts its k loop at k-tile b * k_stagger (mod k-tiles) and
                               # wraps, so that blocks running together read different columns
                               # of B, not one column band of every row (memory-bound shapes)
    linkage: str = "inline"    # inline | link: how the PTX routines reach the kernel
    unpack: str = "none"       # int4: none (s4 mma) | register (widen to s8 in registers) |
                               # scaled (widen to 16 x s8 in registers: 3 instead of 7 ALU
                               # per 8 values, the sum shifted back; K <= max_k) |
                               # tile (widen once per k-tile on its way into shared memory:
                               # ld.global early, widen + st.shared after the tile's mmas;
                               # the warps run the s8 k32 path on s8 tiles) | tile_scaled
                               # (wgmma: the producer widens to 16 x s8 once per k-tile; K <= max_k) |
                               # pass (wgmma, a_regs: B widened exactly to s8 once per call, by a kernel
                               # of its own, into a workspace that TMA copies from as INT8's B; A's s4
                               # lands by TMA in 64-byte rows, the 64-byte swizzle, for the consumers)
    a_regs: bool = False       # op=wgmma, unpack=tile, tile_scaled or pass: A reaches the stage as s4, and
                               # each consumer widens its rows in registers (ldmatrix, then the unpack's
                               # widening) for wgmma with A from registers; the producer widens B only
    swap: bool = False         # op=wgmma by TMA, INT8 or INT4 unpack=pass: the kernel computes C^T = B A^T,
                               # its tiles over N x M: B's rows are the wgmma's A side (INT4: widened by the
                               # consumers in registers), A its B side (INT4: widened by the pass instead
                               # of B), and C is stored transposed from registers. For M far below N:
                               # the pass then widens M x K bytes, not N x K; INT8 where M <= 16, in
                               # tiles 16 columns wide (m64n16k32), B streamed by TMA
    load_sets: int = 2         # op=wgmma, unpack=tile or tile_scaled: k-tiles the producer's loads run
                               # ahead (widen_in="registers": register sets, filled in turn; "stage": stages)
    widen_in: str = "registers"  # op=wgmma, unpack=tile or tile_scaled: where the producer's s4 waits to be
                               # widened: registers (ld.global) | stage (cp.async into the first 16 bytes of
                               # each piece's 32 in its stage, read back and widened in place; A's s4 with
                               # a_regs lands where the consumers read it)
    stage_c: bool = False      # op=wgmma: each consumer warp stores C through a shared buffer of its
                               # own, 128 bytes of a row at a time (written in the fragment's layout, read
                               # back along rows), 16 bytes a lane and whole 128-byte lines an
                               # instruction (a block tile inside an aligned C; at the edges, from
                               # registers as without it)
    c_tma: bool = False        # stage_c: a warp's 16 rows x 128 bytes of C leave its buffer by a TMA store
                               # (one lane issues it and the warp goes on while it drains; two buffers a
                               # warp, in the 128-byte swizzle), not by its lanes' 16-byte stores
    stagger: int = 0           # op=wgmma, two consumer warpgroups: the second starts once the first has issued
                               # this many k-tiles, and the lag stays: each one's epilogue runs while the
                               # other's wgmmas have the tensor cores to themselves (0: in step)
    min_blocks: int = 1        # launch bounds: blocks per SM the compiler must allow
    copy_parts: int = 1        # a k-tile's global -> shared copies start in this many parts, one
                               # before each of a warp's first copy_parts k steps (as CUTLASS
                               # interleaves them), not in one stretch ahead of the mmas
    zfill_src: str = "base"    # the source a zero-filled copy (a row or column past the matrix)
                               # names: base (the batch's first byte: in bounds, at a 64-bit
                               # select per copy) | any (its row's address, maybe past the
                               # matrix: ignore-src reads nothing; no select)
    interior_loop: bool = False  # blocks whose copies all fall inside A and B (tile inside M and N,
                               # K whole k-tiles) run their own copy of the k loop, without the
                               # copies' bounds checks (as CUTLASS leaves the K residue to its
                               # prologue); the others run the checked loop
    copy: str = "cp_async"     # global -> shared: cp_async (each thread copies 16-byte pieces, checked
                               # against the matrix's bounds) | tma (sm_90: one thread has the
                               # tensor memory accelerator copy each operand's whole k-tile, zero-
                               # filling what lies outside the matrix; the warps wait on an mbarrier
                               # per stage; shared rows are 128-byte swizzled instead of padded;
                               # no bounds checks, so zfill_src and interior_loop do not apply)
    cluster: int = 1           # op=wgmma: CTAs (1, 2 or 4) of a thread-block cluster on neighbouring tile
                               # rows; each loads its share of the B tile they have in common and TMA
                               # multicasts it to all of them (B read from L2 once per cluster, not per CTA)
    multicast: str = "b"       # cluster > 1: the operand its CTAs share: b (on neighbouring tile rows, as
                               # above) | a (on neighbouring tile columns: each loads its rows of the A
                               # tile they have in common and multicasts them; for M of one tile row)
    persistent: bool = False   # op=wgmma: one block per SM walks the output tiles (the producer fills
                               # the next tile's stages while the consumers store); else a block a tile
    even_waves: bool = False   # persistent: the fewest blocks that walk the tiles in as many waves as one a
                               # SM would, every block the same count (2048 tiles: 128 blocks of 16, not
                               # 132 of 15 or 16), the SMs left over idle: the same waves for less power
                               # (moot without persistent, and with stream_k, which takes every SM)
    stream_k: bool = False     # persistent: the tiles past the last whole wave, and one wave more, are shared
                               # out among all the clusters by k-tiles (stream-K; a grid of every SM): a
                               # tile split between CTAs is stored by the one with its first k-tile, which
                               # adds the others' partial sums (a workspace slot and flag a CTA's warp)
    reg_buffers: int = 0       # fragment register buffers: 2 loads the next k step's fragments
                               # (across the barrier at a tile's end) while this one's mmas issue;
                               # 0: 2 where a warp has an even number of k steps per k-tile, else 1
    split_k: int = 1           # blocks per output tile, each summing 1/split_k of the k-tiles into its
                               # own slice of a workspace that a second kernel adds up (split-K: more
                               # blocks where the tiles alone do not fill the GPU; integer sums exact)
    split_sum: str = "kernel"  # split_k > 1: who adds the slices: kernel (a second kernel, split_k.py) | last
                               # (the tile's last block to finish, counted by an atomic a tile: one launch)

    def __post_init__(self):
        self._check_fields()
        if not self.acc:
            object.__setattr__(self, "acc", self.prec.acc)
        if self.op == "mma" and not self.mma_k:
            object.__setattr__(self, "mma_k", self.prec.mma_ks[0])
        if self.op == "wmma":
            object.__setattr__(self, "mma_k", self.prec.wmma[2])
        if self.op == "wgmma":
            object.__setattr__(self, "mma_k", self.wgmma_prec.wgmma_k)
        if self.op == "dp4a":
            object.__setattr__(self, "mma_k", 4)
        if not self.reg_buffers:
            object.__setattr__(self, "reg_buffers", self.auto_reg_buffers)
        if self.copy == "tma":          # TMA lands boxes in the swizzle
            object.__setattr__(self, "swizzle", True)
        self.validate()

    # -- derived ------------------------------------------------------------
    @property
    def prec(self):
        return PRECISIONS[self.precision]

    @property
    def wgmma_prec(self):
        """The precision of the wgmma the kernel issues: INT4's are s8 (wgmma
        has no s4 form: the s4 is widened first)."""
        return self.prec.wide

    @property
    def c_dtype(self):
        """The dtype of C's elements."""
        return np.dtype(np.float16 if "f16" in (self.acc, self.out) else self.prec.out_dtype)

    @property
    def c_bits(self):
        """Whether the kernel's epilogue stores halves, as 16-bit patterns
        (uint16): f16 sums, or (out=f16) f32 sums it rounds. Split-K's kernel
        stores f32 slices, which the sum kernel rounds (split_k.SplitSum)."""
        return self.acc == "f16" or (self.out == "f16" and self.split_k == 1)

    @property
    def threads(self):
        return 32 * self.warps_m * self.warps_n * self.warps_k + self.producer_threads

    @property
    def producer_threads(self):
        """op="wgmma": the producer warpgroup, ahead of the consumers' warps."""
        return 128 if self.op == "wgmma" else 0

    @property
    def register_split(self):
        """op="wgmma": (producer, consumer) registers a thread after setmaxnreg,
        or None where every warpgroup keeps the launch bound's. ptxas allocates
        each side's code within its own count (the consumers' past the launch
        bound's). TMA: one producer thread issues copies (40). Widening: the
        producer's 128 threads hold load_sets register sets of a k-tile's s4
        of A and B (widen_in="stage": a piece's words and what they widen
        to), 32 more for addresses; the consumers take the rest, in
        multiples of 8, from the pool the launch bound gives the block."""
        if self.op != "wgmma":
            return None
        if not self.widens_tile:
            return 40, 232
        entry = 65536 // self.threads // 8 * 8          # the launch bound's registers a thread
        per_set = (self.bm + self.bn) * self.bk_bytes // self.producer_threads // 4
        held = self.load_sets * per_set if self.widen_in == "registers" else 32     # staged: one piece's words
        producer = -(-(held + 32) // 8) * 8
        if producer >= entry:           # setmaxnreg.dec cannot raise it
            return None
        consumer = (entry * self.threads - producer * self.producer_threads) // (self.threads - self.producer_threads)
        return producer, min(consumer // 8 * 8, 248)

    @property
    def partial_shape(self):
        """stream_k: one CTA's partial sums in its workspace slot, (accumulators
        a consumer thread holds, consumer threads): each thread's stores and
        loads run along the threads, coalesced."""
        consumers = self.threads - self.producer_threads
        return self.bm * self.bn // consumers, consumers

    @property
    def warp_tile(self):
        return self.bm // self.warps_m, self.bn // self.warps_n

    @property
    def op_shape(self):
        """(m, n, k) of one warp-level operation (dp4a: one thread, one output)."""
        if self.op == "dp4a":
            return 1, 1, 4
        if self.op == "wmma":
            return self.prec.wmma
        if self.op == "wgmma":
            return 64, self.bn, self.mma_k
        if self.widens_tile:
            return 16, 8, 32            # s8 in shared memory: the int8 k32 path
        if self.unpack != "none":
            return 16, 8, 64            # one s4 k64 step, issued as two s8 k32 mmas
        return 16, 8, self.mma_k

    @property
    def auto_reg_buffers(self):
        """Two fragment buffers alternate by k step: they need an even count a warp."""
        return 2 if self.warp_ksteps and self.warp_ksteps % 2 == 0 else 1

    @property
    def copy_slots(self):
        """k steps of a k-tile that can start a part of the copies: a warp's
        steps, less the last with two buffers (its mmas follow the barrier)."""
        return self.warp_ksteps - 1 if self.reg_buffers == 2 else self.warp_ksteps

    @property
    def max_k(self):
        """The largest K the kernel is exact for: a scaled widening accumulates
        256 x the s4 products (each at most 64) in s32."""
        return (2**31 - 1) // (256 * 64) if self.scaled else None

    @property
    def widens_tile(self):
        """Whether s4 is widened to s8 once per k-tile, on its way into shared memory."""
        return self.unpack in ("tile", "tile_scaled")

    @property
    def scaled(self):
        """Whether s4 is widened to 16 x s8 (3 ALU instructions per 8 values, not 7):
        the sums come out 256 x the s4 ones and are shifted back in the epilogue."""
        return self.unpack in ("scaled", "tile_scaled")

    @property
    def exact_twin(self):
        """The same kernel widening s4 to s8 exactly, where this one's scaled
        widening stops at max_k; itself where it does not scale."""
        if not self.scaled:
            return self
        return self.replace(unpack={"scaled": "register", "tile_scaled": "tile"}[self.unpack])

    @property
    def shared_view(self):
        """The config as the warps see it: with unpack="tile" shared memory holds
        s8 tiles of the same shape, read by the int8 k32 warp routine; else self."""
        if not self.widens_tile:
            return self
        wide = self.prec.wide
        if self.op == "wgmma":      # s8 stages in the swizzle, as TMA lands int8_wgmma's
            return self.replace(precision=wide.name, mma_k=wide.mma_ks[0], unpack="none", copy="tma", a_regs=False,
                                load_sets=2, widen_in="registers")
        return self.replace(precision=wide.name, mma_k=wide.mma_ks[0], unpack="none")

    @property
    def ksteps(self):
        """Warp-level k steps in one block k-tile."""
        return self.bk // self.op_shape[2]

    @property
    def warp_ksteps(self):
        """The k steps of a k-tile one warp takes (warps_k warps share them);
        0 where they do not divide evenly."""
        if self.warps_k < 1 or self.ksteps % self.warps_k:
            return 0
        return self.ksteps // self.warps_k

    @property
    def kstep_bytes(self):
        """Bytes of K one warp-level operation consumes per row."""
        return self.prec.kbytes(self.op_shape[2])

    @property
    def bk_bytes(self):
        return self.prec.kbytes(self.bk)

    @property
    def b_bk_bytes(self):
        """Bytes of a k-tile in a row of B's shared tile: bk_bytes, or
        (unpack="pass") bk, B's s8 as its widening kernel wrote it."""
        return self.bk if self.unpack == "pass" else self.bk_bytes

    @property
    def rows_a(self):
        """Rows of A in one stage's shared tile (per warp with private tiles)."""
        return self.warp_tile[0] if self.private_tiles else self.bm

    @property
    def rows_b(self):
        return self.warp_tile[1] if self.private_tiles else self.bn

    @property
    def min_cc(self):
        """The oldest compute capability the kernel runs on."""
        return (9, 0) if self.copy == "tma" or self.op == "wgmma" else (8, 0)

    @property
    def arch_specific(self):
        """Whether the kernel needs Hopper's arch-specific target (sm_90a,
        not sm_90): wgmma and setmaxnreg exist only there."""
        return self.op == "wgmma"

    def build_target(self, target):
        """The target name a build for target uses: 'sm_90' -> 'sm_90a' for a
        kernel that needs the arch-specific features."""
        return target_name(parse_target(target)) + ("a" if self.arch_specific else "")

    def unsupported(self, target, launch=True):
        """Why this kernel cannot be launched on (launch=False: built for) a GPU
        of compute capability `target` ((9, 0), 'sm_90'); None where it can.
        The one answer gemm(), the bench, inspect and the tests ask."""
        cc = parse_target(target)
        if cc < self.min_cc and self.op == "wgmma":
            return f"{self.name} issues wgmma, which {target_name(cc)} lacks: it needs sm_90a (Hopper)"
        if cc < self.min_cc:
            return (f"{self.name} copies with the TMA unit (copy={self.copy!r}), which {target_name(cc)} "
                    f"lacks: it needs {target_name(self.min_cc)}")
        if launch and self.evict != "none" and cc == (9, 0):
            return (f"{self.name}: cp.async with an L2 cache policy faults inside these GEMMs on sm_90 "
                    "(CUDA_ERROR_ILLEGAL_INSTRUCTION on an H200). ptxas miscompiles it: in the main "
                    "loop's LDGSTS the cache-policy descriptor register is overwritten, with createpolicy "
                    "and with a constant policy alike (a known ptxas bug: IST-DASLab/marlin#44, "
                    "triton-lang/triton#11660). It would end the process's CUDA context, so numgemm "
                    "does not launch it there")
        return None

    @property
    def interior(self):
        """Whether blocks whose copies all fall inside A and B run a k loop
        without the copies' bounds checks: interior_loop, where the copies
        have checks to drop (not copy="tma")."""
        return self.interior_loop and self.copy != "tma"

    @property
    def pitch_a(self):
        return self.bk_bytes + (0 if self.swizzle else self.smem_pad)

    @property
    def pitch_b(self):
        """Row pitch of the B tile: K bytes (nk) or N bytes (kn) per row;
        swizzled, a K x N tile is boxes side by side, each b_swizzle bytes of
        N wide (the tile's rows, as TMA copies them: tma_box_rows)."""
        if self.swizzle:
            return self.b_swizzle
        return self.b_tile_shape[1] + self.smem_pad

    @property
    def b_swizzle(self):
        """The swizzle span of B's shared rows, in bytes: 128, or 64 for a wgmma
        K x N tile 32 f16 columns wide (one box of 64-byte rows in the 64-byte
        swizzle, which the instruction reads as well)."""
        if self.op == "wgmma" and self.b_layout == "kn" and 2 * self.rows_b == 64:
            return 64
        return SWIZZLE_BYTES

    @property
    def tma_box_bytes(self):
        """copy="tma": the bytes of a row of A's box and of each B box (each
        box lands in the swizzle of that span; unpack="pass": A's s4, 64)."""
        return self.bk_bytes if self.unpack == "pass" else SWIZZLE_BYTES, self.b_swizzle

    @property
    def tma_box_rows(self):
        """copy="tma": rows of A's box and of each B box (128-byte rows; an
        N x K B tile shared by a cluster: each CTA's share)."""
        rows_b = self.b_tile_shape[0]
        if self.multicast == "a":
            return self.bm // self.cluster, rows_b
        return self.bm, rows_b // self.cluster if self.b_layout == "nk" else rows_b

    @property
    def tile_bytes_a(self):
        return self.rows_a * self.pitch_a

    @property
    def tile_bytes_b(self):
        rows, row_bytes = self.b_tile_shape
        return rows * (row_bytes if self.swizzle else self.pitch_b)

    @property
    def b_tile_shape(self):
        """(rows, bytes per row) of B's shared tile before padding: rows of K
        bytes (nk), or rows of 16-bit units of k (kn)."""
        if self.b_layout == "kn":
            return self.bk // self.prec.k_per_unit, 2 * self.rows_b
        return self.rows_b, self.b_bk_bytes

    @property
    def b_copy_bytes(self):
        """Bytes one copy of B moves global -> shared."""
        return 2 if self.b_global == "ldg16" else 16

    @property
    def copiers(self):
        """Threads that copy one shared tile: the block, a warp (private tiles),
        or the producer warpgroup."""
        return 32 if self.private_tiles else self.producer_threads or self.threads

    @property
    def stage_bytes(self):
        if self.widens_tile:
            return self.shared_view.stage_bytes
        tiles = self.warps_m * self.warps_n if self.private_tiles else 1
        return tiles * (self.tile_bytes_a + self.tile_bytes_b)

    @property
    def c_tile_pitch(self):
        """Row pitch, in 4-byte elements, of the C tile a WMMA epilogue stages in
        shared memory (16 bytes of padding keep WMMA's 32-byte alignment)."""
        return self.bn + 4

    @property
    def smem_bytes(self):
        """The pipeline's stages; a WMMA block tile that overhangs C is staged in
        the same memory after the main loop."""
        if self.op == "dp4a":
            return 0
        pipeline = self.stages * self.stage_bytes
        if self.op == "wmma":
            return max(pipeline, self.bm * self.c_tile_pitch * 4)
        return max(pipeline, self.reduce_bytes) + self.c_stage_bytes + self.tma_bytes

    @property
    def c_stage_pitch(self):
        """stage_c: the bytes from one row of a warp's C buffer to the next: 128
        bytes of C (32 columns, 64 of half-float C), padded so that the
        fragment's eight rows of a store fall in distinct banks (4-byte C: a
        quad writes 32 bytes a row, half-float C 16)."""
        return 128 if self.c_tma else 128 + (16 if self.c_bits else 32)

    @property
    def c_stage_bytes(self):
        """stage_c: each consumer warp's 16-row C buffer (c_tma: two, swizzled, no
        padding), after the stages."""
        if not self.stage_c:
            return 0
        return (self.threads - self.producer_threads) // 32 * 16 * self.c_stage_pitch * (2 if self.c_tma else 1)

    @property
    def tma_bytes(self):
        """copy="tma" and op="wgmma": room to align the stages to 1024 bytes (the
        swizzle's period), then one 8-byte mbarrier per stage after them
        (op="wgmma": two, the stage's "full" and its "empty")."""
        if self.copy != "tma" and self.op != "wgmma":
            return 0
        return 1024 + 8 * self.stages * (2 if self.op == "wgmma" else 1)

    @property
    def reduce_bytes(self):
        """Shared memory that warps_k - 1 warps' accumulators take to meet the first's."""
        return (self.warps_k - 1) * self.bm * self.bn * 4

    @property
    def name(self):
        """Derived from the fields: shape, then every field that is not the default."""
        op = f"mma{self.mma_k}" if self.op == "mma" else self.op
        s = (f"{self.precision}_{op}_{self.bm}x{self.bn}x{self.bk}"
             f"_w{self.warps_m}x{self.warps_n}_s{self.stages}")
        default = KernelConfig.__dataclass_fields__
        for f in ("warps_k", "a_ldmatrix", "b_ldmatrix", "cache", "evict", "b_layout", "b_global", "acc", "out",
                  "smem_pad", "swizzle", "private_tiles", "raster", "k_stagger", "linkage", "unpack", "min_blocks",
                  "copy_parts", "zfill_src", "interior_loop", "copy", "cluster", "multicast", "persistent",
                  "even_waves", "stream_k", "reg_buffers", "split_k", "split_sum", "a_regs", "swap", "load_sets",
                  "widen_in", "stage_c", "c_tma", "stagger"):
            value = getattr(self, f)
            if (f == "acc" and value == self.prec.acc) or (f == "reg_buffers" and value == self.auto_reg_buffers) \
                    or (f in ("swizzle", "zfill_src", "interior_loop") and self.copy == "tma") \
                    or (f == "even_waves" and (self.stream_k or not self.persistent)):  # implied, or moot
                continue
            if value != default[f].default:
                s += "_" + field_suffix(f, value)
        return s

    def grid_blocks(self, M, N, sms):
        """Blocks along grid.x for an M x N output on a GPU of `sms` SMs: a
        block a tile (the tile rows rounded up to whole clusters), or
        (persistent) at most one a SM, in whole clusters (stream_k: one a
        SM, however few the tiles; even_waves: as few as take as many
        waves); split-K's split_k
        blocks of a tile lie along grid.z, so a persistent kernel then has
        1 / split_k of the SMs along x."""
        tiles_m = -(-M // self.bm)
        tiles_n = -(-N // self.bn)
        if self.multicast == "a":           # the tile columns rounded up to whole clusters
            tiles = tiles_m * -(-tiles_n // self.cluster) * self.cluster
        else:
            tiles = -(-tiles_m // self.cluster) * self.cluster * tiles_n
        if not self.persistent:
            return tiles
        if self.stream_k:                   # every SM: the tail's k-tiles spread over them all
            return max(1, sms // self.cluster) * self.cluster
        units, wave = tiles // self.cluster, max(1, sms // self.split_k // self.cluster)
        if self.even_waves:                 # the same count of waves, spread evenly over the clusters
            waves = -(-units // wave)
            wave = -(-units // waves)
        return min(units, wave) * self.cluster

    def replace(self, **changes):
        """A variant: this config with the given fields changed."""
        return replace(self, **changes)

    def describe(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- checks -------------------------------------------------------------
    # Fields that count something: at least 1 (the rest of an int field may be 0).
    _POSITIVE = ("bm", "bn", "bk", "warps_m", "warps_n", "warps_k", "stages", "raster", "min_blocks", "copy_parts",
                 "split_k")

    def _check_fields(self):
        """Each field's type, and the values that every check after it relies on,
        in a message about the field at fault."""
        if self.precision not in PRECISIONS:
            raise ValueError(f"KernelConfig precision must be one of {tuple(PRECISIONS)}, got {self.precision!r}")
        for f in fields(self):
            v = getattr(self, f.name)
            want = {"int": int, "str": str, "bool": bool}.get(f.type if isinstance(f.type, str) else f.type.__name__)
            if want is int and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"KernelConfig {f.name} must be an int, got {type(v).__name__} {v!r}")
            if want in (str, bool) and not isinstance(v, want):
                raise TypeError(f"KernelConfig {f.name} must be a {want.__name__}, got {type(v).__name__} {v!r}")
            if f.name in self._POSITIVE and v < 1:
                raise ValueError(f"KernelConfig {f.name} must be at least 1, got {v}")
            if want is int and v < 0:
                raise ValueError(f"KernelConfig {f.name} must be >= 0, got {v}")
        for tile, warps in (("bm", "warps_m"), ("bn", "warps_n")):
            if getattr(self, tile) % getattr(self, warps):
                raise ValueError(f"KernelConfig {tile}={getattr(self, tile)} does not divide among "
                                 f"{warps}={getattr(self, warps)} warps")

    def validate(self):
        err = []
        p = self.prec
        wm, wn = self.warp_tile
        om, on, ok = self.op_shape
        if self.op not in ("mma", "wmma", "wgmma", "dp4a"):
            err.append(f"op {self.op!r} is not mma, wmma, wgmma or dp4a")
        if self.op == "dp4a":     # no tensor cores: one thread per output of a bm x bn tile
            if self.prec.kind != "integer" or self.prec.bits != 8 or self.bm * self.bn != self.threads \
                    or self.b_layout != "nk":
                raise ValueError("dp4a is int8 with B as N x K and one thread per output (bm * bn threads)")
            if self.split_k > 1:
                raise ValueError("split_k > 1 is for the mma, WMMA and wgmma kernels (dp4a sums all of K itself)")
            return
        if self.op == "mma" and self.mma_k not in p.mma_ks:
            err.append(f"{self.precision} mma has k in {p.mma_ks}, not {self.mma_k}")
        if self.op == "wgmma":
            err += self._wgmma_errors()
        elif self.bm % self.warps_m or self.bn % self.warps_n or wm % om or wn % on:
            err.append(f"warp tile {wm}x{wn} is not a multiple of the {om}x{on} operation")
        if self.op == "wmma" and self.op_shape[1] == 16 and wn % 16:
            err.append("WMMA 16x16 needs warp tiles in multiples of 16")
        if self.bk % ok:
            err.append(f"bk={self.bk} is not a multiple of the operation's k={ok}")
        if self.bk_bytes % 16:
            err.append(f"bk={self.bk} is {self.bk_bytes} bytes, not whole 16-byte copies")
        if not self.warp_ksteps:
            err.append(f"the {self.ksteps} k steps of a k-tile do not divide among warps_k={self.warps_k}")
        elif self.warps_k > 1 and (self.op != "mma" or self.acc == "f16" or self.private_tiles):
            err.append("warps_k > 1 sums f32/s32 mma accumulators of shared tiles")
        if self.k_stagger < 0:
            err.append("k_stagger must be >= 0")
        if self.reg_buffers not in (1, 2):
            err.append("reg_buffers must be 1 or 2")
        elif self.reg_buffers == 2 and self.warp_ksteps % 2:
            err.append(f"2 fragment buffers alternate by k step: a warp's {self.warp_ksteps} "
                       f"k steps per k-tile must be even")
        if self.warp_ksteps and not 1 <= self.copy_parts <= max(1, self.copy_slots):
            err.append(f"copy_parts must be 1..{self.copy_slots}: one part before each k step "
                       f"that a warp starts before the tile's barrier")
        if self.split_k > 1 and self.acc == "f16":
            err.append("split_k > 1 is for the mma, WMMA and wgmma kernels with f32/s32 sums (the workspace's)")
        if self.split_sum not in ("kernel", "last"):
            err.append("split_sum must be kernel or last")
        elif self.split_sum == "last" and (self.split_k == 1 or self.op not in ("mma", "wmma")):
            err.append("split_sum=last adds a split tile's slices in its last block: split_k > 1, the block "
                       "skeleton's kernels (op=mma or wmma)")
        if (self.persistent or self.cluster != 1) and self.op != "wgmma":
            err.append("persistent and cluster apply to the warp-specialised (wgmma) kernels")
        if self.stream_k and (not self.persistent or self.copy != "tma" or self.split_k != 1):
            err.append("stream_k shares the last tiles' k-tiles among a persistent wgmma grid's CTAs "
                       "(op=wgmma, persistent, copy=tma, split_k=1)")
        if self.copy not in ("cp_async", "tma"):
            err.append("copy must be cp_async or tma")
        elif self.copy == "tma" and (self.evict != "none" or max(self.tma_box_rows) > 256):
            err.append(f"copy=tma copies boxes of at most 256 rows, with no evict policy: "
                       f"boxes of {self.tma_box_rows} rows, evict={self.evict}")
        if self.op == "wgmma":
            pass                    # the shared view's tiles: checked by _wgmma_errors
        elif self.swizzle and (self.op != "mma" or self.b_global != "cp_async" or self.private_tiles
                              or self.unpack == "tile"):
            err.append(f"swizzled tiles (swizzle, copy={self.copy}) are shared tiles of whole 16-byte "
                       f"chunks that mma kernels read (op=mma; no private tiles, ldg16 or unpack=tile; "
                       f"WMMA reads rows of one stride only)")
        elif self.swizzle and self.bk_bytes != SWIZZLE_BYTES:
            err.append(f"swizzled tiles have rows of {SWIZZLE_BYTES} bytes of K: bk={self.bk} is "
                       f"{self.bk_bytes} bytes")
        elif self.swizzle and self.b_layout == "kn" and 2 * wn != SWIZZLE_BYTES:
            err.append(f"swizzled K x N B: a warp's {wn} columns must be one {SWIZZLE_BYTES}-byte box wide")
        if self.zfill_src not in ("base", "any"):
            err.append("zfill_src must be base or any")
        ring = self.copy == "tma"       # mbarriers count its stages, not cp.async.wait_group
        if not 2 <= self.stages <= (RING_STAGES if ring else 5):
            err.append(f"stages must be 2..5 (cp.async.wait_group 0..3), or 2..{RING_STAGES} by TMA, "
                       f"got {self.stages}")
        if self.smem_pad % 16:
            err.append("smem_pad must be a multiple of 16 bytes (ldmatrix rows are 16-byte aligned)")
        for name, width in (("a_ldmatrix", self.a_ldmatrix), ("b_ldmatrix", self.b_ldmatrix)):
            if width not in (0, 1, 2, 4):
                err.append(f"{name} must be 1, 2 or 4 (ldmatrix .x1/.x2/.x4) or 0 (ld.shared + packing)")
        if self.cache not in ("ca", "cg"):
            err.append("cache must be ca or cg")
        if self.evict not in ("none", "evict_first", "evict_last"):
            err.append("evict must be none, evict_first or evict_last")
        if self.b_layout not in ("nk", "kn"):
            err.append("b_layout must be nk or kn")
        if self.b_global not in ("cp_async", "ldg16"):
            err.append("b_global must be cp_async or ldg16")
        if self.b_global == "ldg16" and self.b_layout != "kn":
            err.append("ldg16 copies the 16-bit units of a K x N B")
        if self.b_layout not in p.b_layouts:
            err.append(f"{self.precision} takes B as {' or '.join(x.upper() for x in p.b_layouts)}, not "
                       f"{self.b_layout.upper()} (K x N int8 would need its k-pairs laid out apart)")
        if self.op == "wmma" and self.b_layout not in p.wmma_b_layouts:
            err.append("sub-byte WMMA takes B col-major (N x K) only")
        if self.acc not in p.mma_types:
            err.append(f"{self.precision} cannot accumulate in {self.acc}")
        if self.acc == "f16" and (self.op != "mma" or self.mma_k != 16):
            err.append("f16 accumulation is the m16n8k16 mma")
        if self.out not in ("", "f16"):
            err.append(f"out must be '' (C in the accumulator's type) or f16, got {self.out!r}")
        elif self.out and (self.acc != "f32" or self.op not in ("mma", "wgmma") or self.split_sum == "last"):
            err.append("out=f16 rounds f32 sums to half in the mma and wgmma epilogues (acc=f32; split-K "
                       "summed by its own kernel, split_sum=kernel); f16 accumulation stores half already")
        elif self.out and self.warp_tile[1] % 16:
            err.append(f"out=f16 stores the halves of 16 columns a quad: warp tile {wm}x{wn}")
        if self.linkage not in ("inline", "link"):
            err.append("linkage must be inline or link")
        if self.unpack not in ("none", "register", "scaled", "tile", "tile_scaled", "pass"):
            err.append("unpack must be none, register, scaled, tile, tile_scaled or pass")
        if self.unpack in ("tile_scaled", "pass") and self.op != "wgmma":
            err.append(f"unpack={self.unpack} is a wgmma kernel's widening")
        if self.unpack != "none" and (not p.widens_to or self.op not in ("mma", "wgmma")):
            widening = " or ".join(q.name for q in PRECISIONS.values() if q.widens_to)
            err.append(f"unpack applies to {widening} (the precisions that widen) mma and wgmma kernels")
        if self.stage_c and (self.op != "wgmma" or self.widens_tile):
            err.append("stage_c: the epilogue of the TMA wgmma kernels' consumers (op=wgmma, copy=tma; the "
                       "widening kernels' consumers have no registers to spare for it)")
        if self.c_tma and (not self.stage_c or self.split_k > 1 or self.stream_k):
            err.append("c_tma: stage_c's buffers stored by TMA into C itself (stage_c; no split-K or stream-K, "
                       "whose partial sums go to a workspace)")
        elif self.c_tma and self.stages * self.stage_bytes % 1024:
            err.append(f"c_tma: the swizzled C buffers after {self.stages} stages of {self.stage_bytes} bytes "
                       "would not start on the swizzle's 1024-byte period")
        if self.stagger and (self.op != "wgmma" or self.warps_m != 8 or self.split_k > 1 or self.stream_k
                             or not 0 < self.stagger < self.stages):
            err.append(f"stagger={self.stagger}: a lag of the second consumer warpgroup behind the first (op=wgmma, "
                       "warps_m=8), of fewer k-tiles than the ring's stages, in tiles computed whole (no split-K "
                       "or stream-K)")
        if self.a_regs and self.op != "wgmma":
            err.append("a_regs is the INT4 wgmma kernels' (A widened by the consumers, for wgmma from registers)")
        if self.widens_tile and (self.b_layout != "nk" or self.evict != "none"):
            err.append("unpack=tile widens N x K tiles loaded by ld.global (b_layout=nk, evict=none)")
        for what, row_bytes, unit in (("A", self.bk_bytes, 16), ("B", self.b_tile_shape[1], self.b_copy_bytes)):
            if self.copy != "tma" and row_bytes % unit == 0 and self.copiers % (row_bytes // unit):
                err.append(f"{what} tile rows of {row_bytes} bytes do not divide among {self.copiers} threads")
            elif self.swizzle and self.copy == "cp_async" and (self.copiers // (row_bytes // unit)) % 8:
                # a thread's rows then share r % 8, so one swizzled column serves all its copies
                err.append(f"swizzled cp.async: a thread's rows of the {what} tile must be a multiple "
                           f"of 8 apart, not {self.copiers // (row_bytes // unit)}")
        if not err and self.smem_bytes > 227 * 1024:       # sizes need a valid config
            err.append(f"{self.smem_bytes} bytes of shared memory is more than a block can have")
        if err:
            raise ValueError(f"invalid kernel config ({self.precision} {self.op}): " + "; ".join(err))

    def _wgmma_errors(self):
        """What a wgmma kernel needs: whole consumer warpgroups of 64 rows, the
        N and k of a routine in ptx_asm/wgmma.ptx, TMA copies into 128-byte
        rows, B as the instruction can read it."""
        err = []
        if self.warps_n != 1 or self.warps_k != 1 or self.warps_m % 4 or self.bm != 16 * self.warps_m:
            err.append(f"wgmma: consumer warpgroups of 64 rows (warps_m = bm / 16, a multiple of 4; "
                       f"warps_n = warps_k = 1), got bm={self.bm}, warps {self.warps_m}x{self.warps_n}x{self.warps_k}")
        if self.shared_view.b_bk_bytes != SWIZZLE_BYTES:
            err.append(f"wgmma reads rows of {SWIZZLE_BYTES} bytes of K in the swizzle: bk={self.bk} is "
                       f"{self.shared_view.b_bk_bytes} bytes in shared memory")
        w = self.wgmma_prec
        if not w.wgmma or self.bn not in WGMMA_PARTS or not (
                self.bn in w.wgmma_ns or (self.bn in w.wgmma_kn_ns and self.b_layout == "kn")
                or (self.bn in self.prec.wgmma_swap_ns and self.swap)):
            err.append(f"wgmma: {self.precision} has routines for N = {', '.join(map(str, w.wgmma_ns))}"
                       + (f" (and {', '.join(map(str, w.wgmma_kn_ns))} with B as K x N)" if w.wgmma_kn_ns else "")
                       + (f" (and {', '.join(map(str, self.prec.wgmma_swap_ns))} for C^T: swap)"
                          if self.prec.wgmma_swap_ns else "") + f", got bn={self.bn}")
        if self.copy != ("cp_async" if self.widens_tile else "tma") or self.linkage != "inline" \
                or self.unpack not in ("none", "tile", "tile_scaled", "pass"):
            err.append("wgmma: its stages come by TMA (copy=tma; INT4 unpack=pass), or for INT4 widened by the "
                       "producer warpgroup's own loads (unpack=tile or tile_scaled, copy=cp_async); its routines "
                       "inline")
        if self.widens_tile and (self.cluster != 1 or self.bk_bytes * 2 != SWIZZLE_BYTES):
            err.append("wgmma widening: no cluster, a k-tile of 64 bytes of s4 (128 of s8)")
        if (self.load_sets != 2 or self.widen_in != "registers") and not (self.widens_tile and self.op == "wgmma"):
            err.append("load_sets, widen_in: the loads of a widening wgmma producer")
        elif self.widen_in not in ("registers", "stage"):
            err.append(f"widen_in must be registers or stage, got {self.widen_in!r}")
        elif not 1 <= self.load_sets <= (4 if self.widen_in == "registers" else self.stages - 1):
            err.append(f"load_sets must be 1..{4 if self.widen_in == 'registers' else self.stages - 1} "
                       f"(widen_in={self.widen_in}), got {self.load_sets}")
        if self.a_regs != (self.unpack == "pass") and not self.widens_tile:
            err.append("a_regs: A widened by the consumers for wgmma with A from registers (unpack=tile or "
                       "tile_scaled; with unpack=pass, always)")
        if self.unpack == "pass" and (self.bk_bytes * 2 != SWIZZLE_BYTES or self.b_layout != "nk"):
            err.append("unpack=pass: a k-tile of 64 bytes of s4 (128 of s8), B as N x K")
        if self.swap and (not (self.unpack == "pass" or self.prec.swaps) or self.copy != "tma"
                          or self.stage_c or self.split_k > 1 or self.stream_k):
            err.append("swap: C^T from an INT8 or an unpack=pass INT4 TMA kernel, stored transposed from "
                       "registers (no stage_c; no split-K or stream-K, whose workspaces hold C's own layout)")
        if self.cluster not in (1, 2, 4) or self.rows_b % (self.cluster * 8):
            err.append(f"wgmma: cluster 1, 2 or 4, splitting B's tile into whole boxes, got {self.cluster}")
        if self.multicast not in ("a", "b") or (self.multicast == "a" and (
                self.cluster == 1 or self.copy != "tma" or self.bm % (self.cluster * 8))):
            err.append(f"multicast b, or a (a cluster's CTAs sharing the A tile by TMA, each 8 or more whole "
                       f"rows of it), got {self.multicast!r} with cluster={self.cluster}, bm={self.bm}")
        if self.persistent and self.min_blocks != 1:
            err.append("persistent: one block per SM (min_blocks=1)")
        if self.wgmma_prec.exact and self.b_layout != "nk":
            err.append("wgmma: integer B is K-major only (b_layout=nk)")
        return err


_SHORT = {
    "warps_k": lambda v: f"wk{v}",
    "a_ldmatrix": lambda v: f"ldA{v}" if v else "packA",
    "b_ldmatrix": lambda v: f"ldB{v}" if v else "packB",
    "cache": str,
    "evict": str,
    "b_layout": str,
    "b_global": str,
    "acc": lambda v: f"acc{v}",
    "out": lambda v: f"c{v}",
    "smem_pad": lambda v: f"pad{v}",
    "swizzle": lambda v: "swz",
    "private_tiles": lambda v: "private",
    "raster": lambda v: f"r{v}",
    "k_stagger": lambda v: f"kst{v}",
    "linkage": str,
    "unpack": lambda v: f"unpack{v}",
    "min_blocks": lambda v: f"min{v}",
    "copy_parts": lambda v: f"cp{v}",
    "zfill_src": lambda v: f"zf{v}",
    "interior_loop": lambda v: "iloop",
    "copy": str,
    "cluster": lambda v: f"cl{v}",
    "multicast": lambda v: f"mc{v}",
    "persistent": lambda v: "pers",
    "even_waves": lambda v: "ew",
    "stream_k": lambda v: "sk",
    "reg_buffers": lambda v: f"rb{v}",
    "split_k": lambda v: f"split{v}",
    "a_regs": lambda v: "aregs",
    "swap": lambda v: "swap",
    "load_sets": lambda v: f"ls{v}",
    "widen_in": lambda v: f"win{v}",
    "stage_c": lambda v: "sc",
    "c_tma": lambda v: "ctma",
    "stagger": lambda v: f"stg{v}",
    "split_sum": lambda v: f"sum{v}",
}


def field_suffix(field, value):
    """The name fragment a field's value adds to a config's name."""
    return _SHORT[field](value)
