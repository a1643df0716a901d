"""numgemm's kernel builder: a config in, a Numba kernel out.

    skeleton.py        the kernel: tile walk, stage ring, prologue, k loop,
                       reduction, store; it reads the two seams only
    seams.py           WarpRoutine and CopyRoutine
    warp_mma.py        ldmatrix + mma.sync (ptx_asm/)
    warp_wmma.py       WMMA (baselines/)
    copy_cp_async.py   cp.async, each thread its 16-byte pieces
    copy_widen.py      INT4 widened to s8 on its way into shared memory
    copy_tma.py        the TMA unit, an mbarrier per stage (sm_90)
    copy_threads.py    what the two per-thread copy paths share
    dp4a.py            INT8 on the CUDA cores (no tensor cores, no seams)
    regs.py            Numba register plumbing (getters, setters, generated code)
"""

import functools

from numba import cuda, types

from ..sass import build
from ..toolchain import has_native_s4_mma, parse_target
from . import copy_cp_async, copy_tma, copy_widen, dp4a, skeleton, warp_mma, warp_wmma
from .regs import OUT, i32, u8, u32, u64

#: Which file builds a config's warp routine (by op) and copy routine (by copy;
#: INT4 with unpack="tile" widens on its way in).
WARP_ROUTINES = {"mma": warp_mma.routine, "wmma": warp_wmma.routine}
COPY_ROUTINES = {"cp_async": copy_cp_async.routine, "tma": copy_tma.routine, "widen": copy_widen.routine}


def argtypes(cfg):
    """Numba types of the kernel's arguments: A, B as bytes (dp4a: 32-bit
    words), C, M, N, K, KB, NB, c_aligned, and the global address of A's and
    B's tensor maps (copy="tma"; else 0); see skeleton.gemm_kernel."""
    arr = lambda t: types.Array(t, 3, "A")  # noqa: E731 - any strides
    ab = u32 if cfg.op == "dp4a" else u8
    return (arr(ab), arr(ab), arr(OUT[cfg.acc]), i32, i32, i32, i32, i32, i32, u64)


def kernel_function(cfg):
    """The Python function of cfg's kernel, ready for cuda.jit or an offline build."""
    if cfg.op == "dp4a":
        return dp4a.kernel_function(cfg)
    # Shared memory and the warps see cfg.shared_view: cfg itself, or (unpack="tile") its s8 tiles.
    copy = "widen" if cfg.unpack == "tile" and cfg.copy == "cp_async" else cfg.copy
    return skeleton.kernel_function(cfg, WARP_ROUTINES[cfg.op](cfg.shared_view), COPY_ROUTINES[copy](cfg))


def build_config(cfg, target="sm_89"):
    """Offline build (no GPU) of cfg's kernel for target: SASS and resources."""
    why = cfg.unsupported(target, launch=False)
    if why:
        raise ValueError(why)
    return build(kernel_function(cfg), argtypes(cfg), target, name=cfg.name,
                 launch_bounds=(cfg.threads, cfg.min_blocks))


@functools.cache
def compiled(cfg):
    """cfg's kernel compiled for the current GPU (a numba-cuda dispatcher)."""
    return cuda.jit(argtypes(cfg), launch_bounds=(cfg.threads, cfg.min_blocks))(kernel_function(cfg))


def expected_sass(cfg, target):
    """(opcode prefix the kernel's SASS must hold, whether calls are expected).

    s4 tensor-core instructions are native on sm_80/86/89; on sm_90 ptxas
    emulates them with s8 IMMA behind called routines (a fact about Hopper,
    reported by numgemm.inspect.s4_note)."""
    if cfg.op == "dp4a":
        return "IDP.4A.S8.S8", False
    s4 = cfg.precision == "int4" and cfg.unpack == "none"
    if s4 and not has_native_s4_mma(parse_target(target)):
        return "IMMA", True                 # the emulation's s8 IMMA, behind calls
    if cfg.op == "wmma":
        return cfg.prec.wmma_sass, False
    m, n, k = cfg.op_shape
    if cfg.precision == "fp16":
        return f"HMMA.{m}{n}{k}.{'F16' if cfg.acc == 'f16' else 'F32'}", False
    if cfg.precision == "int8" or cfg.unpack != "none":
        return f"IMMA.{m}{n}{32 if cfg.unpack != 'none' else k}.S8.S8", False
    return f"IMMA.{m}{n}{k}.S4.S4", False
