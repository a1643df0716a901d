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
costs more than a launch. Inside a CUDA graph's capture the maps a launch
reads are written by the graph itself (kernel.write_maps), into memory of
the capture's allocator, and kept for the life of the process.
"""

import collections
import ctypes
import functools
import threading
import weakref

import numpy as np
from numba import cuda

from . import driver
from .tiles import SWIZZLE_BYTES

# cuda.h enums
_UINT8 = 0                  # CU_TENSOR_MAP_DATA_TYPE_UINT8: the kernels see operands as bytes
_INTERLEAVE_NONE = 0
#: CU_TENSOR_MAP_SWIZZLE_*, by the box's row bytes: 16-byte chunk c of row r lands at
#: chunk c ^ (r % 8) (128B), or c ^ ((r / 2) % 4) (64B)
_SWIZZLE = {128: 3, 64: 2}
_L2_PROMOTION_256B = 3      # a miss fetches 256 bytes into L2 (the next k-tile's row too)
_OOB_ZEROS = 0              # outside the matrix, a box reads zeros


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
    return _encode(x.device_ctypes_pointer.value, x.shape, x.strides, box_rows, box_bytes)


def _encode(pointer, shape, strides, box_rows, box_bytes):
    batch, rows, nbytes = shape
    row, plane = box_strides(shape, strides)
    if row % 16 or plane % 16:
        raise ValueError(f"copy=tma needs row and batch strides in multiples of 16 bytes; got {row} and {plane}")
    out = (ctypes.c_uint64 * 16)()
    err = driver.calls.cuTensorMapEncodeTiled(
        out, _UINT8, 3, ctypes.c_void_p(pointer),
        (ctypes.c_uint64 * 3)(nbytes, rows, batch), (ctypes.c_uint64 * 2)(row, plane),
        (ctypes.c_uint32 * 3)(box_bytes, box_rows, 1), (ctypes.c_uint32 * 3)(1, 1, 1),
        _INTERLEAVE_NONE, _SWIZZLE[box_bytes], _L2_PROMOTION_256B, _OOB_ZEROS)
    if err:
        raise ValueError(f"cuTensorMapEncodeTiled refused a {batch} x {rows} x {nbytes}-byte operand with "
                         f"strides {row}, {plane} and {box_rows}-row boxes (CUresult {err})")
    return np.frombuffer(out, np.uint64).copy()


class Maps:
    """Up to two tensor maps in device memory that nothing ever rewrites:
    `address` is where a kernel reads them, for as long as this object lives.
    A plan (and its prepared launch) holds the Maps it launches with, so no
    later call can change what a kept launch reads; the memory goes back
    when the last holder lets go, through numba-cuda's deferred
    deallocation, as any device array's does."""

    __slots__ = ("address", "key", "captured", "_slab", "__weakref__")

    def __init__(self, slab, address, key, captured=False):
        self._slab, self.address, self.key, self.captured = slab, address, key, captured


def maps(specs, stream=0, alloc=None):
    """The Maps of specs ((x, box_rows, box_bytes) each, at most two) for a
    launch on stream (a raw handle): the live Maps of the same encodings
    where there is one, else encoded anew into a fresh 256 bytes; while
    stream is captured into a CUDA graph, new Maps that the graph writes,
    in memory from alloc (a frameworks.Allocator of torch's, whose captures
    have a memory pool of their own).

    The cache is keyed by everything an encoding depends on (device,
    pointer, shape, strides, box), so a hit is the same 256 bytes the
    encoder would write; it keeps the _CACHED most recent Maps alive, and
    finds any older one still held by a plan."""
    device = cuda.get_current_device().id
    key = (device,) + tuple((x.device_ctypes_pointer.value, x.shape, x.strides, rows, nbytes)
                            for x, rows, nbytes in specs)
    return _held(key, stream, alloc)


def moved(held, moves, stream=0, alloc=None):
    """The Maps encoding what `held` encodes with its pointers moved (moves:
    old address -> new), or held itself where none of them moves and its
    bytes are written already (Maps a graph writes are written only when
    that graph replays). New Maps are written by a kernel on stream, ahead
    of the launch that reads them, and kept for that stream's calls: a
    repeated call at new addresses never waits for the GPU."""
    device, *specs = held.key
    if not held.captured and not any(spec[0] in moves for spec in specs):
        return held
    return _held((device, *((moves.get(p, p), *rest) for p, *rest in specs)), stream, alloc, on_stream=True)


def _held(key, stream, alloc, on_stream=False):
    with _LOCK:
        held = _RECENT.get(key) or _LIVE.get(key)
        if held is not None:
            return _remember(_RECENT, key, held)
        if on_stream and (stream, key) in _ON_STREAM:
            return _remember(_ON_STREAM, (stream, key), _ON_STREAM[stream, key])
        if driver.capturing(stream):    # a copy cannot run inside a capture: the graph writes them, uncached
            return _written_by_graph(key, stream, alloc)
        if on_stream:
            return _remember(_ON_STREAM, (stream, key), _written_by_kernel(_slot(key[0]), key, stream))
        held = _LIVE[key] = _new_maps(key[0], [_encode(*spec) for spec in key[1:]], key)
        return _remember(_RECENT, key, held)


def _remember(cache, key, held):
    """held, as cache's most recent entry; its least recent past _CACHED let go."""
    cache[key] = held
    cache.move_to_end(key)
    if len(cache) > _CACHED:
        cache.popitem(last=False)
    return held


def _written_by_graph(key, stream, alloc):
    """Maps written by a kernel the capture on stream records (its words as
    the kernel's parameters, which the graph keeps): every replay writes
    them before the launches that read them. Their memory comes from the
    capture's allocator, and they are kept for the life of the process,
    since a graph can be replayed as long as it lives."""
    if alloc is None or alloc.framework != "torch":
        raise RuntimeError("numgemm writes the tensor maps of operands inside a CUDA graph's capture only in "
                           "torch's captures (torch.cuda.graph), whose memory pool holds them; make the same call "
                           "(or a plan of it) before the capture and launch the plan in it")
    held = _written_by_kernel(alloc.empty((32,), np.uint64), key, stream)
    held.captured = True
    GRAPHS_HOLD.append(held)
    return held


def _written_by_kernel(memory, key, stream):
    """Maps in memory ((its owner, a Numba view of its 32 words)), written by
    the write_maps kernel on stream: complete before that stream's later
    launches, and only theirs."""
    from .kernel import helper_function, launch_args
    from .kernel.write_maps import WORDS, WriteMaps
    from .launches import Launch

    owner, view = memory
    words = np.zeros(WORDS, np.uint64)
    for i, spec in enumerate(key[1:]):
        words[16 * i:16 * i + 16] = _encode(*spec)
    spec = WriteMaps()
    Launch(helper_function(spec, key[0]).handle, spec.grid(), spec.threads, 0, stream,
           launch_args(spec.argtypes(), (view, tuple(map(int, words)))), spec.name)()
    return Maps(owner, view.device_ctypes_pointer.value, key)


def _slot(device):
    """(the slab, a Numba view of its next 256 bytes), taken for good."""
    slab = _SLABS.get(device)
    if slab is None or slab.used == slab.size:
        slab = _SLABS[device] = _Slab()
    i, slab.used = slab.used, slab.used + 1
    return slab, slab.mem[32 * i:32 * i + 32]


def _new_maps(device, encoded, key):
    """Fresh Maps holding the encoded maps: the next 256 bytes of the
    device's current slab, written once through pinned memory (a copy from
    pinned memory is complete when it returns, so every stream's later
    kernels see it, non-blocking ones too)."""
    slab, view = _slot(device)
    staging = _staging(device)
    staging[:] = 0
    for i, m in enumerate(encoded):
        staging[16 * i:16 * i + 16] = m
    view.copy_to_device(staging)
    return Maps(slab, view.device_ctypes_pointer.value, key)


class _Slab:
    """One allocation that _PER_SLAB Maps take 256 bytes of each, in turn,
    none of them twice: alive while the device's current slab or any Maps
    of it is."""

    def __init__(self):
        self.size = _PER_SLAB           # its own: a slab made before _PER_SLAB changed keeps its size
        self.mem = cuda.device_array(self.size * 32, np.uint64)
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
_ON_STREAM = collections.OrderedDict()  # (stream, key) -> Maps written on that stream, most recent last
_LIVE = weakref.WeakValueDictionary()   # key -> Maps, while anything holds it
#: What launches captured into CUDA graphs read of numgemm's (tensor maps, workspaces, padded copies): kept
#: for the life of the process, since numgemm cannot know when a graph is destroyed.
GRAPHS_HOLD = []
