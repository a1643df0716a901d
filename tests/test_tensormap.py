"""numgemm.tensormap: the strides a tensor map takes (the maps themselves need
the driver: the GPU tests of copy="tma" kernels use them)."""

import ctypes
from types import SimpleNamespace

import numpy as np

from numgemm import tensormap
from numgemm.tensormap import box_strides


def test_strides_of_a_batch_of_matrices():
    assert box_strides((3, 260, 520), (260 * 528, 528, 1)) == (528, 260 * 528)


def test_an_axis_of_one_gets_the_stride_its_neighbours_imply():
    """A single matrix, or B shared by every batch: its batch stride is
    whatever the caller's view says (often 0), not one TMA accepts."""
    assert box_strides((1, 64, 128), (0, 128, 1)) == (128, 64 * 128)
    assert box_strides((1, 1, 8), (8, 8, 1)) == (16, 16)       # a row of 8 bytes, padded to 16


def test_moved_maps_encode_the_new_addresses(monkeypatch):
    """A map of a moved array: the Maps of the new address, found by the key
    the encoder would be given; the old Maps untouched."""
    A, B, C, MAP = 0x7F0000100000, 0x7F0000200000, 0x7F0000300000, 0x7F0000900000
    old = tensormap.Maps(None, MAP, (0, (A, (1, 8, 64), (512, 64, 1), 8, 64), (B, (1, 64, 8), (512, 8, 1), 64, 8)))
    asked = []
    monkeypatch.setattr(tensormap, "_held",
                        lambda key, stream, alloc, **_: asked.append(key) or tensormap.Maps(None, MAP + 256, key))
    new = tensormap.moved(old, {B: C}, 0)
    assert asked == [(0, (A, (1, 8, 64), (512, 64, 1), 8, 64), (C, (1, 64, 8), (512, 8, 1), 64, 8))]
    assert new.address == MAP + 256 and old.key[2][0] == B


class _HostArray(np.ndarray):
    """A host array standing in for a device array: _Slab reads its address."""

    @property
    def device_ctypes_pointer(self):
        return ctypes.c_void_p(self.ctypes.data)


def test_a_slab_keeps_the_size_it_was_made_with(monkeypatch):
    """A slab made while _PER_SLAB was 2 gives two 256-byte slots and then
    makes way for a new one, whatever _PER_SLAB says by then: read at use,
    the third slot was an empty view past the slab's end."""
    monkeypatch.setattr(tensormap, "cuda", SimpleNamespace(device_array=lambda n, dt: np.zeros(n, dt).view(_HostArray)))
    monkeypatch.setattr(tensormap, "_SLABS", {})
    monkeypatch.setattr(tensormap, "_PER_SLAB", 2)
    first = [tensormap._slot(0) for _ in range(2)]
    monkeypatch.setattr(tensormap, "_PER_SLAB", 64)
    slab, view = tensormap._slot(0)
    assert first[0][0] is first[1][0] and all(v.shape == (32,) for _, v in first)
    assert slab is not first[0][0] and slab.size == 64 and view.shape == (32,)
