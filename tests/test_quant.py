"""numgemm.quant: INT4 packing."""

import numpy as np
import pytest

from numgemm.quant import pack_int4, unpack_int4


def test_pack_layout(rng):
    x = np.array([[1, -2, 7, -8]])
    p = pack_int4(x)
    assert p.dtype == np.uint8 and p.tolist() == [[0xE1, 0x87]]    # element 2k in the low nibble
    v = rng.integers(-8, 8, (3, 5, 9))
    assert np.array_equal(unpack_int4(pack_int4(v), 9), v)


def test_pack_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        pack_int4(np.array([8]))
    with pytest.raises(TypeError, match="integers"):
        pack_int4(np.array([0.5]))
    with pytest.raises(TypeError, match="uint8"):
        unpack_int4(np.array([1], np.int8))
    with pytest.raises(ValueError, match="does not fit"):
        unpack_int4(np.zeros((2, 3), np.uint8), 9)
