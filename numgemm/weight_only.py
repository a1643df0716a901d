"""W4A16's call: activations (..., K) times a PackedW4's N x K weight.

numgemm.gemm(x, w) comes here when w is a numgemm.quant.PackedW4: x float16
(w made with float16 scales) or bfloat16 (torch's, ml_dtypes', or uint16
bits), C (..., N) in x's format, or float32 (out_dtype). The kernel is
numgemm.kernel.w4a16's (mma.sync), or on Hopper from WGMMA_ROWS rows
numgemm.kernel.w4a16_wgmma's, chosen by M and N, built once and kept in
numgemm's kernel cache; the weight's device copies are held by the PackedW4.
"""

import contextlib
import dataclasses
import functools

import numpy as np
from numba import cuda

from . import checks, frameworks, tensormap, views
from .launches import Address, Launch
from .precision import NARROW, PRECISIONS
from .kernel.w4a16_wgmma import W4A16Wgmma
from .quant import GROUP, PackedW4, no_zeros

#: out_dtype -> the kernel's C format, by the weight's precision (None: the activations' own).
_OUT = {"float32": "f32", **{n.dtype_name: n.name for n in NARROW.values()}}


class Resident:
    """A PackedW4's arrays already on a GPU, held by their owner (a torch
    module's buffers: numgemm.torch.W4Linear): words (N/8, K/128, 32, 4) of
    4 bytes, scales (K/128, N) of 2, zeros (K/128, N) of 1 or None, and
    optionally wgmma_words (ceil(N/16), K/128, 2, 32, 4) of 4 bytes, as
    PackedW4's, in any framework; what gemm() takes in a PackedW4's place
    (without wgmma_words, W4A16 runs on mma.sync at every M)."""

    def __init__(self, words, scales, zeros, precision, wgmma_words=None):
        shapes = [tuple(x.shape) for x in (words, scales)]
        n, k = 8 * shapes[0][0], GROUP * shapes[0][1] if len(shapes[0]) == 4 else 0
        if len(shapes[0]) != 4 or shapes[0][2:] != (32, 4) or shapes[1] != (k // GROUP, n) or \
                (zeros is not None and tuple(zeros.shape) != shapes[1]):
            raise ValueError(f"W4A16's resident weight: words (N/8, K/128, 32, 4), scales and zeros (K/128, N); "
                             f"got {shapes[0]}, {shapes[1]}, {None if zeros is None else tuple(zeros.shape)}")
        wgmma_shape = (-(-n // 16), k // GROUP, 2, 32, 4)
        if wgmma_words is not None and tuple(wgmma_words.shape) != wgmma_shape:
            raise ValueError(f"W4A16's resident weight: wgmma_words {wgmma_shape} for words {shapes[0]}, "
                             f"got {tuple(wgmma_words.shape)}")
        self.words, self.scales, self.zeros, self.precision, self.n, self.k = words, scales, zeros, precision, n, k
        self.wgmma_words = wgmma_words

    def device(self):
        """(words, scales, zeros) as the kernel takes them: Numba views of
        the owner's arrays (zeros: a one-byte array where there are none)."""
        views = [frameworks.numba_view(x) for x in (self.words, self.scales)]
        return (views[0].view(np.uint32), views[1].view(np.uint16),
                no_zeros() if self.zeros is None else frameworks.numba_view(self.zeros).view(np.uint8))

    def device_wgmma(self):
        """device()'s arrays with wgmma_words in place of words."""
        return (frameworks.numba_view(self.wgmma_words).view(np.uint32), *self.device()[1:])


def checked(a, w, out, out_dtype, refused):
    """(M rows, C's format) of a valid call, else a clear
    exception, before any GPU is needed. refused: gemm()'s arguments that
    W4A16 does not take, by name, where given."""
    if not isinstance(w, (PackedW4, Resident)):
        raise TypeError(f"b must be a numgemm.quant.PackedW4 for W4A16, got {type(w).__name__}")
    given = [name for name, v in refused.items() if v is not None]
    if given:
        raise ValueError(f"W4A16 (b a PackedW4) takes a, out, out_dtype and stream only; got {', '.join(given)}")
    prec = PRECISIONS[w.precision]
    fw = frameworks.kind(a)
    if fw is None or (fw == "torch" and not a.is_cuda):
        raise TypeError(f"a must be a NumPy array or a GPU array of torch, CuPy or Numba; got {type(a).__name__}"
                        + (" on the CPU" if fw else ""))
    dtype = checks.dtype_name(a)
    allowed = (*prec.dtype_aliases, np.dtype(prec.host_dtype).name)
    if dtype not in allowed:
        raise TypeError(f"a must be {' or '.join(allowed)} for this weight (its scales are {prec.name}); "
                        f"got dtype {dtype}")
    if len(a.shape) < 1 or a.shape[-1] != w.k:
        raise ValueError(f"a must be (..., K) with K = {w.k} (the weight's), got shape {tuple(a.shape)}")
    checks.check_out(out, (*a.shape[:-1], w.n))
    own = prec.narrow
    fmt = own if out_dtype is None else _OUT.get(_name(out_dtype))
    if fmt not in (own, "f32"):
        raise ValueError(f"out_dtype must be {NARROW[own].dtype_name} (a's) or float32 for this weight, "
                         f"got {out_dtype}")
    return int(np.prod(a.shape[:-1], dtype=np.int64)), fmt


def _name(dtype):
    """A dtype's name: NumPy's (np.float32, "float32"), else torch's without its prefix."""
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype).removeprefix("torch.")


def gemm(a, w, out=None, out_dtype=None, stream=None, **refused):
    """C = a @ dequantised(w).T (see the module): a new C in a's framework,
    or out (its shape (..., N), its dtype C's)."""
    from .kernel import launch_args

    M, fmt = checked(a, w, out, out_dtype, refused)
    if out is not None and out_dtype is None:
        fmt = {"float32": "f32"}.get(checks.dtype_name(out), fmt)
    if not cuda.is_available():
        raise RuntimeError("numgemm.gemm needs a CUDA GPU and driver; none is available")
    fw = frameworks.of(a, out)
    device = frameworks.device_of(fw, a, out)
    handle = frameworks.handle(stream) if stream is not None else frameworks.current_stream(fw, device)
    host = isinstance(a, np.ndarray)
    da = views.device(a, "a")
    item = da.dtype.itemsize
    lead, N, K = tuple(a.shape[:-1]), w.n, w.k
    if M and (da.strides[-1] != item or any(da.strides[i] != da.strides[i + 1] * da.shape[i + 1]
                                            for i in range(da.ndim - 2))):     # (no rows: any strides)
        raise ValueError(f"a's rows must be contiguous (its last axis, and its leading axes over them), "
                         f"got strides {da.strides}; pass a.contiguous()")
    row = da.strides[-2] if da.ndim > 1 else K * item
    if M and (row % 16 or (da.device_ctypes_pointer.value or 0) % 16):
        raise ValueError("a's rows must start at 16-byte boundaries (rows of K = a multiple of 128 do, "
                         "in a contiguous array)")
    A = views.view(da, (M, K // 2), (row, 4), np.uint32)
    c_dtype = np.float32 if fmt == "f32" else NARROW[fmt].dtype
    alloc = frameworks.Allocator(fw, device, handle)
    C, result = _output(out, (*lead, N), c_dtype, host, alloc, NARROW[fmt].encoding if fmt in NARROW else "")
    dev = cuda.get_current_device()
    if M:                                       # no rows: an empty C, and no launch (a grid of 0 is an error)
        spec = choose(M, N, w, fmt, dev, C)
        if isinstance(spec, W4A16Wgmma):
            words, scales, zeros = w.device_wgmma()
            tmap = 0
            if spec.copy == "tma" and not _bulk_copies(words, scales, None if w.zeros is None else zeros, N):
                spec = dataclasses.replace(spec, copy="cp.async")
            if spec.copy == "tma":          # A as (1, M, 2K) bytes, in boxes of the tile's rows of 128 bytes
                a_bytes = views.view(A, (1, M, 2 * K), (M * row, row, 1), np.uint8)
                tmap = Address(tensormap.maps([(a_bytes, spec.bn, 128)], handle, alloc).address)
            args = (A, words, scales, zeros, C, M, N, K, tmap)
        else:
            words, scales, zeros = w.device()
            args = (A, words, views.view(scales, (K // 128, N // 2), (2 * N, 4), np.uint32), zeros, C, M, N, K)
        fn = _function(spec, dev.id)
        Launch(fn.handle, spec.grid(M, N), spec.threads, spec.dynamic_bytes, handle,
               launch_args(spec.argtypes(), args), spec.name)()
    if host:
        from cuda.bindings import driver as drv

        frameworks.check(drv.cuStreamSynchronize(drv.CUstream(handle)))
        return result.copy_to_host()
    return result


#: Rows of activations from which a Hopper GPU runs W4A16 on wgmma (w4a16_wgmma), a PackedW4's
#: weight permitting; below them, mma.sync with the weight's words straight into B fragments.
WGMMA_ROWS = 64


def choose(M, N, w, fmt, dev, C):
    """The kernel of a call: w4a16_wgmma's from WGMMA_ROWS rows on sm_90
    (a weight that has its wgmma layout, and a C whose rows start at 16-byte
    boundaries, which it stores whole), else w4a16's."""
    from .kernel import w4a16, w4a16_wgmma
    zeros = w.zeros is not None
    if _on_wgmma(M, w, dev) and C.device_ctypes_pointer.value % 16 == 0 and C.strides[0] % 16 == 0:
        return w4a16_wgmma.choose(M, N, w.precision, fmt, zeros)
    return w4a16.choose(M, N, dev.MULTIPROCESSOR_COUNT, w.precision, fmt, zeros)


@contextlib.contextmanager
def variant(rows=None, **fields):
    """Within it, gemm(x, w)'s W4A16 kernel is choose()'s with fields
    changed (a W4A16Wgmma's or a w4a16 spec's: bn=256, copy="tma", ...; a
    TypeError at the call where the chosen kernel has no such field), and
    rows, where given, is WGMMA_ROWS (1: wgmma at every M, a large one:
    mma.sync). For trying a kernel (scripts/w4a16.py --variants,
    scripts/sanitize.py --w4a16-variants); not thread-safe."""
    global WGMMA_ROWS, choose
    saved = WGMMA_ROWS, choose
    WGMMA_ROWS = saved[0] if rows is None else rows
    choose = lambda *a, **k: dataclasses.replace(saved[1](*a, **k), **fields)     # noqa: E731
    try:
        yield
    finally:
        WGMMA_ROWS, choose = saved


def _bulk_copies(words, scales, zeros, N):
    """Whether the wgmma kernel's tma copies may bring a group's weights,
    scales and zero points as bulk copies: each piece starts at a 16-byte
    boundary and is a multiple of 16 bytes long (zero points: N a multiple
    of 16). Weights that a torch module holds may start anywhere."""
    ptrs = [x.device_ctypes_pointer.value or 0 for x in (words, scales) + (() if zeros is None else (zeros,))]
    return all(p % 16 == 0 for p in ptrs) and (zeros is None or N % 16 == 0)


def _on_wgmma(M, w, dev):
    """Whether M rows of x times w may run on wgmma on dev: enough rows, a
    weight that has its wgmma layout, sm_90, and a K of at least one group
    (the kernel's k loop makes one pass at least)."""
    has_layout = isinstance(w, PackedW4) or w.wgmma_words is not None
    return M >= WGMMA_ROWS and has_layout and w.k >= GROUP and dev.compute_capability >= (9, 0)


def rounds(M, w):
    """The format that gemm(x, w) rounds each dequantised weight to for M
    rows of x on the current GPU: the activations' where the wgmma kernel
    runs (C aligned, as a new C is), else None (mma.sync scales the f32
    sums instead); what quant.dequantize_w4's rounded= takes for the
    reference of such a call."""
    return w.precision if _on_wgmma(M, w, cuda.get_current_device()) else None


@functools.cache
def _function(spec, device_id):
    """spec's kernel loaded on device_id, allowed its rings' shared memory (once)."""
    from .kernel import helper_function
    from .plans import allow_dynamic_shared

    fn = helper_function(spec, device_id)
    allow_dynamic_shared(fn, spec.dynamic_bytes)
    return fn


def _output(out, shape, dtype, host, alloc, encoding):
    """(C as the kernel takes it: an (M, N) Numba view, 16-bit formats as
    their bits; what the call returns): out, checked, or a new C of alloc's
    framework (NumPy inputs: a Numba array, copied back by the caller)."""
    if out is None:
        result, dev = (None, cuda.device_array(shape, dtype)) if host else alloc.empty(shape, dtype, encoding)
        result = dev if host else result
    else:                                       # its shape, and that it is no NumPy array: checks.check_out
        result, dev = out, frameworks.numba_view(out)
        if np.dtype(dev.dtype) != np.dtype(dtype):
            raise TypeError(f"out has dtype {dev.dtype}; expected {np.dtype(dtype).name}")
        if not dev.is_c_contiguous():
            raise ValueError(f"out must be contiguous, got strides {dev.strides}")
    item = np.dtype(dtype).itemsize
    M = int(np.prod(shape[:-1], dtype=np.int64))
    return views.view(dev, (M, shape[-1]), (shape[-1] * item, item), np.uint16 if item == 2 else np.float32), \
        result
