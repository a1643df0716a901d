"""Tensor maps for copy="tma" kernels: what the TMA unit reads to copy a box
of a matrix into shared memory (see ptx_asm/tma.ptx).

A tensor map is 128 opaque bytes that the driver encodes
(cuTensorMapEncodeTiled). A kernel can take one by value only as a
__grid_constant__ parameter, which Numba cannot declare, so numgemm keeps
A's and B's maps in global memory, 256 bytes per operand pair, and passes
their address. The maps of recent operand pairs stay on the device
(device_maps): encoding and copying them costs more than a launch.
"""

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass

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


def device_maps(a, b, cfg):
    """The global address of A's tensor map, with B's 128 bytes after it
    (copy="tma"), for cfg's boxes. B is N x K bytes, or K x N: then its map's
    rows are k and a box is 128 (or 64: cfg.b_swizzle) bytes of N.

    The maps live in a ring of slots on each device, one allocation: a new
    operand pair takes the next slot (two encodings and a 256-byte copy),
    the same pair again finds its slot. A slot is rewritten only after
    _SLOTS - 1 other pairs, by a synchronous copy, which waits for the
    kernels on blocking streams; a kernel still queued on a non-blocking
    stream behind that many others would read the new maps."""
    rows, nbytes = cfg.tma_box_rows, cfg.tma_box_bytes
    return _slot([(a, rows[0], nbytes[0]), (b, rows[1], nbytes[1])])


def device_map_c(c):
    """The global address of C's tensor map for c_tma's stores: c a (batch,
    rows, bytes) uint8 view of C, boxes of a warp's 16 rows x 128 bytes in
    the 128-byte swizzle; a slot of device_maps' ring."""
    return _slot([(c, 16, SWIZZLE_BYTES)])


def _slot(specs):
    """The address of the ring's slot holding the maps of specs ((x,
    box_rows, box_bytes) each, at most two), encoding them into the next
    slot if no slot holds them."""
    device = cuda.get_current_device().id
    key = (device,) + tuple((x.device_ctypes_pointer.value, x.shape, x.strides, rows, nbytes)
                            for x, rows, nbytes in specs)
    ring = _RINGS.get(device)
    if ring is None:
        ring = _RINGS[device] = _Ring(cuda.device_array(_SLOTS * 32, np.uint64), [None] * _SLOTS, {}, 0)
    slot = ring.slot_of.get(key)
    if slot is None:
        maps = np.concatenate([encode(x, rows, nbytes) for x, rows, nbytes in specs])
        slot, ring.next = ring.next, (ring.next + 1) % _SLOTS
        ring.slot_of.pop(ring.owner[slot], None)
        ring.maps[slot * 32:slot * 32 + maps.size].copy_to_device(maps)
        ring.owner[slot], ring.slot_of[key] = key, slot
    return ring.maps.device_ctypes_pointer.value + 256 * slot


@dataclass
class _Ring:
    maps: object        # device array of _SLOTS x 32 uint64: A's map, B's map per slot
    owner: list         # the key each slot holds
    slot_of: dict
    next: int


_SLOTS = 256
_RINGS = {}
