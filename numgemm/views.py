"""Device arrays as numgemm's kernels take them: operands of any framework
as Numba views, batched, their layout read from their strides, as bytes,
rows padded to whole 16-byte copies where they are not, and C checked or
made."""

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.devicearray import DeviceNDArray

from . import checks, driver, frameworks, registry
from .precision import ENCODINGS, PRECISIONS


def device(x, name):
    if isinstance(x, np.ndarray):
        if x.dtype.name in ENCODINGS:       # ml_dtypes' bfloat16, float8_* (Numba has no such type): their bits
            x = x.view(f"u{x.dtype.itemsize}")
        # A transposed (Fortran-order) array keeps its layout on the device.
        if x.flags.c_contiguous:
            return cuda.to_device(x)
        if np.swapaxes(x, -1, -2).flags.c_contiguous:
            return transposed(cuda.to_device(np.swapaxes(x, -1, -2)))
        return cuda.to_device(np.ascontiguousarray(x))
    return frameworks.numba_view(x)


def view(x, shape, strides, dtype=None):
    dtype = np.dtype(dtype or x.dtype)
    return DeviceNDArray(shape, strides, dtype, gpu_data=x.gpu_data)


def as_batch(x):
    return view(x, (1, *x.shape), (0, *x.strides))


def transposed(x):
    """x with its last two axes exchanged, as a view (no copy) of a Numba device
    array: B as gemm's "nk" layout is transposed(bt) for a row-major N x K bt."""
    x = frameworks.numba_view(x)
    shape, strides = list(x.shape), list(x.strides)
    shape[-2:], strides[-2:] = shape[:-3:-1], strides[:-3:-1]
    return view(x, tuple(shape), tuple(strides))


def layout(b, name, wanted):
    """B's layout by its strides: "kn" (its rows contiguous) or "nk" (its
    columns). A one-wide B (N or K of 1) has both; then `wanted` decides."""
    item = b.dtype.itemsize
    kn = b.strides[2] == item or b.shape[2] == 1
    nk = b.strides[1] == item or b.shape[1] == 1
    if kn and nk:
        return wanted
    if kn or nk:
        return "kn" if kn else "nk"
    raise ValueError(f"{name} must be row-major (K x N) or the transpose of a row-major N x K "
                     f"array; got strides {b.strides}")


def wanted_layout(precision, cfg, b_units):
    """The layout a one-wide B is taken in: the named kernel's; INT4's by its
    dtype (uint8: packed N x K, transposed; uint16: K x N units); else the
    layout of the precision's kernels."""
    if cfg is not None:
        return cfg.b_layout
    if PRECISIONS[precision].b_units is not None:
        return "kn" if b_units else "nk"
    return registry.choice_layout(precision)


def unit_strides(x, layout):
    """x (batch, rows, cols) with the strides of its one-long axes made those
    of a packed array in layout ("kn": row-major, "nk": column-major): such an
    axis is never stepped along, but its stride is a pitch the kernel and the
    TMA descriptors read."""
    item, strides = x.dtype.itemsize, list(x.strides)
    inner, outer = (2, 1) if layout == "kn" else (1, 2)
    if x.shape[inner] == 1:
        strides[inner] = item
    if x.shape[outer] == 1:
        strides[outer] = x.shape[inner] * strides[inner]
    return x if tuple(strides) == tuple(x.strides) else view(x, x.shape, tuple(strides))


def row_major(a, name):
    if a.strides[2] != a.dtype.itemsize:
        raise ValueError(f"{name} must be row-major (its last axis contiguous); got strides {a.strides}")


def as_bytes(x):
    """A (batch, rows, bytes) uint8 view of x."""
    item = x.dtype.itemsize
    return view(x, (x.shape[0], x.shape[1], x.shape[2] * item),
                 (x.strides[0], x.strides[1], 1), np.uint8)


def aligned_rows(x, alloc):
    """(x, None) for x, a (batch, rows, bytes) uint8 view, when its rows are
    whole 16-byte copies at 16-byte addresses; otherwise (a new array of
    rows zero-padded to a multiple of 16 bytes, (x, that array)): the copy
    the plan's launch makes (kernel.pad_rows)."""
    ptr = x.device_ctypes_pointer.value or 0
    pitches = [s for s, n in zip(x.strides[:2], x.shape[:2]) if n > 1]   # strides that are used
    if x.shape[2] % 16 == 0 and ptr % 16 == 0 and all(s % 16 == 0 for s in pitches):
        return x, None
    padded = alloc.empty((x.shape[0], x.shape[1], -(-x.shape[2] // 16) * 16), np.uint8)[1]
    return padded, (x, padded)


def vectors(given, stream):
    """The epilogue's scale_a, scale_b and bias (checks._epilogue passed
    them) as 1-D Numba views of float32, a row or column of C's each (or one
    value), and those that are the plan's own: a scale given as a number,
    copied to the GPU (which a stream's graph capture cannot do)."""
    out, owned = [], []
    for x in given:
        if checks.is_number(x):
            if driver.capturing(stream):
                raise RuntimeError(f"a scale given as a number ({x}) is copied to the GPU, which a CUDA graph's "
                                   "capture does not allow: pass it as a float32 GPU array")
            x = cuda.to_device(np.full(1, x, np.float32))
            owned.append(x)
        elif x is not None:
            x = device(x, "vector")
            n = max(x.shape, default=1)
            long = max(range(x.ndim), key=lambda i: x.shape[i], default=None)
            x = view(x, (n,), (x.strides[long] if long is not None else 4,))
        out.append(x)
    return tuple(out), tuple(owned)


def as_bits(c):
    return view(c, c.shape, c.strides, np.uint16)


def output(out, batched, batch, M, N, dtype, host, alloc=None, encoding=""):
    """(C as the kernel takes it, (batch, M, N); whether it goes back to the
    host; what the call returns): out, checked, or a new C from alloc's
    framework (NumPy inputs: a Numba array copied back); encoding: the
    format whose bit patterns dtype holds (BF16's C: torch allocates bfloat16)."""
    shape = (batch, M, N) if batched else (M, N)
    if out is None:
        result, dev = alloc.empty(shape, dtype, encoding) if not host else (None, cuda.device_array(shape, dtype))
        return (dev if batched else dev.reshape(1, M, N)), host, dev if host else result
    dev = frameworks.numba_view(out)            # its shape, and that it is no NumPy array: checks.check_out
    if np.dtype(dev.dtype) != np.dtype(dtype):
        raise TypeError(f"out has dtype {dev.dtype}; expected {np.dtype(dtype).name}")
    if dev.strides[-1] != dev.dtype.itemsize:
        raise ValueError(f"out must be row-major (its last axis contiguous); got strides {dev.strides}")
    return (dev if batched else as_batch(dev)), False, out
