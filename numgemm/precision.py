"""What each precision is: the one home of the per-precision facts.

Every other module asks a Precision (``PRECISIONS["int8"]``, or a kernel's
``cfg.prec``) rather than testing a precision's name or keeping its own
table: its kind (float or integer: how results are compared), the element
width and packing, the mma.sync and wgmma shapes and their routine names,
the SASS opcodes they compile to, the WMMA baseline, the dtypes gemm()
takes and returns (and a narrower C), the layouts of B, the precision a
widening kernel runs on, the library it is timed beside, the values the
checks draw, the tolerance, the poison.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Narrow:
    """A C narrower than the f32 sums, each rounded as it is stored
    (KernelConfig.out names it): its host dtype (bfloat16 as its bit
    patterns), the dtype name torch and ml_dtypes give it, the encoding its
    host array holds ("" where NumPy has the type), its significand bits
    (its rounding, 2**-digits)."""
    name: str
    dtype: object
    dtype_name: str
    encoding: str
    digits: int

    @property
    def cvt(self):
        """The routine that rounds an f32 pair to it (ptx_asm/pack.ptx)."""
        return f"cvt_{self.name}x2_f32"


NARROW = {"f16": Narrow("f16", np.float16, "float16", "", 11), "bf16": Narrow("bf16", np.uint16, "bfloat16", "bfloat16", 8)}


@dataclass(frozen=True)
class Precision:
    name: str
    kind: str                 # "float" (compared by relative error) or "integer" (compared exactly)
    bits: int                 # bits per input element
    acc: str                  # default accumulator: f32 | s32
    mma_ks: tuple             # k of the m16n8k mma shapes, largest first
    mma_types: dict           # accumulator -> the mma routine's type suffix (ptx_asm/mma.ptx)
    wmma: tuple               # (m, n, k) of the WMMA operation
    wmma_name: str            # baselines/wmma_<name>.cu: its WMMA baseline
    wmma_sass: str            # the SASS opcode WMMA compiles to where it is native
    host_dtype: object        # dtype of the arrays gemm() takes (int4: packed uint8)
    out_dtype: object
    values: tuple             # [lo, hi) of the random integers the checks draw; () for normal floats
    ceiling: str              # the mma routine whose register-only loop is this precision's ceiling
    wgmma: str = ""           # the wgmma routine at N = 256 (ptx_asm/wgmma.ptx); "": none (s4)
    sass_mma: str = ""        # the mma.sync opcode, {m}{n}{k} and {acc} (F32, F16) to fill in
    sass_wgmma: str = ""      # the wgmma opcode, {m}x{n}x{k} to fill in
    narrows: tuple = ()       # the narrower C's it may store (NARROW), its own first (FP16: f16; FP8: bf16, f16)
    b_layouts: tuple = ("nk",)  # the layouts of B its kernels read ("kn": K x N, "nk": the transpose of N x K)
    b_units: object = None    # where a K x N B comes as 16-bit units of k_per_unit k (INT4): their dtype
    widens_to: str = ""       # the precision a widening kernel issues instructions of (INT4: int8)
    wgmma_ns: tuple = ()      # N of its wgmma routines for B in either layout
    wgmma_kn_ns: tuple = ()   # N of its wgmma routines for a K x N B only (FP16's 192, and 320 as 256 + 64)
    swaps: bool = False       # its wgmma kernels may compute C^T = B A^T (swap)
    wgmma_swap_ns: tuple = ()  # N of wgmma tiles it has for C^T only (INT8's 16)
    library: str = ""         # the library GEMM it is timed beside (peers.py); a widening precision: its wide one's
    dtype_names: bool = True  # whether its host dtype names it (INT4's packed uint8 does not)
    wmma_regs: tuple = ()     # the WMMA fragments: uint32 per thread of A and of B, accumulators per thread
    wmma_b_layouts: tuple = ("nk",)  # the layouts of B its WMMA fragments load
    encoding: str = ""        # the format whose bit patterns its host arrays hold (BF16: "bfloat16" in uint16;
    #                           FP8: "float8_e4m3fn", "float8_e5m2" in uint8), as torch and ml_dtypes name it
    tuned_as: str = ""        # the precision whose tuned winners it takes at shapes it has not searched (BF16: FP16)
    min_cc: tuple = (8, 0)    # the oldest GPU with its mma.sync (FP8: sm_89)
    mma_converted_on: tuple = ()  # GPUs whose ptxas converts its mma.sync to f16 HMMA (FP8 on sm_90)
    sum_error: float = 1e-3   # relative error its f32 sums may have (tolerance): FP8's wgmma keeps about 14 bits of
                              # a sum on Hopper (DeepSeek-V3's report, 3.3.2), 1.05e-3 at K = 2841 measured

    @property
    def narrow(self):
        """Its own narrow C (the first of narrows: F.linear's C in its dtype), or ""."""
        return self.narrows[0] if self.narrows else ""

    @property
    def narrow_out(self):
        """That C's host dtype, or None."""
        return NARROW[self.narrow].dtype if self.narrows else None

    def narrow_of(self, dtype):
        """The narrow C (of narrows) whose host dtype is dtype, or ""."""
        return next((n for n in self.narrows if np.dtype(NARROW[n].dtype) == np.dtype(dtype)), "")

    def encoding_of(self, dtype):
        """The encoding whose bit patterns an array of dtype holds: its
        operands' (host_dtype), a narrow C's (bfloat16), else ""."""
        if self.encoding and np.dtype(dtype) == np.dtype(self.host_dtype):
            return self.encoding
        narrow = self.narrow_of(dtype)
        return NARROW[narrow].encoding if narrow else ""

    @property
    def dtype_aliases(self):
        """The dtype names that name it beside its host dtype's: torch's and
        ml_dtypes' bfloat16 for BF16, whose arrays numgemm reads as their bits."""
        return (self.encoding,) if self.encoding else ()

    def encode(self, x):
        """Float values as the host arrays gemm() takes: cast, or (an
        encoding) the bit patterns of the values rounded to nearest, ties to
        even (NaN stays NaN; FP8: past the largest finite, the largest)."""
        if not self.encoding:
            return np.asarray(x).astype(self.host_dtype)
        return _CODECS[self.encoding].encode(np.asarray(x, dtype=np.float32))

    def decode(self, a):
        """Host operands (or C) as the wide values references sum: int64 for
        the integers, float64 for the floats (an encoding's bit patterns
        read as its values: the operands', or a narrow C's)."""
        a = np.asarray(a)
        if self.exact:
            return a.astype(np.int64)
        encoding = self.encoding_of(a.dtype)
        return _CODECS[encoding].decode(a) if encoding else a.astype(np.float64)

    def kbytes(self, k):
        """Bytes that k elements take in a row (INT4: two per byte)."""
        return k * self.bits // 8

    @property
    def k_per_unit(self):
        """K elements in one 16-bit unit of a K x N ("kn") B: ldmatrix.trans
        moves 16-bit units, so K x N B is stored as (K / k_per_unit, N) units,
        each holding consecutive k of one column (fp16: 1, INT4: 4)."""
        return 16 // self.bits

    @property
    def exact(self):
        """Integer results are exact: compared entry for entry."""
        return self.kind == "integer"

    @property
    def packed(self):
        """Several elements to a byte (INT4: two, along K)."""
        return self.bits < 8

    @property
    def wide(self):
        """The precision whose instructions a kernel that widens this one
        issues (INT4: int8's s8), or this one."""
        return PRECISIONS[self.widens_to] if self.widens_to else self

    @property
    def out_dtypes(self):
        """The dtypes C may have: the accumulator's, then the narrower ones."""
        return (np.dtype(self.out_dtype),) + tuple(np.dtype(NARROW[n].dtype) for n in self.narrows)

    def mma_sass(self, m, n, k, acc="f32"):
        return self.sass_mma.format(m=m, n=n, k=k, acc=acc.upper())

    def wgmma_sass(self, m, n, k):
        return self.sass_wgmma.format(m=m, n=n, k=k)

    def tolerance(self, acc="", narrow=""):
        """Relative Frobenius error a result may have against the float64
        reference of its operands: 0 for integers; floats with f32
        accumulation sum_error (1e-3; FP8 4e-3), with f16 accumulation
        (rounded at every step) 2e-2; C rounded to a narrow format (NARROW's
        name) at least its rounding (bf16's 2**-8; f16's 2**-11 lies within 1e-3)."""
        if self.exact:
            return 0.0
        return max(2e-2 if acc == "f16" else self.sum_error, 2.0**-NARROW[narrow].digits if narrow else 0.0)

    @property
    def poison(self):
        """What an output is filled with before a checked launch, so that an
        element the kernel never writes fails the comparison."""
        return np.nan if not self.exact else -(2**31)

    @property
    def max_k(self):
        """The largest K whose worst case fits int32 accumulation exactly: K
        products of the most negative values (-128 * -128 for INT8, -8 * -8
        for INT4) summed must stay <= 2**31 - 1. None for FP16, which
        accumulates in f32 (or, fp16_ptx_fp16acc, in f16: past 65504 it
        rounds to inf, as any f16 sum does)."""
        if not self.exact:
            return None
        lo = self.values[0]
        return (2**31 - 1) // (lo * lo)

    @property
    def ceiling_k(self):
        return int(self.ceiling.split("k")[1].split("_")[0])

    def wgmma_at(self, n):
        """The wgmma routine of N = n (64, 128 or 256)."""
        return self.wgmma.replace("n256", f"n{n}")

    @property
    def wgmma_k(self):
        """k of the wgmma routine (16 for f16, 32 for s8); 0 where there is none."""
        return int(self.wgmma.split("k")[1].split("_")[0]) if self.wgmma else 0


class _Bfloat16:
    """bfloat16: the top 16 bits of float32."""

    @staticmethod
    def encode(x):
        u = x.view(np.uint32)
        rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
        return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)

    @staticmethod
    def decode(a):
        return (a.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


class _Float8:
    """An 8-bit float (OCP FP8) by its table: sign, exp_bits, man_bits, the
    exponent's bias; ieee: the top exponent holds inf and NaN (e5m2), else
    only S.1111.111 is NaN and the rest are finite (e4m3fn: to 448)."""

    def __init__(self, exp_bits, man_bits, ieee):
        codes = np.arange(256)
        e, m = (codes >> man_bits) & ((1 << exp_bits) - 1), codes & ((1 << man_bits) - 1)
        bias, top = (1 << (exp_bits - 1)) - 1, (1 << exp_bits) - 1
        mag = np.where(e == 0, m / 2**man_bits * 2.0**(1 - bias), (1 + m / 2**man_bits) * 2.0**(e - bias))
        if ieee:
            mag = np.where(e == top, np.where(m == 0, np.inf, np.nan), mag)
        else:
            mag = np.where((e == top) & (m == (1 << man_bits) - 1), np.nan, mag)
        self.values = np.where(codes & 0x80, -mag, mag)
        self.bias, self.man_bits = bias, man_bits
        self.largest, self.nan = mag[:128][np.isfinite(mag[:128])].max(), np.uint8(0x7F)

    def decode(self, a):
        return self.values[a]

    def encode(self, x):
        """float32 to the nearest code, ties to even, saturating (satfinite).
        Normal codes by float32's bits: rounding away the low mantissa bits
        carries into the exponent by itself, and float32's exponent bias is
        swapped for the format's; subnormals are whole steps of the smallest
        one (an exact power-of-2 scale, then rint): arithmetic on whole
        arrays, not a search of the code table."""
        mag = np.minimum(np.abs(x), np.float32(self.largest))
        u, shift = mag.view(np.uint32), 23 - self.man_bits
        normal = (u + np.uint32((1 << (shift - 1)) - 1) + ((u >> np.uint32(shift)) & np.uint32(1))) >> np.uint32(shift)
        normal -= np.uint32((127 - self.bias) << self.man_bits)
        sub = np.rint(mag * np.float32(2.0 ** (self.bias - 1 + self.man_bits))).astype(np.uint32)
        code = np.where(mag < np.float32(2.0 ** (1 - self.bias)), sub, normal).astype(np.uint8)
        code |= np.signbit(x).astype(np.uint8) << np.uint8(7)
        return np.where(np.isnan(x), self.nan, code)


_CODECS = {"bfloat16": _Bfloat16, "float8_e4m3fn": _Float8(4, 3, False), "float8_e5m2": _Float8(5, 2, True)}


def _fp8(name, encoding):
    """FP8 (e4m3, e5m2): INT8's k32 shapes and K-major B, f32 sums, no WMMA."""
    t = name.upper()
    return Precision(name, "float", 8, "f32", (32,), {"f32": f"{name}_f32"}, (0, 0, 0), "", "", np.uint8, np.float32,
                     (), f"mma_m16n8k32_{name}_f32", f"wgmma_m64n256k32_f32_{name}_{name}",
                     sass_mma=f"QMMA.{{m}}{{n}}{{k}}.F32.{t}.{t}", sass_wgmma=f"QGMMA.{{m}}x{{n}}x{{k}}.F32.{t}.{t}",
                     wgmma_ns=(128, 256), swaps=True, wgmma_swap_ns=(16,), dtype_names=False, encoding=encoding,
                     tuned_as="int8", min_cc=(8, 9),
                     narrows=("bf16", "f16"), library="scaled_mm",
                     mma_converted_on=((9, 0),), sum_error=4e-3)


PRECISIONS = {
    "fp16": Precision("fp16", "float", 16, "f32", (16, 8), {"f32": "f16_f32", "f16": "f16_f16"}, (16, 16, 16), "f16",
                      "HMMA.16816.F32", np.float16, np.float32, (), "mma_m16n8k16_f16_f32",
                      "wgmma_m64n256k16_f32_f16_f16", sass_mma="HMMA.{m}{n}{k}.{acc}",
                      sass_wgmma="HGMMA.{m}x{n}x{k}.F32", narrows=("f16",),
                      b_layouts=("kn", "nk"),
                      wgmma_ns=(32, 64, 128, 256), wgmma_kn_ns=(192, 320), library="cublas", wmma_regs=(8, 8, 8),
                      wmma_b_layouts=("nk", "kn")),
    # BF16: FP16's instructions with bf16 operands (ptx_asm/*_bf16.ptx are FP16's routines twinned);
    # host arrays hold its bit patterns as uint16 (NumPy has no bfloat16; torch's and ml_dtypes' are read so).
    "bf16": Precision("bf16", "float", 16, "f32", (16, 8), {"f32": "bf16_f32"}, (16, 16, 16), "bf16",
                      "HMMA.16816.F32.BF16", np.uint16, np.float32, (), "mma_m16n8k16_bf16_f32",
                      "wgmma_m64n256k16_f32_bf16_bf16", sass_mma="HMMA.{m}{n}{k}.{acc}.BF16",
                      sass_wgmma="HGMMA.{m}x{n}x{k}.F32.BF16", narrows=("bf16",),
                      b_layouts=("kn", "nk"),
                      wgmma_ns=(32, 64, 128, 256), wgmma_kn_ns=(192, 320), library="cublas", dtype_names=False,
                      wmma_regs=(4, 4, 8), wmma_b_layouts=("nk", "kn"), encoding="bfloat16", tuned_as="fp16"),
    "int8": Precision("int8", "integer", 8, "s32", (32, 16), {"s32": "s8_s32"}, (16, 16, 16), "s8",
                      "IMMA.16816.S8.S8", np.int8, np.int32, (-128, 128), "mma_m16n8k32_s8_s32",
                      "wgmma_m64n256k32_s32_s8_s8", sass_mma="IMMA.{m}{n}{k}.S8.S8",
                      sass_wgmma="IGMMA.{m}x{n}x{k}.S8.S8", wgmma_ns=(128, 256), swaps=True, wgmma_swap_ns=(16,), library="cublaslt",
                      wmma_regs=(2, 2, 8), wmma_b_layouts=("nk", "kn")),
    # FP8: INT8's routines with e4m3 or e5m2 operands (ptx_asm/*_fp8.ptx); uint8 bit patterns on the host.
    "e4m3": _fp8("e4m3", "float8_e4m3fn"),
    "e5m2": _fp8("e5m2", "float8_e5m2"),
    "int4": Precision("int4", "integer", 4, "s32", (64, 32), {"s32": "s4_s32"}, (8, 8, 32), "s4",
                      "IMMA.8832.S4.S4", np.uint8, np.int32, (-8, 8), "mma_m16n8k64_s4_s32",
                      sass_mma="IMMA.{m}{n}{k}.S4.S4", b_layouts=("nk", "kn"), b_units=np.uint16, widens_to="int8",
                      library="cublaslt", dtype_names=False, wmma_regs=(1, 1, 2)),
}

#: The formats NumPy and Numba lack whose bit patterns precisions' host arrays hold, by their dtype names.
ENCODINGS = frozenset(p.encoding for p in PRECISIONS.values() if p.encoding)
#: The precision of each such format (its codec: Precision.encode).
BY_ENCODING = {p.encoding: p.name for p in PRECISIONS.values() if p.encoding}

#: The precisions whose dtype names them: a's dtype -> precision (INT4's packed uint8 names none,
#: nor BF16's uint16 bits; torch's and ml_dtypes' bfloat16 name BF16).
BY_DTYPE = {**{np.dtype(p.host_dtype).name: p.name for p in PRECISIONS.values() if p.dtype_names},
            **{alias: p.name for p in PRECISIONS.values() for alias in p.dtype_aliases}}

#: The precisions W4A16 takes as activations (prepack_w4's scales, numgemm.kernel.w4a16's widening
#: of the INT4 weights): the 16-bit floats.
W4A16_ACTIVATIONS = tuple(p.name for p in PRECISIONS.values() if p.kind == "float" and p.bits == 16)
