"""INT8 on the CUDA cores: the reference point below the tensor-core kernels.

One thread per output, a row of A against a row of B (N x K), four bytes
per dp4a; no shared memory, so no copy routine and no warp routine: the
whole kernel is this function.
"""

import numpy as np
from numba import cuda

from .. import primitives as P
from .regs import divmod32, i32


def kernel_function(cfg):
    dp4a = P.routines(cfg.linkage).dp4a_s8
    bm, bn = cfg.bm, cfg.bn

    def gemm_kernel(A, B, C, M, N, K, KB, NB, c_aligned, tmaps):
        tid = cuda.threadIdx.x
        tm, tn = divmod32(cuda.blockIdx.x, (N + bn - 1) // bn)
        row, col = tm * bm + tid // bn, tn * bn + tid % bn
        z = cuda.blockIdx.z
        zb = z if B.shape[0] > 1 else 0
        if row < M and col < N:
            acc = i32(0)
            for w in range(KB >> 2):
                acc = dp4a(A[z, row, w], B[zb, col, w], acc)
            C[z, row, col] = acc

    gemm_kernel.__name__ = cfg.name
    return gemm_kernel


def rules(cfg):
    """What a dp4a config needs: INT8, B as N x K, one thread an output of
    the block tile, all of K summed by that thread."""
    err = []
    if cfg.prec.kind != "integer" or cfg.prec.bits != 8 or cfg.bm * cfg.bn != cfg.threads or cfg.b_layout != "nk":
        err.append("dp4a is int8 with B as N x K and one thread per output (bm * bn threads)")
    if cfg.split_k > 1:
        err.append("split_k > 1 is for the mma, WMMA and wgmma kernels (dp4a sums all of K itself)")
    return err


def host(p):
    """The plan's side (plans.Parts): dp4a reads A and B as 32-bit words, four int8 each."""
    if p.cfg.op == "dp4a":
        p.A, p.B = (p.view(x, (x.shape[0], x.shape[1], x.shape[2] // 4), (*x.strides[:2], 4), np.uint32)
                    for x in (p.A, p.B))
