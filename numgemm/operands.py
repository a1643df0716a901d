"""Operands, references, poisoned outputs and comparisons: how numgemm checks
a kernel. The bench, the tests and the peers all draw and compare here.

Values are drawn fresh (never zeros): the floats standard normal (BF16 as
its bit patterns, Precision.encode), INT8 in [-128, 128), INT4 in [-8, 8).
B's values are kept as K x N for the floats and as bt, N x K, for the
integer precisions (their kernels take B transposed); in_layout() turns
them into what a kernel of a given B layout takes (INT4 packed). Integers
are compared exactly with an int64 reference, the floats by relative
Frobenius error against float64 (Precision.tolerance); outputs are
poisoned first (Precision.poison) so that an element never written fails.
"""

import numpy as np

from .precision import BY_ENCODING, NARROW, PRECISIONS
from .quant import pack_int4, pack_int4_kn, unpack_int4, unpack_int4_kn


def values(precision, batch, M, N, K, rng):
    """(a, b): a (batch, M, K); b (batch, K, N) for the floats, bt (batch, N, K) for the integers."""
    prec = PRECISIONS[precision]
    if not prec.exact:
        a = prec.encode(rng.standard_normal((batch, M, K), dtype=np.float32))
        return a, prec.encode(rng.standard_normal((batch, K, N), dtype=np.float32))
    lo, hi = prec.values
    return rng.integers(lo, hi, (batch, M, K), dtype=np.int8), rng.integers(lo, hi, (batch, N, K), dtype=np.int8)


def expected(precision, a, b):
    """The exact product of values(): float64 for the floats, int64 for the integers."""
    prec = PRECISIONS[precision]
    return prec.decode(a) @ prec.decode(b if not prec.exact else np.swapaxes(b, -1, -2))


def in_layout(precision, layout, a, b):
    """Host (a, b) as gemm() takes them for a kernel with this B layout: b a
    K x N view (the transpose of bt for "nk"); INT4 packed along K (K x N:
    pack_int4_kn's 16-bit units)."""
    prec = PRECISIONS[precision]
    if not prec.exact:              # b is K x N: as it is, or a view of its transpose (nk)
        return a, b if layout == "kn" else np.swapaxes(np.ascontiguousarray(np.swapaxes(b, -1, -2)), -1, -2)
    if prec.packed:
        a = pack_int4(a)
        if layout == "kn":
            return a, pack_int4_kn(np.swapaxes(b, -1, -2))
        b = pack_int4(b)
    return a, np.swapaxes(b, -1, -2)


def to_device(precision, layout, a, b):
    """in_layout() on the GPU: B transposed is a view of a row-major N x K array."""
    from numba import cuda

    from .api import transposed

    a, b = in_layout(precision, layout, a, b)
    if layout == "kn":
        return cuda.to_device(a), cuda.to_device(np.ascontiguousarray(b))
    return cuda.to_device(a), transposed(cuda.to_device(np.ascontiguousarray(np.swapaxes(b, -1, -2))))


def kernel_operands(cfg, batch, M, N, K, rng):
    """Fresh host operands for cfg's kernel, in its B layout, and their exact product."""
    a, b = values(cfg.precision, batch, M, N, K, rng)
    return (*in_layout(cfg.precision, cfg.b_layout, a, b), expected(cfg.precision, a, b))


#: The activations of gemm()'s epilogue (numgemm.kernel.epilogue), in float64.
ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0),
               "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3))),
               "silu": lambda x: x * _sigmoid(x)}


def _sigmoid(x):
    """1 / (1 + e^-x), by e^-|x| so that no exp overflows (a warning in every large negative sum)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def through_epilogue(ref, scale_a=None, scale_b=None, bias=None, activation=None, at=None):
    """An exact product ref (..., M, N) through gemm()'s epilogue, in float64:
    activation(scale_a * scale_b * ref + bias), scale_a one value or one a
    row, scale_b one value or one a column, bias one a column. With at (the
    (z, i, j) of sample_expected), ref holds those entries only. Without
    any of them, ref as it is (an integer product stays exact)."""
    def factor(x, axis):
        x = np.asarray(x, np.float64).reshape(-1)
        if x.size == 1:
            return x[0]
        return x[at[1 + axis]] if at is not None else x.reshape(-1, 1) if axis == 0 else x
    if scale_a is None and scale_b is None and bias is None and not activation:
        return ref
    out = np.asarray(ref, np.float64)
    for x, axis in ((scale_a, 0), (scale_b, 1)):
        if x is not None:
            out = out * factor(x, axis)
    if bias is not None:
        out = out + factor(bias, 1)
    return ACTIVATIONS[activation](out) if activation else out


def epilogue_vectors(fields, M, N, rng):
    """Fresh (scale_a, scale_b, bias) for an epilogue's fields (a dict, or a
    KernelConfig's), each None where it has none: scales in [0.5, 2), one
    value or one a row / column of C; the bias standard normal."""
    get = fields.get if isinstance(fields, dict) else lambda k: getattr(fields, k)
    size = {"tensor": 1, "row": M, "col": N}
    sa, sb = (rng.uniform(0.5, 2.0, size[get(k)]).astype(np.float32) if get(k) else None
              for k in ("scale_a", "scale_b"))
    return sa, sb, rng.standard_normal(N, dtype=np.float32) if get("bias") else None


def poisoned(precision, shape, dtype=None):
    """A device output of this shape and dtype (a kernel's KernelConfig.c_dtype;
    None: the precision's) filled with the precision's poison (BF16's bits
    of it where C holds them)."""
    from numba import cuda

    dtype = np.dtype(dtype or PRECISIONS[precision].out_dtype)
    return cuda.to_device(np.full(shape, poison(precision, dtype), dtype))


def _reader(prec, dtype):
    """The precision that reads a C of dtype: prec's own, or for an integer
    precision's sums through an epilogue (float32, bfloat16's bits, float16)
    a float precision with every narrow format."""
    if not prec.exact or np.dtype(dtype).kind == "i":
        return prec
    return next(p for p in PRECISIONS.values() if set(p.narrows) == set(NARROW))


def poison(precision, dtype):
    """The precision's poison as a C of dtype holds it (bfloat16's bits of NaN in uint16)."""
    prec = _reader(PRECISIONS[precision], dtype)
    encoding = prec.encoding_of(dtype)
    return PRECISIONS[BY_ENCODING[encoding]].encode(np.float32(prec.poison)) if encoding else prec.poison


def mismatch(got, ref, precision, acc=""):
    """Why got differs from the reference beyond the precision's tolerance, or
    None where it matches: integers entry for entry, the floats by relative
    error; an integer precision's C through an epilogue (float32, or
    bfloat16's bits or float16) as the floats are, within f32's or its
    format's rounding."""
    prec = PRECISIONS[precision]
    got = np.asarray(got)
    if prec.exact and got.dtype.kind == "i":        # its exact sums (int32, or a reference's int64)
        bad = np.flatnonzero(got.astype(np.int64) != ref)
        if bad.size:
            i = tuple(int(x) for x in np.unravel_index(bad[0], ref.shape))
            return f"{bad.size} of {ref.size} entries differ; first at {i}: {got[i]} != {ref[i]}"
        return None
    prec = _reader(prec, got.dtype)
    narrow = prec.narrow_of(got.dtype)         # C rounded to a narrow format, or ""
    got = prec.decode(got)
    if not np.all(np.isfinite(got)):
        return f"{np.count_nonzero(~np.isfinite(got))} entries are not finite (unwritten or overflowed)"
    # an entry may be off by its format's grain at zero: f32 arithmetic flushes a sigmoid below its
    # least normal 2**-126 to zero, times v (< 2**8 where it is flushed: GELU's tail is -2e-38 at -10,
    # SiLU's -1e-36 at -87); float16 C rounds to its least subnormal
    grain = 2.0**-24 if narrow == "f16" else 2.0**-118
    off = np.maximum(np.abs(got - ref) - grain, 0)
    err = np.linalg.norm(off) / max(np.linalg.norm(ref), np.finfo(np.float64).tiny)
    tol = prec.tolerance(acc, narrow)
    return None if err <= tol else f"relative error {err:.3g} > {tol:.3g}"


def matches(got, ref, precision, acc=""):
    return mismatch(got, ref, precision, acc) is None


def sample_expected(a, b, precision, rng, shape, count=256):
    """(index, exact dot products) of count random entries of a product of
    values() (a (batch, M, K); b as values() returns it) of the given output shape."""
    z, i, j = (rng.integers(0, n, count) for n in shape)
    prec = PRECISIONS[precision]
    rb = b[z, j, :] if prec.exact else b[z, :, j]
    return (z, i, j), np.einsum("sk,sk->s", prec.decode(a[z, i, :]), prec.decode(rb))


def sample_matches(out, a, b, precision, rng, acc="", count=256, epilogue=None):
    """count random entries of a large output (host) against exact dot
    products; epilogue: ((scale_a, scale_b, bias), activation) they went through."""
    at, ref = sample_expected(a, b, precision, rng, out.shape, count)
    if epilogue is not None:
        ref = through_epilogue(ref, *epilogue[0], epilogue[1], at=at)
    return matches(np.asarray(out)[at], ref, precision, acc)


def reference(a, b, precision, b_layout="kn", k=None):
    """The exact product of operands as gemm() takes them.

    Integers in int64 (exact), the floats in float64. a is (..., M, K); b is
    (..., K, N) for b_layout 'kn' or (..., N, K) for 'nk'. INT4 operands come
    packed: a (..., M, K/2); b (..., N, K/2) for 'nk', or pack_int4_kn's
    (..., K/4, N) uint16 units for 'kn'.
    """
    prec = PRECISIONS[precision]
    units = prec.b_units is not None and b_layout == "kn"      # 16-bit units of 4 k
    if units:
        b = unpack_int4_kn(b, k)
    b_nk = np.asarray(b) if b_layout == "nk" else np.swapaxes(np.asarray(b), -1, -2)
    if prec.packed:
        a = unpack_int4(a, k)
        if not units:
            b_nk = unpack_int4(b_nk, k)
    return prec.decode(a) @ np.swapaxes(prec.decode(b_nk), -1, -2)
