"""A plan's first kernel where an operand's rows are not whole 16-byte copies.

The GEMM kernels read each row of A and B as 16-byte copies at 16-byte
addresses. An operand whose rows are not (INT8's K not a multiple of 16,
FP16's not of 8, an odd number of packed INT4 bytes, a view at an odd
address) is copied into rows zero-padded to a multiple of 16 bytes. The copy
is part of the plan's launch, not of its making, so that a kept plan and a
repeated call read the values the caller's arrays hold when they run.
"""

from dataclasses import dataclass

from numba import cuda, types

from .regs import u8

THREADS = 256


@dataclass(frozen=True)
class PadRows:
    """The padding kernel, as numgemm's kernel cache keys it (cache.key reads
    describe()); one for every operand, of any dtype, as bytes."""

    threads = THREADS

    @property
    def name(self):
        return "pad_rows"

    def describe(self):
        return {"kernel": self.name}

    def argtypes(self):
        """src (batch, rows, bytes), any strides; dst (batch, rows, padded bytes), contiguous."""
        return types.Array(u8, 3, "A"), types.Array(u8, 3, "C")

    def function(self):
        return _pad_rows

    def grid(self, dst):
        return -(-dst.size // THREADS), 1, 1


def _pad_rows(src, dst):
    i = cuda.grid(1)            # one byte of dst; 64-bit: an operand may pass 2**31 bytes
    if i < dst.size:
        zr, c = i // dst.shape[2], i % dst.shape[2]
        z, r = zr // dst.shape[1], zr % dst.shape[1]
        dst[z, r, c] = src[z, r, c] if c < src.shape[2] else 0
