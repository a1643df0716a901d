"""numgemm.operands: the values, references, poison and comparisons every check uses."""

import numpy as np
import pytest

from numgemm import operands, registry
from numgemm.operands import reference
from numgemm.quant import pack_int4


def test_reference_layouts(rng):
    a = rng.integers(-8, 8, (4, 6))
    bt = rng.integers(-8, 8, (5, 6))
    want = a @ bt.T
    assert np.array_equal(reference(a.astype(np.int8), bt.astype(np.int8), "int8", "nk"), want)
    assert np.array_equal(reference(a.astype(np.int8), bt.T.astype(np.int8), "int8", "kn"), want)
    assert np.array_equal(reference(pack_int4(a), pack_int4(bt), "int4", "nk", k=6), want)


@pytest.mark.parametrize("precision", ["fp16", "int8", "int4"])
@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_in_layout_agrees_with_the_reference(precision, layout, rng):
    """What gemm() is handed in either B layout multiplies out, through the
    packed reference, to the product of the values."""
    if precision == "int8" and layout == "kn":
        pytest.skip("no K x N int8 kernel")
    a, b = operands.values(precision, 2, 5, 7, 12, rng)
    assert np.any(a != 0) and np.any(b != 0)
    ha, hb = operands.in_layout(precision, layout, a, b)
    b_as = hb if layout == "kn" else np.swapaxes(hb, -1, -2)
    got = reference(ha, b_as, precision, layout, k=12)
    assert operands.mismatch(got, operands.expected(precision, a, b), precision) is None


def test_mismatch_says_where():
    ref = np.arange(12, dtype=np.int64).reshape(1, 3, 4)
    got = ref.astype(np.int32).copy()
    assert operands.mismatch(got, ref, "int8") is None
    got[0, 2, 1] = -(2**31)                                       # an element left poisoned
    assert operands.mismatch(got, ref, "int8") == "1 of 12 entries differ; first at (0, 2, 1): -2147483648 != 9"
    f = np.ones((2, 2))
    assert operands.mismatch(np.full((2, 2), np.nan, np.float32), f, "fp16").endswith("not finite (unwritten or overflowed)")
    assert operands.mismatch(f * 1.01, f, "fp16").startswith("relative error")
    assert operands.mismatch(f * 1.01, f, "fp16", acc="f16") is None       # f16 accumulation: 2e-2


def test_an_entry_may_be_off_by_its_formats_grain_at_zero():
    """GELU's far tail (-2e-38 at -10) flushed to zero passes; a value f32
    holds as a normal does not; float16 C's grain is its least subnormal."""
    tail = np.array([[-2e-38, -5e-39]])
    assert operands.mismatch(np.zeros((1, 2), np.float32), tail, "fp16") is None
    assert operands.mismatch(np.zeros((1, 2), np.float32), tail * 1e8, "fp16").startswith("relative error")
    sub = np.array([[-5.7e-8]])                                  # stored as float16's least subnormal
    assert operands.mismatch(sub.astype(np.float16), sub, "fp16") is None
    assert operands.mismatch(np.float16([[0]]), sub * 4, "fp16").startswith("relative error")


def test_sample_matches_finds_a_wrong_entry(rng):
    a, bt = operands.values("int8", 1, 64, 48, 32, rng)
    c = operands.expected("int8", a, bt)
    assert operands.sample_matches(c, a, bt, "int8", rng, count=4096)
    c[0, 5, 7] += 1
    assert not operands.sample_matches(c, a, bt, "int8", np.random.default_rng(1), count=64 * 48 * 8)


def test_kernel_operands_follow_the_config(rng):
    cfg = registry.get("int4_ptx_mma_k64_kn", "paper")
    a, b, ref = operands.kernel_operands(cfg, 1, 16, 24, 64, rng)
    assert a.dtype == np.uint8 and b.dtype == np.uint16 and b.shape == (1, 16, 24)
    assert np.array_equal(reference(a, b, "int4", "kn", k=64), ref)


@pytest.mark.parametrize("precision", ["fp16", "int8", "int4"])
def test_checks_catch_wrong_results(precision, rng):
    """The full and sampled checks fail on a wrong output, pass on the right one."""
    a, b = operands.values(precision, 2, 24, 16, 40, rng)
    ref = operands.expected(precision, a, b)
    out = ref.astype(np.float32 if precision == "fp16" else np.int32)
    assert operands.matches(out, ref, precision)
    wrong = out.copy()
    wrong[1, 3, 5] += 7
    assert not operands.matches(wrong, ref, precision)
    assert operands.sample_matches(out, a, b, precision, rng)
    assert not operands.sample_matches(np.zeros_like(out), a, b, precision, rng)


def test_a_c_rounded_to_bf16_is_held_to_bf16s_rounding():
    """C in bfloat16's bits passes where each entry is the reference rounded
    (a relative error up to 2**-9 an entry, more than FP32 C's 1e-3) and fails
    a percent off; float16 C keeps the 1e-3 that f32 C has."""
    from numgemm.precision import PRECISIONS

    bf16, fp16 = PRECISIONS["bf16"], PRECISIONS["fp16"]
    ref = np.random.default_rng(5).standard_normal((64, 96))
    assert operands.mismatch(bf16.encode(ref.astype(np.float32)), ref, "bf16") is None
    assert "relative error" in operands.mismatch(bf16.encode((ref * 1.01).astype(np.float32)), ref, "bf16")
    assert "relative error" in operands.mismatch((ref * 1.002).astype(np.float32), ref, "bf16")     # f32 C: 1e-3
    assert bf16.tolerance(narrow="bf16") == 2.0**-8 and fp16.tolerance(narrow="f16") == fp16.tolerance() == 1e-3


def test_fp8_sums_are_held_to_what_its_wgmma_keeps():
    """FP8's f32 sums may be 4e-3 off (Hopper's FP8 wgmma keeps about 14 bits
    of a sum: 1.05e-3 at K = 2841 in the fuzz test), FP16's 1e-3; both fail
    a percent off."""
    ref = np.random.default_rng(6).standard_normal((64, 96))
    near = (ref * (1 + 2e-3)).astype(np.float32)
    assert operands.mismatch(near, ref, "e4m3") is None and "relative error" in operands.mismatch(near, ref, "fp16")
    assert "relative error" in operands.mismatch((ref * 1.01).astype(np.float32), ref, "e5m2")
