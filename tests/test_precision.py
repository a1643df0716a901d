"""numgemm.precision: each precision's facts, and that no other module keeps
its own by testing a precision's name."""

import re
from pathlib import Path

import numpy as np
import pytest

import numgemm
from numgemm.precision import BY_DTYPE, PRECISIONS


def test_the_facts_that_derive_from_the_data():
    fp16, int8, int4 = (PRECISIONS[n] for n in ("fp16", "int8", "int4"))
    # packed uint8 names no precision, nor BF16's bits; bfloat16 (torch's, ml_dtypes') names BF16
    assert BY_DTYPE == {"float16": "fp16", "int8": "int8", "bfloat16": "bf16", "float8_e4m3fn": "e4m3",
                        "float8_e5m2": "e5m2"}
    assert (fp16.exact, int8.exact, int4.exact) == (False, True, True)
    assert int4.packed and not int8.packed and int4.wide is int8 and int8.wide is int8
    assert fp16.out_dtypes == (np.dtype(np.float32), np.dtype(np.float16)) and int8.out_dtypes == (np.dtype(np.int32),)
    assert (int8.max_k, int4.max_k, fp16.max_k) == ((2**31 - 1) // 128**2, (2**31 - 1) // 64, None)
    assert fp16.mma_sass(16, 8, 16, "f16") == "HMMA.16816.F16" and int4.mma_sass(16, 8, 64) == "IMMA.16864.S4.S4"
    assert int8.wgmma_sass(64, 256, 32) == "IGMMA.64x256x32.S8.S8"
    assert int4.k_per_unit == 4 and fp16.k_per_unit == 1


def test_no_module_tests_a_precision_by_its_name():
    """A new precision is a new entry in PRECISIONS: a module that compared a
    precision with "fp16" would need editing for it."""
    names = "|".join(PRECISIONS)
    test = re.compile(rf"""(==|!=|\bin)\s*\(?["']({names})["']|["']({names})["']\s*(==|!=|in\b)""")
    found = [f"{path.name}:{i}: {line.strip()}"
             for path in sorted(Path(numgemm.__file__).parent.rglob("*.py")) if path.name != "precision.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if test.search(line)]
    assert not found, "\n".join(found)


def test_bf16_is_fp16_with_bfloat16_bits():
    """BF16: FP16's shapes and layouts, f32 accumulation only, host arrays of
    bfloat16 bit patterns rounded to nearest even (NaN kept), decoded
    exactly for the references; its SASS carries .BF16."""
    fp16, bf16 = PRECISIONS["fp16"], PRECISIONS["bf16"]
    assert (bf16.mma_ks, bf16.wmma, bf16.b_layouts, bf16.wgmma_ns) == (fp16.mma_ks, fp16.wmma, fp16.b_layouts,
                                                                      fp16.wgmma_ns)
    assert list(bf16.mma_types) == ["f32"] and bf16.out_dtypes == (np.dtype(np.float32), np.dtype(np.uint16))
    assert (bf16.narrow, fp16.narrow) == ("bf16", "f16")        # C rounded: bfloat16's bits, float16
    assert bf16.mma_sass(16, 8, 16) == "HMMA.16816.F32.BF16" and bf16.wgmma_sass(64, 128, 16) == "HGMMA.64x128x16.F32.BF16"
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 3.0e38, np.nan, 2.0**-130], np.float32)
    bits = bf16.encode(x)
    assert bits.dtype == np.uint16
    assert list(bits[:5]) == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F62]       # ties to even; no overflow
    assert bits[5] == 0x7FC0 and bf16.decode(bits[6:])[0] == 2.0**-130       # NaN; a subnormal kept
    assert np.array_equal(bf16.decode(bits[:5]), [1.0, 1.0, 1.015625, -2.5, np.uint32(0x7F620000).view(np.float32)])
    assert np.array_equal(bf16.decode(bf16.encode(bf16.decode(bits))), bf16.decode(bits), equal_nan=True)
    assert bf16.decode(np.float32([1.5])).dtype == np.float64 and fp16.encode([1.5]).dtype == np.float16


@pytest.mark.parametrize("name,encoding", [("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2"), ("bf16", "bfloat16")])
def test_the_encodings_are_ml_dtypes_own(name, encoding):
    """Every bit pattern decodes to ml_dtypes' value, and float32 values in
    range round to its pattern (to nearest, ties to even): random values, and
    every midpoint between neighbouring values, a float32 step either side of
    it, the values themselves and zero's neighbours (where rounding turns)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    prec, dtype = PRECISIONS[name], getattr(ml_dtypes, encoding)
    bits = np.arange(2**prec.bits).astype(prec.host_dtype)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(prec.decode(bits), bits.view(dtype).astype(np.float64), equal_nan=True)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(100_000) * rng.choice([1e-3, 1.0, 30.0], 100_000)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        v = np.unique(np.abs(prec.decode(bits)))
    v = v[np.isfinite(v)].astype(np.float32)
    mids = ((v[1:].astype(np.float64) + v[:-1]) / 2).astype(np.float32)
    edges = [mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0)), v, np.float32([1e-30, 0])]
    x = np.concatenate([x, *edges, *(-e for e in edges)])
    x = x[np.abs(x) <= float(ml_dtypes.finfo(dtype).max)]
    assert np.array_equal(prec.encode(x), x.astype(dtype).view(prec.host_dtype))


def test_fp8_is_int8s_shapes_with_float_operands():
    """FP8: INT8's k32 shapes and K-major B, f32 sums, no WMMA; e4m3 to 448
    and e5m2 to 57344 (past them: the largest, satfinite), ties to even."""
    e4, e5, int8 = PRECISIONS["e4m3"], PRECISIONS["e5m2"], PRECISIONS["int8"]
    assert (e4.mma_ks, e4.b_layouts, e4.wgmma_ns, e4.acc, e4.wmma_name) == ((32,), int8.b_layouts, (128, 256), "f32", "")
    assert e4.mma_sass(16, 8, 32) == "QMMA.16832.F32.E4M3.E4M3" and e5.wgmma_sass(64, 256, 32).startswith("QGMMA")
    x = np.float32([1.0625, 1.1875, 500.0, -3.3, np.nan, 2.0**-10])
    assert list(e4.encode(x)) == [0x38, 0x3A, 0x7E, 0xC5, 0x7F, 0x00]       # 1, 1.25, 448, -3.25, NaN, 0
    assert e5.decode(e5.encode(np.float32([1e6])))[0] == 57344 and e4.min_cc == (8, 9)
