"""Facts of the tiles that a config and the kernel code built from it both
read: the 128-byte swizzle of shared rows, the wgmma instructions a tile's
k step is issued in, the deepest ring of stages. Here, below both, so that
the kernel modules need not import numgemm.config (which imports their
rules)."""

SWIZZLE_BYTES = 128         # a swizzled shared row (and a TMA box's row): the 128-byte swizzle's span
#: op="wgmma": the N of each instruction a k step issues, by the tile's bn (320, the
#: width of cuBLAS's fp16 tiles on sm_90: m64n256 and m64n64 side by side). Which N a
#: precision has routines for, in which B layout: Precision.wgmma_ns, wgmma_kn_ns, wgmma_swap_ns.
WGMMA_PARTS = {16: (16,), 32: (32,), 64: (64,), 128: (128,), 192: (192,), 256: (256,), 320: (256, 64)}
#: copy="tma": the most stages its ring of mbarriers may have (cp.async kernels: 5).
RING_STAGES = 16


def swizzled_offset(offset):
    """Where byte `offset` of a tile of 128-byte rows lies in the 128-byte
    swizzle: 16-byte chunk c of row r at chunk c ^ (r % 8)."""
    return offset ^ (((offset >> 7) & 7) << 4)
