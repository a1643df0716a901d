"""Triton's int8 GEMM, a bench peer where Triton is installed (imported only then).

One tl.dot kernel with a fixed tiling: 128 x 128 x 128 blocks, 3 stages, 4
warps, tile rows grouped by 8 for L2, the best a config sweep found on an
H200 (docs/findings.md); Triton lowers its tl.dot to wgmma on Hopper.
"""

import triton
import triton.language as tl

#: The tiling the peer runs with (its name in the bench says it).
BLOCK_M, BLOCK_N, BLOCK_K, STAGES, WARPS, GROUP = 128, 128, 128, 3, 4, 8
NAME = f"triton_int8 ({BLOCK_M}x{BLOCK_N}x{BLOCK_K}, {STAGES} stages, {WARPS} warps)"


@triton.jit
def _int8_mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP_M * tiles_n
    first = pid // width * GROUP_M
    size = min(tiles_m - first, GROUP_M)
    pm, pn = first + (pid % width) % size, (pid % width) // size
    rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
    pa = a + rm[:, None] * sam + rk[None, :] * sak
    pb = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0)
        y = tl.load(pb, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0)
        acc += tl.dot(x, y)
        pa += BK * sak
        pb += BK * sbk
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def int8_mm(a, b, c):
    """c (int32, M x N) = a (int8, M x K) @ b (int8, K x N, any strides), torch tensors on the GPU."""
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _int8_mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                   BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP_M=GROUP, num_warps=WARPS, num_stages=STAGES)
    return c
