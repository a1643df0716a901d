"""A kernel variant is data: one frozen dataclass names it completely.

A variant is a config with one field changed (``cfg.replace(cache="cg")``);
its name derives from its fields, the way CUTLASS names kernels from tile
shapes and stages. The study's kernel names are aliases in numgemm.registry.
"""

from dataclasses import MISSING, dataclass, field, fields, replace

import numpy as np

from .precision import NARROW, PRECISIONS
from .tiles import RING_STAGES, TileGeometry
from .toolchain import parse_target, target_name

def knob(default=MISSING, values=None, at_least=0, suffix=None, implied=None):
    """A KernelConfig field, declared once: its default; the values it may
    take (None: any of its type, ints at least `at_least`), checked for every
    config before anything reads it; and how a value other than the default
    reads in the config's name: `suffix`, a format string or a function of
    the value (None: the field is part of the name's fixed head), left out
    where `implied(cfg)` says another field implies it or makes it moot."""
    return field(default=default, metadata=dict(values=values, at_least=at_least, suffix=suffix, implied=implied))


def _BY_TMA(cfg):
    return cfg.copy == "tma"


@dataclass(frozen=True)
class KernelConfig(TileGeometry):
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

    precision: str = knob(values=tuple(PRECISIONS))
    op: str = knob("mma", values=("mma", "wmma", "wgmma", "dp4a"))
    # k of m16n8k<k> (mma); 0: the precision's largest
    mma_k: int = knob(0)
    # block tile, in output rows
    bm: int = knob(128, at_least=1)
    # block tile, in output columns
    bn: int = knob(128, at_least=1)
    # block tile, in K elements
    bk: int = knob(64, at_least=1)
    # warp grid; warp tile = (bm / warps_m, bn / warps_n)
    warps_m: int = knob(2, at_least=1)
    warps_n: int = knob(2, at_least=1)
    # warps sharing one warp tile, each taking every warps_k-th k step
    # of a k-tile; their sums meet in shared memory at the end
    warps_k: int = knob(1, at_least=1, suffix="wk{}")
    # pipeline depth: 2..5 by cp.async, 2..RING_STAGES by TMA
    stages: int = knob(3, at_least=1)
    # ldmatrix width (x1/x2/x4) for A fragments (mma); 0: ld.shared + packing
    a_ldmatrix: int = knob(4, values=(0, 1, 2, 4), suffix=lambda v: f"ldA{v}" if v else "packA")
    # ldmatrix width for B fragments (mma); 0: ld.shared + packing
    b_ldmatrix: int = knob(4, values=(0, 1, 2, 4), suffix=lambda v: f"ldB{v}" if v else "packB")
    # cp.async cache operator: ca (L1 + L2) | cg (L2 only)
    cache: str = knob("cg", values=("ca", "cg"), suffix="{}")
    # L2 policy on the copies: none | evict_first | evict_last
    evict: str = knob("none", values=("none", "evict_first", "evict_last"), suffix="{}")
    # nk: B is N x K ("B transposed"); kn: B is K x N
    b_layout: str = knob("nk", values=("nk", "kn"), suffix="{}")
    # B global -> shared: cp_async (16-byte cp.async) | ldg16
    # (2-byte ld.global + st.shared: the study's K x N INT4 loader)
    b_global: str = knob("cp_async", values=("cp_async", "ldg16"), suffix="{}")
    # f32 | f16 | s32; "": the precision's default
    acc: str = knob("", suffix="acc{}", implied=lambda c: c.acc == c.prec.acc)
    # C's elements: "" the accumulator's type (f32, s32; f16 for acc=f16) | the precision's narrow
    # format (f16, bf16: the f32 sums rounded as stored, as torch.matmul returns C, half the bytes)
    out: str = knob("", values=("", "f16", "bf16"), suffix="c{}")
    # the epilogue on f32 sums, before C's rounding (numgemm.kernel.epilogue):
    # C = act(scale_a * scale_b * (A @ B) + bias), A's scale one value (tensor)
    # or one a row of C, B's one or one a column, the bias one a column
    scale_a: str = knob("", values=("", "tensor", "row"), suffix="sa{}")
    scale_b: str = knob("", values=("", "tensor", "col"), suffix="sb{}")
    bias: bool = knob(False, suffix="bias")
    act: str = knob("", values=("", "relu", "gelu", "silu"), suffix="{}")
    # bytes added to each shared-memory row (bank conflicts)
    smem_pad: int = knob(16, suffix="pad{}")
    # instead of padding, 128-byte shared rows whose 16-byte chunk c of
    # row r lies at chunk c ^ (r % 8) (the 128-byte swizzle of CUTLASS
    # and TMA; copy="tma" sets it): no bank conflicts, 1/9 less shared
    # memory than 16 bytes of padding; WMMA cannot read it
    swizzle: bool = knob(False, suffix="swz", implied=_BY_TMA)
    # each warp stages its own A/B tiles (the study's kernels)
    private_tiles: bool = knob(False, suffix="private")
    # blocks walk output tiles in groups of this many rows (L2 reuse)
    raster: int = knob(1, at_least=1, suffix="r{}")
    # block b starts its k loop at k-tile b * k_stagger (mod k-tiles) and
    # wraps, so that blocks running together read different columns
    # of B, not one column band of every row (memory-bound shapes)
    k_stagger: int = knob(0, suffix="kst{}")
    # inline | link: how the PTX routines reach the kernel
    linkage: str = knob("inline", values=("inline", "link"), suffix="{}")
    # int4: none (s4 mma) | register (widen to s8 in registers) |
    # scaled (widen to 16 x s8 in registers: 3 instead of 7 ALU
    # per 8 values, the sum shifted back; K <= max_k) |
    # tile (widen once per k-tile on its way into shared memory:
    # ld.global early, widen + st.shared after the tile's mmas;
    # the warps run the s8 k32 path on s8 tiles) | tile_scaled
    # (wgmma: the producer widens to 16 x s8 once per k-tile; K <= max_k) |
    # pass (wgmma, a_regs: B widened exactly to s8 once per call, by a kernel
    # of its own, into a workspace that TMA copies from as INT8's B; A's s4
    # lands by TMA in 64-byte rows, the 64-byte swizzle, for the consumers)
    unpack: str = knob("none", values=("none", "register", "scaled", "tile", "tile_scaled", "pass"), suffix="unpack{}")
    # launch bounds: blocks per SM the compiler must allow
    min_blocks: int = knob(1, at_least=1, suffix="min{}")
    # a k-tile's global -> shared copies start in this many parts, one
    # before each of a warp's first copy_parts k steps (as CUTLASS
    # interleaves them), not in one stretch ahead of the mmas
    copy_parts: int = knob(1, at_least=1, suffix="cp{}")
    # the source a zero-filled copy (a row or column past the matrix)
    # names: base (the batch's first byte: in bounds, at a 64-bit
    # select per copy) | any (its row's address, maybe past the
    # matrix: ignore-src reads nothing; no select)
    zfill_src: str = knob("base", values=("base", "any"), suffix="zf{}", implied=_BY_TMA)
    # blocks whose copies all fall inside A and B (tile inside M and N,
    # K whole k-tiles) run their own copy of the k loop, without the
    # copies' bounds checks (as CUTLASS leaves the K residue to its
    # prologue); the others run the checked loop
    interior_loop: bool = knob(False, suffix="iloop", implied=_BY_TMA)
    # global -> shared: cp_async (each thread copies 16-byte pieces, checked
    # against the matrix's bounds) | tma (sm_90: one thread has the
    # tensor memory accelerator copy each operand's whole k-tile, zero-
    # filling what lies outside the matrix; the warps wait on an mbarrier
    # per stage; shared rows are 128-byte swizzled instead of padded;
    # no bounds checks, so zfill_src and interior_loop do not apply)
    copy: str = knob("cp_async", values=("cp_async", "tma"), suffix="{}")
    # op=wgmma: CTAs (1, 2 or 4) of a thread-block cluster on neighbouring tile
    # rows; each loads its share of the B tile they have in common and TMA
    # multicasts it to all of them (B read from L2 once per cluster, not per CTA)
    cluster: int = knob(1, values=(1, 2, 4), suffix="cl{}")
    # cluster > 1: the operand its CTAs share: b (on neighbouring tile rows, as
    # above) | a (on neighbouring tile columns: each loads its rows of the A
    # tile they have in common and multicasts them; for M of one tile row)
    multicast: str = knob("b", values=("b", "a"), suffix="mc{}")
    # op=wgmma: one block per SM walks the output tiles (the producer fills
    # the next tile's stages while the consumers store); else a block a tile
    persistent: bool = knob(False, suffix="pers")
    # persistent: the fewest blocks that walk the tiles in as many waves as one a
    # SM would, every block the same count (2048 tiles: 128 blocks of 16, not
    # 132 of 15 or 16), the SMs left over idle: the same waves for less power
    # (moot without persistent, and with stream_k, which takes every SM)
    even_waves: bool = knob(False, suffix="ew", implied=lambda c: c.stream_k or not c.persistent)
    # persistent: the tiles past the last whole wave, and one wave more, are shared
    # out among all the clusters by k-tiles (stream-K; a grid of every SM): a
    # tile split between CTAs is stored by the one with its first k-tile, which
    # adds the others' partial sums (a workspace slot and flag a CTA's warp)
    stream_k: bool = knob(False, suffix="sk")
    # fragment register buffers: 2 loads the next k step's fragments
    # (across the barrier at a tile's end) while this one's mmas issue;
    # 0: 2 where a warp has an even number of k steps per k-tile, else 1
    reg_buffers: int = knob(0, values=(0, 1, 2), suffix="rb{}", implied=lambda c: c.reg_buffers == c.auto_reg_buffers)
    # blocks per output tile, each summing 1/split_k of the k-tiles into its
    # own slice of a workspace that a second kernel adds up (split-K: more
    # blocks where the tiles alone do not fill the GPU; integer sums exact)
    split_k: int = knob(1, at_least=1, suffix="split{}")
    # split_k > 1: who adds the slices: kernel (a second kernel, split_k.py) | last
    # (the tile's last block to finish, counted by an atomic a tile: one launch)
    split_sum: str = knob("kernel", values=("kernel", "last"), suffix="sum{}")
    # op=wgmma, unpack=tile, tile_scaled or pass: A reaches the stage as s4, and
    # each consumer widens its rows in registers (ldmatrix, then the unpack's
    # widening) for wgmma with A from registers; the producer widens B only
    a_regs: bool = knob(False, suffix="aregs")
    # op=wgmma by TMA, INT8 or INT4 unpack=pass: the kernel computes C^T = B A^T,
    # its tiles over N x M: B's rows are the wgmma's A side (INT4: widened by the
    # consumers in registers), A its B side (INT4: widened by the pass instead
    # of B), and C is stored transposed from registers. For M far below N:
    # the pass then widens M x K bytes, not N x K; INT8 where M <= 16, in
    # tiles 16 columns wide (m64n16k32), B streamed by TMA
    swap: bool = knob(False, suffix="swap")
    # op=wgmma, unpack=tile or tile_scaled: k-tiles the producer's loads run
    # ahead (widen_in="registers": register sets, filled in turn; "stage": stages)
    load_sets: int = knob(2, suffix="ls{}")
    # op=wgmma, unpack=tile or tile_scaled: where the producer's s4 waits to be
    # widened: registers (ld.global) | stage (cp.async into the first 16 bytes of
    # each piece's 32 in its stage, read back and widened in place; A's s4 with
    # a_regs lands where the consumers read it)
    widen_in: str = knob("registers", values=("registers", "stage"), suffix="win{}")
    # op=wgmma: each consumer warp stores C through a shared buffer of its
    # own, 128 bytes of a row at a time (written in the fragment's layout, read
    # back along rows), 16 bytes a lane and whole 128-byte lines an
    # instruction (a block tile inside an aligned C; at the edges, from
    # registers as without it)
    stage_c: bool = knob(False, suffix="sc")
    # stage_c: a warp's 16 rows x 128 bytes of C leave its buffer by a TMA store
    # (one lane issues it and the warp goes on while it drains; two buffers a
    # warp, in the 128-byte swizzle), not by its lanes' 16-byte stores
    c_tma: bool = knob(False, suffix="ctma")
    # op=wgmma, two consumer warpgroups: the second starts once the first has issued
    # this many k-tiles, and the lag stays: each one's epilogue runs while the
    # other's wgmmas have the tensor cores to themselves (0: in step)
    stagger: int = knob(0, suffix="stg{}")
    # op=wgmma, two consumer warpgroups: each computes a whole block tile (both
    # 64-row halves, two accumulator sets, 2 x bn / 2 a thread), the two taking
    # alternate tiles of the block, their k loops in turn (named barriers), so
    # that one's epilogue runs while the other's wgmmas hold the tensor cores
    # (CUTLASS's ping-pong); a block of one tile runs on one warpgroup
    pingpong: bool = knob(False, suffix="pp")

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
        """The dtype of C's elements (BF16's narrow C: its bit patterns, uint16)."""
        if self.acc == "f16":
            return np.dtype(np.float16)
        if self.out:
            return np.dtype(NARROW[self.out].dtype)
        return np.dtype(np.float32 if self.epilogue else self.prec.out_dtype)     # an integer's, scaled: float

    @property
    def stored(self):
        """The sums the warp routine's store writes: the accumulators, or f32
        where the epilogue makes them (an integer precision's converted);
        split-K's slices stay in acc (its sum kernel applies the epilogue)."""
        return "f32" if self.epilogue and self.split_k == 1 else self.acc

    @property
    def narrows(self):
        """The narrower C's it may round to: the precision's; an integer
        precision's through an epilogue (W8A8), any of them."""
        return tuple(NARROW) if self.epilogue and self.prec.exact else self.prec.narrows

    @property
    def c_bits(self):
        """Whether the epilogue stores 16-bit floats as their patterns (uint16):
        f16 sums, or (out=f16, bf16) f32 sums it rounds. Split-K's kernel
        stores f32 slices, which the sum kernel rounds (split_k.SplitSum)."""
        return self.acc == "f16" or (bool(self.out) and self.split_k == 1)

    @property
    def epilogue(self):
        """Whether the sums pass through the epilogue (scales, bias, activation) on their way to C."""
        return bool(self.scale_a or self.scale_b or self.bias or self.act)

    @property
    def threads(self):
        return 32 * self.warps_m * self.warps_n * self.warps_k + self.producer_threads

    @property
    def producer_threads(self):
        """op="wgmma": the producer warpgroup, ahead of the consumers' warps."""
        return 128 if self.op == "wgmma" else 0

    @property
    def stage_readers(self):
        """op="wgmma": the consumer warps that read each stage of the ring (and
        release it): all of them, or with pingpong one warpgroup's."""
        return 4 if self.pingpong else (self.threads - self.producer_threads) // 32

    @property
    def register_split(self):
        """op="wgmma": (producer, consumer) registers a thread after setmaxnreg,
        or None where every warpgroup keeps the launch bound's. ptxas allocates
        each side's code within its own count (the consumers' past the launch
        bound's). TMA: one producer thread issues copies (40). Widening: the
        producer's 128 threads hold load_sets register sets of a k-tile's s4
        of A and B (widen_in="stage": a piece's words and what they widen
        to), 32 more for addresses. The consumers take the rest, in multiples
        of 8, of the pool the launch bound gives a block (min_blocks of them
        an SM): setmaxnreg.inc waits for registers that the block's own
        warps gave back, so asking more than the pool holds never returns."""
        if self.op != "wgmma":
            return None
        entry = min(65536 // (self.threads * self.min_blocks), 256) // 8 * 8    # the launch bound's a thread
        if self.widens_tile:
            per_set = (self.bm + self.bn) * self.bk_bytes // self.producer_threads // 4
            held = self.load_sets * per_set if self.widen_in == "registers" else 32     # staged: one piece's words
            producer, most = -(-(held + 32) // 8) * 8, 248
        else:
            producer, most = 40, 232
        if producer >= entry:           # setmaxnreg.dec cannot raise it
            return None
        consumer = (entry * self.threads - producer * self.producer_threads) // (self.threads - self.producer_threads)
        return producer, min(consumer // 8 * 8, most)

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
    def min_cc(self):
        """The oldest compute capability the kernel runs on."""
        return max((9, 0) if self.copy == "tma" or self.op == "wgmma" else (8, 0), self.prec.min_cc)

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
        if cc < self.min_cc and cc < self.prec.min_cc:
            return f"{self.name}: {target_name(cc)} lacks {self.precision} mma.sync ({target_name(self.prec.min_cc)})"
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
    def name(self):
        """Derived from the fields: shape, then every field that is not the
        default (nor implied), in the order they are declared."""
        op = f"mma{self.mma_k}" if self.op == "mma" else self.op
        s = (f"{self.precision}_{op}_{self.bm}x{self.bn}x{self.bk}"
             f"_w{self.warps_m}x{self.warps_n}_s{self.stages}")
        for f in fields(self):
            value, implied = getattr(self, f.name), f.metadata["implied"]
            if f.metadata["suffix"] is None or value == f.default or (implied and implied(self)):
                continue
            s += "_" + field_suffix(f.name, value)
        return s

    def replace(self, **changes):
        """A variant: this config with the given fields changed."""
        return replace(self, **changes)

    def describe(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- checks -------------------------------------------------------------
    def _check_fields(self):
        """Each field's type and values (its knob), and the tiles' division
        among the warps, which every check after it relies on, in a message
        about the field at fault."""
        for f in fields(self):
            v, meta = getattr(self, f.name), f.metadata
            want = {"int": int, "str": str, "bool": bool}[f.type if isinstance(f.type, str) else f.type.__name__]
            if want is int and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"KernelConfig {f.name} must be an int, got {type(v).__name__} {v!r}")
            if want is not int and not isinstance(v, want):
                raise TypeError(f"KernelConfig {f.name} must be a {want.__name__}, got {type(v).__name__} {v!r}")
            if want is int and v < meta["at_least"]:
                raise ValueError(f"KernelConfig {f.name} must be at least {meta['at_least']}, got {v}")
            if meta["values"] is not None and v not in meta["values"]:
                raise ValueError(f"KernelConfig {f.name} must be {_listed(meta['values'])}, got {v!r}")
        for tile, warps in (("bm", "warps_m"), ("bn", "warps_n")):
            if getattr(self, tile) % getattr(self, warps):
                raise ValueError(f"KernelConfig {tile}={getattr(self, tile)} does not divide among "
                                 f"{warps}={getattr(self, warps)} warps")

    def validate(self):
        """Raise ValueError with every rule the config breaks: the tiling's
        own here, each feature's from its module (numgemm.kernel.RULES)."""
        from .kernel import RULES, dp4a

        err = dp4a.rules(self) if self.op == "dp4a" else self._tiling_errors() + [e for r in RULES for e in r(self)]
        if not err and self.op != "dp4a" and self.smem_bytes > 227 * 1024:      # sizes need a valid config
            err.append(f"{self.smem_bytes} bytes of shared memory is more than a block can have")
        if err:
            raise ValueError(f"invalid kernel config ({self.precision} {self.op}): " + "; ".join(err))

    def _tiling_errors(self):
        """The block and warp tiling, the k steps, the ring, the operands'
        layouts and sums: what every tensor-core kernel needs."""
        err = []
        p = self.prec
        wm, wn = self.warp_tile
        om, on, ok = self.op_shape
        if self.op != "wgmma" and (wm % om or wn % on):       # wgmma's: warp_wgmma.rules
            err.append(f"warp tile {wm}x{wn} is not a multiple of the {om}x{on} operation")
        if self.bk % ok:
            err.append(f"bk={self.bk} is not a multiple of the operation's k={ok}")
        if self.bk_bytes % 16:
            err.append(f"bk={self.bk} is {self.bk_bytes} bytes, not whole 16-byte copies")
        if not self.warp_ksteps:
            err.append(f"the {self.ksteps} k steps of a k-tile do not divide among warps_k={self.warps_k}")
        if self.reg_buffers == 2 and self.warp_ksteps % 2:
            err.append(f"2 fragment buffers alternate by k step: a warp's {self.warp_ksteps} "
                       f"k steps per k-tile must be even")
        ring = self.copy == "tma"       # mbarriers count its stages, not cp.async.wait_group
        if not 2 <= self.stages <= (RING_STAGES if ring else 5):
            err.append(f"stages must be 2..5 (cp.async.wait_group 0..3), or 2..{RING_STAGES} by TMA, "
                       f"got {self.stages}")
        if self.smem_pad % 16:
            err.append("smem_pad must be a multiple of 16 bytes (ldmatrix rows are 16-byte aligned)")
        if self.b_layout not in p.b_layouts:
            err.append(f"{self.precision} takes B as {' or '.join(x.upper() for x in p.b_layouts)}, not "
                       f"{self.b_layout.upper()} (K x N int8 would need its k-pairs laid out apart)")
        if self.acc not in p.mma_types:
            err.append(f"{self.precision} cannot accumulate in {self.acc}")
        if self.out and self.out not in self.narrows:
            err.append(f"out={self.out}: {self.precision} rounds C to {' or '.join(self.narrows) or 'no narrower format'}"
                       + (" (its exact sums; through an epilogue, bf16 or f16)" if p.exact else ""))
        elif self.out and (self.acc == "f16" or self.op not in ("mma", "wgmma") or self.split_sum == "last"):
            err.append(f"out={self.out} rounds f32 sums in the mma and wgmma epilogues (acc=f32; split-K "
                       "summed by its own kernel, split_sum=kernel); f16 accumulation stores half already")
        elif self.out and wn % 16:
            err.append(f"out={self.out} stores the 16-bit values of 16 columns a quad: warp tile {wm}x{wn}")
        return err


def field_suffix(name, value):
    """The name fragment a field's value adds to a config's name."""
    suffix = KernelConfig.__dataclass_fields__[name].metadata["suffix"]
    return suffix(value) if callable(suffix) else suffix.format(value)


def _listed(values):
    """'a, b or c' (an empty string shown as '')."""
    words = [repr(v) if v == "" else str(v) for v in values]
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
