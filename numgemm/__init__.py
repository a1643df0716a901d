"""numgemm: prototype tensor-core GEMM kernels in Python with Numba, and
measure when hand-written PTX beats the compiler's WMMA path, and why.

The warp-level routines come from ptx_asm/ (hand-written PTX) and baselines/
(WMMA in CUDA C); numgemm.primitives turns them into Numba callables.
"""

from . import primitives, registry
from .api import gemm, plan_gemm, transposed
from .config import KernelConfig
from .quant import PackedW4, pack_int4, pack_int4_kn, prepack_w4, unpack_int4, unpack_int4_kn

__all__ = ["KernelConfig", "PackedW4", "gemm", "pack_int4", "pack_int4_kn", "plan_gemm", "prepack_w4", "primitives",
           "registry", "transposed", "unpack_int4", "unpack_int4_kn"]


def __getattr__(name):
    # numgemm.torch (PyTorch operators) loads PyTorch: only when asked for.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'numgemm' has no attribute {name!r}")
