"""Triton's GEMM, a bench peer where Triton is installed (imported only then).

One tl.dot kernel, Triton's own tutorial form, for INT8 (s32 C), BF16 and
FP8 (float32 sums, C in the C tensor's dtype); Triton lowers tl.dot to
wgmma on Hopper. FP8 keeps its sum in tl.dot's accumulator; INT8 and BF16
add each dot's product after it (IN_DOT). Each precision runs with one fixed tiling (TILINGS): INT8's
is the best a config sweep found on an H200 (docs/findings.md); BF16's and
FP8's are the tutorial's Hopper tilings for 16-bit and 8-bit operands.
"""

import triton
import triton.language as tl

#: (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps) by operand dtype; tile rows grouped by GROUP for L2.
TILINGS = {"int8": (128, 128, 128, 3, 4), "bfloat16": (128, 256, 64, 3, 8), "float8_e4m3fn": (128, 256, 128, 3, 8),
           "float8_e5m2": (128, 256, 128, 3, 8)}
GROUP = 8


def name(dtype):
    """The peer's name in the bench: the operand dtype and its tiling."""
    bm, bn, bk, stages, warps = TILINGS[dtype]
    return f"triton_{dtype} ({bm}x{bn}x{bk}, {stages} stages, {warps} warps)"


@triton.jit
def _mm(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EXACT: tl.constexpr,
        IN_DOT: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP_M * tiles_n
    first = pid // width * GROUP_M
    size = min(tiles_m - first, GROUP_M)
    pm, pn = first + (pid % width) % size, (pid % width) // size
    rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
    pa = a + rm[:, None] * sam + rk[None, :] * sak
    pb = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.int32 if EXACT else tl.float32)
    zero = 0 if EXACT else 0.0          # (an int cannot be cast to FP8)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < left), other=zero)
        y = tl.load(pb, mask=(rk[:, None] < left) & (rn[None, :] < N), other=zero)
        if IN_DOT:                      # FP8: the sum kept in the instruction's accumulators (findings)
            acc = tl.dot(x, y, acc)
        else:                           # INT8: tl.dot takes no int32 accumulator; BF16: faster added after
            acc += tl.dot(x, y)
        pa += BK * sak
        pb += BK * sbk
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def mm(a, b, c):
    """c (M x N) = a (M x K) @ b (K x N, any strides), torch tensors on the GPU
    of one dtype in TILINGS; int8's C int32, the others' any float dtype."""
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, stages, warps = TILINGS[str(a.dtype).removeprefix("torch.")]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
              BM=bm, BN=bn, BK=bk, GROUP_M=GROUP, EXACT=not a.dtype.is_floating_point,
              IN_DOT=a.dtype.itemsize == 1 and a.dtype.is_floating_point, num_warps=warps,
              num_stages=stages)
    return c
