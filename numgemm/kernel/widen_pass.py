"""unpack="pass"'s first kernel: INT4's B widened to s8 once per call.

The wgmma kernel that follows (KernelConfig.unpack="pass") has TMA copy B
from the workspace this kernel writes, as INT8 kernels copy theirs, so that
no thread of it widens B; only A's s4 reaches its stages narrow, for each
consumer to widen its own rows in registers. Widening in the GEMM's
producer costs a trip of every s4 byte through the producer's registers,
once for each tile row that reads it (docs/findings.md, "Widening in the
producer is bound by its global loads"); here each byte makes it once.

One thread a 16-byte piece of a row of B (32 s4, one wgmma k step): it
loads the piece and stores its 32 bytes of s8, the four words' even
elements and then their odd ones (numgemm_unpack_s4_s8's order), the order
in which a consumer's A registers hold the k step
(warp_wgmma._a_from_registers): A and B are permuted alike along K, so
their products meet. Each s4 becomes the s8 of its value: exact.
"""

from dataclasses import dataclass

import numpy as np
from numba import cuda, types

from .. import primitives as P
from ..tiles import SWIZZLE_BYTES
from .regs import divmod32, u8, u64

THREADS = 256


@dataclass(frozen=True)
class WidenPass:
    """The widening kernel, as numgemm's kernel cache keys it (cache.key reads
    describe()); one for every unpack="pass" config."""

    threads = THREADS

    @property
    def name(self):
        return "widen_pass_s4_s8"

    def describe(self):
        return {"kernel": self.name}

    def argtypes(self):
        """B (batch, N, NB): N x K s4, rows 16-byte aligned, any strides;
        W (batch, N, 2 NB), contiguous."""
        return types.Array(u8, 3, "A"), types.Array(u8, 3, "C")

    def function(self):
        return _widen_pass

    def grid(self, B):
        return -(-B.shape[0] * B.shape[1] * (B.shape[2] // 16) // THREADS), 1, 1


def _widen_pass(B, W):
    i = cuda.grid(1)
    pieces = B.shape[2] >> 4
    if i < B.shape[0] * B.shape[1] * pieces:
        zn, c = divmod32(i, pieces)
        z, n = divmod32(zn, B.shape[1])
        src = P.global_addr(B, 0) + z * B.strides[0] + n * B.strides[1] + c * 16
        w = _ld(src, 1)
        x0, x1, x2, x3 = _widen(w[0]), _widen(w[1]), _widen(w[2]), _widen(w[3])
        dst = P.global_addr(W, 0) + u64(i) * u64(32)       # W's rows are B's pieces, 32 bytes each
        _st(dst, (x0[0], x1[0], x2[0], x3[0]))
        _st(dst + u64(16), (x0[1], x1[1], x2[1], x3[1]))


_ptx = P.routines("inline")
_ld, _st, _widen = _ptx.ld_global_cg_v4, _ptx.st_global_v4_b32, _ptx.unpack_s4_s8


def rules(cfg):
    """unpack="pass": the GEMM's k-tile is 64 bytes of s4, B N x K."""
    if cfg.unpack == "pass" and (cfg.bk_bytes * 2 != SWIZZLE_BYTES or cfg.b_layout != "nk"):
        return ["unpack=pass: a k-tile of 64 bytes of s4 (128 of s8), B as N x K"]
    return []


def host(p):
    """The plan's side (plans.Parts): with unpack="pass" the kernel's B side is
    the s8 that this kernel writes first, into a workspace of the plan's."""
    if p.cfg.unpack == "pass":
        B = p.B
        p.widened = (B, p.new((B.shape[0], B.shape[1], 2 * B.shape[2]), np.uint8))
        p.B = p.widened[1]
