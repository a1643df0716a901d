"""INT4 packing: how INT4 operands are laid out in memory.

Packing: two signed 4-bit values per byte along K, element 2k in the low
nibble of byte k, element 2k+1 in the high nibble. An odd K is padded with a
zero nibble.
"""

import numpy as np


def pack_int4(x):
    """Integers in [-8, 7], shape (..., K) -> uint8, shape (..., ceil(K/2))."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"pack_int4 takes integers in [-8, 7], got dtype {x.dtype}")
    if x.size and (x.min() < -8 or x.max() > 7):
        raise ValueError(f"pack_int4: values must lie in [-8, 7], got [{x.min()}, {x.max()}]")
    if x.shape[-1] % 2:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], 1), x.dtype)], axis=-1)
    nib = x.astype(np.uint8) & 0xF
    return np.ascontiguousarray(nib[..., 0::2] | (nib[..., 1::2] << 4))


def unpack_int4(p, k=None):
    """uint8 (..., ceil(K/2)) packed by pack_int4 -> int8 (..., K); K defaults
    to twice the packed width."""
    p = np.asarray(p)
    if p.dtype != np.uint8:
        raise TypeError(f"unpack_int4 takes packed uint8, got dtype {p.dtype}")
    k = 2 * p.shape[-1] if k is None else k
    if not 2 * p.shape[-1] - 1 <= k <= 2 * p.shape[-1]:
        raise ValueError(f"unpack_int4: k={k} does not fit {p.shape[-1]} packed bytes")
    nib = np.stack([p & 0xF, p >> 4], axis=-1).reshape(*p.shape[:-1], -1)[..., :k]
    return np.where(nib >= 8, nib.astype(np.int16) - 16, nib).astype(np.int8)


def pack_int4_kn(b):
    """Integers in [-8, 7], a K x N B of shape (..., K, N) -> uint16 of shape
    (..., ceil(K/4), N): the K x N INT4 layout, four consecutive k of one
    column per 16-bit unit (element 4j+q in bits 4q..4q+3 of unit j), which
    ldmatrix.trans turns into mma fragments. It is pack_int4 of B's transpose,
    read as 16-bit units and transposed back. K is padded with zeros."""
    b = np.asarray(b)
    pad = -b.shape[-2] % 4
    if pad:
        b = np.concatenate([b, np.zeros((*b.shape[:-2], pad, b.shape[-1]), b.dtype)], axis=-2)
    packed = pack_int4(np.swapaxes(b, -1, -2))            # (..., N, K/2) bytes
    return np.ascontiguousarray(np.swapaxes(packed.view(np.uint16), -1, -2))


def unpack_int4_kn(units, k=None):
    """uint16 (..., ceil(K/4), N) from pack_int4_kn -> int8 (..., K, N)."""
    units = np.asarray(units)
    if units.dtype != np.uint16:
        raise TypeError(f"unpack_int4_kn takes uint16 units, got dtype {units.dtype}")
    packed = np.ascontiguousarray(np.swapaxes(units, -1, -2)).view(np.uint8)
    k = 4 * units.shape[-2] if k is None else k
    if not 4 * units.shape[-2] - 3 <= k <= 4 * units.shape[-2]:
        raise ValueError(f"unpack_int4_kn: k={k} does not fit {units.shape[-2]} rows of units")
    return np.swapaxes(unpack_int4(packed)[..., :k], -1, -2)
