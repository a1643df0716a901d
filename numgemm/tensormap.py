"""Tensor maps for copy="tma" kernels: what the TMA unit reads to copy a box
of a matrix into shared memory (see ptx_asm/tma.ptx).

A tensor map is 128 opaque bytes that the driver encodes
(cuTensorMapEncodeTiled). A kernel can take one by value only as a
__grid_constant__ parameter, which Numba cannot declare, so numgemm keeps
A's and B's maps in global memory, 256 bytes per operand pair, and passes
their address. Those bytes are written once and belong to the Maps object
that holds them (maps()); a plan keeps its Maps, so a kept launch reads its
own operands' maps however many other operands have been launched since.
Recent Maps stay cached by what they encode: encoding and copying them
costs more than a launch.
"""

import collections
import ctypes
import ctypes.util
import functools
import threading
import weakref

import numpy as np
from numba import cuda

from .config import SWIZZLE_BYTES

# cuda.h enums
_UINT8 = 0                  # CU_TENSOR_MAP_DATA_TYPE_UINT8: the kernels see operands as bytes
_INTERLEAVE_NONE = 0
#: CU_TENSOR_MAP_SWIZZLE_*, by the box's row bytes: 16-byte chunk c of row r lands at
#: chunk c ^ (r % 8) (128B), or c ^ ((r / 2) % 4) (64B)
_SWIZZLE = {128: 3, 64: 2}
_L2_PROMOTION_256B = 3      # a miss fetches 256 bytes into L2 (the next k-tile's row too)
_OOB_ZEROS = 0              # outside the matrix, a box reads zeros


@functools.cache
def _encoder():
    try:        # the driver the process has loaded already; find_library would run ldconfig and gcc
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        lib = ctypes.CDLL(ctypes.util.find_library("cuda"))
    fn = lib.cuTensorMapEncodeTiled
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def box_strides(shape, strides):
    """The shape and byte strides of a (batch, rows, bytes) operand -> the
    strides its tensor map takes: of rows, then of batches. An axis of one
    has no stride of its own; it gets the one its neighbours imply."""
    batch, rows, nbytes = shape
    row = strides[1] if rows > 1 else -(-nbytes // 16) * 16
    return row, strides[0] if batch > 1 else row * rows


def encode(x, box_rows, box_bytes=SWIZZLE_BYTES):
    """The 128-byte tensor map of x, a (batch, rows, bytes) uint8 device view
    with 16-byte aligned rows, for boxes of box_rows rows x box_bytes bytes
    (128 or 64), swizzled in rows of that span."""
    batch, rows, nbytes = x.shape
    row, plane = box_strides(x.shape, x.strides)
    if row % 16 or plane % 16:
        raise ValueError(f"copy=tma needs row and batch strides in multiples of 16 bytes; got {row} and {plane}")
    out = (ctypes.c_uint64 * 16)()
    err = _encoder()(
        out, _UINT8, 3, ctypes.c_void_p(x.device_ctypes_pointer.value),
        (ctypes.c_uint64 * 3)(nbytes, rows, batch), (ctypes.c_uint64 * 2)(row, plane),
        (ctypes.c_uint32 * 3)(box_bytes, box_rows, 1), (ctypes.c_uint32 * 3)(1, 1, 1),
        _INTERLEAVE_NONE, _SWIZZLE[box_bytes], _L2_PROMOTION_256B, _OOB_ZEROS)
    if err:
        raise ValueError(f"cuTensorMapEncodeTiled refused a {batch} x {rows} x {nbytes}-byte operand with "
                         f"strides {row}, {plane} and {box_rows}-row boxes (CUresult {err})")
    return np.frombuffer(out, np.uint64).copy()


def operand_maps(a, b, cfg, stream=0):
    """Maps holding A's tensor map, with B's 128 bytes after it (copy="tma"),
    for cfg's boxes. B is N x K bytes, or K x N: then its map's rows are k
    and a box is 128 (or 64: cfg.b_swizzle) bytes of N."""
    rows, nbytes = cfg.tma_box_rows, cfg.tma_box_bytes
    return maps([(a, rows[0], nbytes[0]), (b, rows[1], nbytes[1])], stream)


def c_maps(c, stream=0):
    """Maps holding C's tensor map for c_tma's stores: c a (batch, rows,
    bytes) uint8 view of C, boxes of a warp's 16 rows x 128 bytes in the
    128-byte swizzle."""
    return maps([(c, 16, SWIZZLE_BYTES)], stream)


class Maps:
    """Up to two tensor maps in device memory that nothing ever rewrites:
    `address` is where a kernel reads them, for as long as this object lives.
    A plan (and its prepared launch) holds the Maps it launches with, so no
    later call can change what a kept launch reads; the memory goes back
    when the last holder lets go, through numba-cuda's deferred
    deallocation, as any device array's does."""

    __slots__ = ("address", "_slab", "__weakref__")

    def __init__(self, slab, address):
        self._slab, self.address = slab, address


def maps(specs, stream=0):
    """The Maps of specs ((x, box_rows, box_bytes) each, at most two): the
    live Maps of the same encodings where there is one, else encoded anew
    into a fresh 256 bytes; refused while stream (the launch's, a raw
    handle) is being captured into a CUDA graph, where the synchronous copy
    would break the capture.

    The cache is keyed by everything an encoding depends on (device,
    pointer, shape, strides, box), so a hit is the same 256 bytes the
    encoder would write; it keeps the _CACHED most recent Maps alive, and
    finds any older one still held by a plan."""
    device = cuda.get_current_device().id
    key = (device,) + tuple((x.device_ctypes_pointer.value, x.shape, x.strides, rows, nbytes)
                            for x, rows, nbytes in specs)
    with _LOCK:
        held = _RECENT.get(key) or _LIVE.get(key)
        if held is None:
            from .frameworks import capturing

            if capturing(stream):
                raise RuntimeError("numgemm cannot write the tensor maps of new operands while their stream is "
                                   "captured into a CUDA graph: make the same call (or a plan of it) once before "
                                   "the capture, so that the capture finds them")
            held = _new_maps(device, [encode(x, rows, nbytes) for x, rows, nbytes in specs])
            _LIVE[key] = held
        _RECENT[key] = held
        _RECENT.move_to_end(key)
        if len(_RECENT) > _CACHED:
            _RECENT.popitem(last=False)
        return held


def _new_maps(device, encoded):
    """Fresh Maps holding the encoded maps: the next 256 bytes of the
    device's current slab, written once through pinned memory (a copy from
    pinned memory is complete when it returns, so every stream's later
    kernels see it, non-blocking ones too)."""
    slab = _SLABS.get(device)
    if slab is None or slab.used == _PER_SLAB:
        slab = _SLABS[device] = _Slab()
    staging = _staging(device)
    staging[:] = 0
    for i, m in enumerate(encoded):
        staging[16 * i:16 * i + 16] = m
    i, slab.used = slab.used, slab.used + 1
    slab.mem[32 * i:32 * i + 32].copy_to_device(staging)
    return Maps(slab, slab.base + 256 * i)


class _Slab:
    """One allocation that _PER_SLAB Maps take 256 bytes of each, in turn,
    none of them twice: alive while the device's current slab or any Maps
    of it is."""

    def __init__(self):
        self.mem = cuda.device_array(_PER_SLAB * 32, np.uint64)
        self.base = self.mem.device_ctypes_pointer.value
        self.used = 0


@functools.cache
def _staging(device):
    return cuda.pinned_array(32, np.uint64)


_PER_SLAB = 64              # Maps per allocation (16 KB)
_CACHED = 1024              # recent Maps kept alive by the cache itself
_LOCK = threading.Lock()
_SLABS = {}                 # device -> the slab new Maps come from
_RECENT = collections.OrderedDict()     # key -> Maps, most recent last
_LIVE = weakref.WeakValueDictionary()   # key -> Maps, while anything holds it
