"""numgemm: prototype tensor-core GEMM kernels in Python with Numba, and
measure when hand-written PTX beats the compiler's WMMA path, and why.

The warp-level routines come from ptx_asm/ (hand-written PTX) and baselines/
(WMMA in CUDA C); numgemm.primitives turns them into Numba callables.
"""

from . import primitives
from .quant import pack_int4, unpack_int4

__all__ = ["pack_int4", "primitives", "unpack_int4"]
