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


def _unprepack(p):
    """prepack_w4's words read back as (N, K) u4, by the layout its docstring states."""
    from numgemm.quant import GROUP
    n, k = p.shape
    shifts = 4 * np.arange(8, dtype=np.uint32)
    nib = (p.words[..., None] >> shifts) & 15                          # (N/8, G, 32 lanes, 4 words, 8)
    pairs = np.stack([nib[..., :4], nib[..., 4:]], axis=-1)            # nibble i: even k, i + 4: odd k
    lanes = pairs.reshape(n // 8, k // GROUP, 8, 4, 32)                # (block, group, row r, t, 32 k)
    return lanes.transpose(0, 2, 1, 3, 4).reshape(n, k).astype(np.int64)


@pytest.mark.parametrize("zeros", [False, True])
def test_prepack_w4_holds_each_weight_where_the_kernel_reads_it(rng, zeros):
    from numgemm.quant import prepack_w4

    n, k = 24, 384
    w = rng.integers(0, 16, (n, k)) if zeros else rng.integers(-8, 8, (n, k))
    s = rng.uniform(0.5, 2, (n, k // 128)).astype(np.float32)
    z = rng.integers(0, 16, (n, k // 128)) if zeros else None
    p = prepack_w4(w, s, z)
    assert p.words.shape == (n // 8, k // 128, 32, 4) and p.words.dtype == np.uint32
    assert np.array_equal(_unprepack(p), w + (0 if zeros else 8))
    assert np.array_equal(p.scales.view(np.float16), s.T.astype(np.float16))
    assert (p.zeros is None) == (not zeros) and (not zeros or np.array_equal(p.zeros, z.T))


def test_the_wgmma_layout_holds_each_weight_where_its_docstring_says(rng):
    """PackedW4.wgmma_words(), read back word by word by the layout its
    docstring states (rows past N zeros), and rounded references."""
    from numgemm.quant import dequantize_w4, prepack_w4, unprepack_words

    n, k = 24, 384
    w = rng.integers(-8, 8, (n, k))
    p = prepack_w4(w, rng.uniform(0.5, 2, (n, k // 128)).astype(np.float32))
    assert np.array_equal(unprepack_words(p.words), w + 8)
    words = p.wgmma_words()
    assert words.shape == (2, 3, 2, 32, 4) and words.dtype == np.uint32 and p.wgmma_words() is words
    b, grp, h, lane, j, i, lh = np.meshgrid(*map(np.arange, (2, 3, 2, 32, 4, 4, 2)), indexing="ij")
    rows = 16 * b + 8 * h + (lane >> 2)
    ks = 128 * grp + 32 * j + 16 * (i >> 1) + 8 * (i & 1) + 2 * (lane & 3) + lh
    held = (words[b, grp, h, lane, j] >> (4 * (i + 4 * lh))) & 15
    padded = np.concatenate([w + 8, np.zeros((8, k), np.int64)])
    assert np.array_equal(held, padded[rows, ks])
    third = np.full((1, 1), 1 / 3, np.float16)                    # 3 x f16(1/3) = 1 - 2**-12: a tie, to 1.0
    exact, rounded = (dequantize_w4(np.full((1, 128), 3), third, rounded=r) for r in (None, "fp16"))
    assert np.all(exact == 3 * np.float64(third[0, 0])) and np.all(rounded == 1.0)


def test_prepack_w4_bf16_scales_and_the_reference(rng):
    from numgemm.precision import PRECISIONS
    from numgemm.quant import dequantize_w4, prepack_w4

    w, s = rng.integers(-8, 8, (8, 256)), rng.uniform(0.5, 2, (8, 2)).astype(np.float32)
    p = prepack_w4(w, s, precision="bf16")
    bits = PRECISIONS["bf16"].encode(s)
    assert p.precision == "bf16" and np.array_equal(p.scales, bits.T)
    want = w * np.repeat(PRECISIONS["bf16"].decode(bits), 128, axis=1)
    assert np.array_equal(dequantize_w4(w, bits), want)
    u, z = w + 8, np.full((8, 2), 3)
    assert np.array_equal(dequantize_w4(u, s, z), (w + 5) * np.repeat(s.astype(np.float64), 128, axis=1))


@pytest.mark.parametrize("args, error, match", [
    (dict(weight=np.zeros((8, 100), np.int8)), ValueError, "K of 128"),
    (dict(weight=np.zeros((12, 128), np.int8)), ValueError, "N a positive multiple of 8"),
    (dict(weight=np.full((8, 128), 8)), ValueError, r"\[-8, 7\]"),
    (dict(weight=np.zeros((8, 128)), ), TypeError, "integer"),
    (dict(scales=np.ones((8, 2), np.float16)), ValueError, r"scales must have shape \(N, K/128\)"),
    (dict(zeros=np.full((8, 1), 16)), ValueError, r"zeros must lie in \[0, 15\]"),
    (dict(precision="fp8"), ValueError, "precision"),
    (dict(scales=np.ones((8, 1), np.uint16)), TypeError, "a format's bits; fp16 takes float16"),
])
def test_prepack_w4_refuses_what_it_cannot_lay_out(args, error, match):
    from numgemm.quant import prepack_w4

    call = {"weight": np.zeros((8, 128), np.int8), "scales": np.ones((8, 1), np.float16), **args}
    with pytest.raises(error, match=match):
        prepack_w4(call.pop("weight"), call.pop("scales"), **call)
