"""INT4 packing and the exact references every kernel is checked against.

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


def reference(a, b, precision, b_layout="kn", k=None):
    """The exact product every kernel is checked against.

    Integers in int64 (exact), fp16 in float64. a is (..., M, K); b is
    (..., K, N) for b_layout 'kn' or (..., N, K) for 'nk'. INT4 operands come
    packed along K (a: (..., M, K/2); b: (..., N, K/2) or (..., K/2, N)).
    """
    b_nk = np.asarray(b) if b_layout == "nk" else np.swapaxes(np.asarray(b), -1, -2)
    if precision == "int4":
        a, b_nk = unpack_int4(a, k), unpack_int4(b_nk, k)
    wide = np.float64 if precision == "fp16" else np.int64
    return np.asarray(a).astype(wide) @ np.swapaxes(b_nk.astype(wide), -1, -2)
