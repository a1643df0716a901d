"""numgemm.checks: what gemm() checks before any GPU is needed (gemm()'s own
refusals, through the public call, are in test_api)."""

import numpy as np
import pytest

import numgemm
from numgemm import checks
from tests.conftest import Shaped


def test_a_named_kernel_says_the_precision_a_dtype_leaves_open():
    """Packed INT4 is uint8, which names no precision: a named INT4 kernel does."""
    a, b = np.zeros((4, 16), np.uint8), np.zeros((8, 16), np.uint8).T
    assert checks.checked(a, b, None, "int4_wgmma_unpack_s8", "tuned", None).precision == "int4"
    assert checks.checked(a, b, None, numgemm.registry.get("int4_ptx_mma_k64"), "tuned", None).precision == "int4"
    with pytest.raises(ValueError, match="is int8; the operands are fp16"):
        checks.checked(np.zeros((4, 16), np.float16), np.zeros((16, 8), np.float16), None, "int8_wgmma", "tuned", None)


_A, _B = np.zeros((4, 16), np.float16), np.zeros((16, 8), np.float16)


@pytest.mark.parametrize("given,fields", [
    ((0.5, None, None, None), dict(scale_a="tensor")),
    ((np.ones(1, np.float32), np.ones((1, 8), np.float32), None, None), dict(scale_a="tensor", scale_b="col")),
    ((np.ones((4, 1), np.float32), np.float32(2.0), np.ones(8, np.float32), "silu"),
     dict(scale_a="row", scale_b="tensor", bias=True, act="silu")),
    ((None, None, None, "gelu"), dict(act="gelu")),
])
def test_the_epilogues_arguments_become_its_fields(given, fields):
    shape = checks.checked(_A, _B, None, None, "tuned", None, None, None, given)
    assert shape.epilogue == dict(dict(scale_a="", scale_b="", bias=False, act=""), **fields)
    named = checks.checked(_A, _B, None, "fp16_ptx_mma", "tuned", None, None, None, given).cfg
    assert all(getattr(named, k) == v for k, v in fields.items())


@pytest.mark.parametrize("a,given,error,message", [
    (_A, (np.ones(5, np.float32), None, None, None), ValueError, r"scale_a must have shape \(4,\) or \(4, 1\)"),
    (_A, (None, np.ones((8, 1), np.float32), None, None), ValueError, r"scale_b must have shape \(8,\) or \(1, 8\)"),
    (_A, (None, None, np.ones((1, 8), np.float32), None), ValueError, r"bias must have shape \(8,\) for C"),
    (_A, (np.ones(4), None, None, None), TypeError, "scale_a must be float32; got dtype float64"),
    (_A, (None, None, 1.0, None), TypeError, "bias must be a float32 NumPy array, as a and b are; got float"),
    (_A, (None, None, None, "tanh"), ValueError, "activation must be one of relu, gelu, silu or None"),
])
def test_bad_epilogue_arguments_are_named(a, given, error, message):
    b = _B if a.dtype == np.float16 else np.zeros((8, 16), np.int8).T
    with pytest.raises(error, match=message):
        checks.checked(a, b, None, None, "tuned", None, None, None, given)


@pytest.mark.parametrize("a,out,error,message", [
    (_A, np.zeros((4, 8), np.float32), TypeError, "out must be a device array"),
    (_A, Shaped((8, 4)), ValueError, r"out has shape \(8, 4\); expected \(4, 8\)"),
    (np.zeros((2, 4, 16), np.float16), Shaped((4, 8)), ValueError, r"expected \(2, 4, 8\)"),
])
def test_a_bad_out_is_refused_before_a_gpu(a, out, error, message):
    with pytest.raises(error, match=message):
        checks.checked(a, _B, None, None, "tuned", None, out)
    right = Shaped((2, 4, 8) if a.ndim == 3 else (4, 8))
    assert checks.checked(a, _B, None, None, "tuned", None, right).mnk == (4, 8, 16)


def test_a_kernel_that_cannot_apply_the_epilogue_is_refused():
    with pytest.raises(ValueError, match="fp16_wmma.* cannot apply the epilogue.*op=wmma"):
        checks.checked(_A, _B, None, "fp16_wmma", "tuned", None, None, None, (None, None, None, "relu"))
    with_bias = numgemm.registry.get("fp16_ptx_mma").replace(bias=True)
    with pytest.raises(ValueError, match="applies .*'bias': True.*the call asks for .*'bias': False"):
        checks.checked(_A, _B, None, with_bias, "tuned", None)


def test_a_row_scaled_kernel_takes_one_scale_for_one_row():
    """At M = 1 a one-element scale_a is a row's as well as the tensor's: a
    kernel named with scale_a="row" takes it (the bench's W8A8 at M = 1); at
    M = 2 it is refused."""
    rowwise = numgemm.registry.get("fp16_ptx_mma").replace(scale_a="row")
    one = np.ones(1, np.float32)
    shape = checks.checked(_A[:1], _B, None, rowwise, "tuned", None, None, None, (one, None, None, None))
    assert shape.cfg.scale_a == "row" and shape.epilogue["scale_a"] == "row"
    with pytest.raises(ValueError, match="applies .*'scale_a': 'row'.*the call asks for .*'scale_a': 'tensor'"):
        checks.checked(_A[:2], _B, None, rowwise, "tuned", None, None, None, (one, None, None, None))


def test_gemms_choice_sums_split_k_in_its_own_kernel_for_an_epilogue():
    cfg = numgemm.registry.get("fp16_ptx_mma_m16").replace(split_k=4, split_sum="last")
    fields = dict(scale_a="", scale_b="", bias=True, act="relu")
    assert checks.with_epilogue(cfg, fields, chosen=True).split_sum == "kernel"
    with pytest.raises(ValueError, match="cannot apply the epilogue"):
        checks.with_epilogue(cfg, fields)


@pytest.mark.parametrize("out_dtype,want", [(None, np.float32), ("bfloat16", np.uint16), (np.float16, np.float16),
                                            (np.uint16, np.uint16)])
def test_fp8s_c_is_float32_bfloat16_or_float16(out_dtype, want):
    """As torch._scaled_mm gives it: the f32 sums, or rounded to bfloat16 (its bits) or float16."""
    a, b = np.zeros((4, 32), np.uint8), np.zeros((8, 32), np.uint8).T
    shape = checks.checked(a, b, "e4m3", "e4m3_wgmma", "tuned", None, None, out_dtype)
    assert shape.c_dtype == want and shape.cfg.c_dtype == want
    assert shape.cfg.out == {np.float32: "", np.uint16: "bf16", np.float16: "f16"}[want]


def test_int8s_c_is_float_only_through_an_epilogue():
    """W8A8: INT8's exact int32 sums, or through an epilogue float32 (default), bfloat16 or float16."""
    a, b = np.zeros((4, 32), np.int8), np.zeros((8, 32), np.int8).T
    scales = (np.ones((4, 1), np.float32), np.ones((1, 8), np.float32), None, None)
    assert checks.checked(a, b, None, None, "tuned", None, None, None, scales).c_dtype == np.float32
    assert checks.checked(a, b, None, "int8_wgmma", "tuned", None, None, "bfloat16", scales).cfg.out == "bf16"
    with pytest.raises(TypeError, match="out_dtype: int8 gives C as int32; got bfloat16"):
        checks.checked(a, b, None, None, "tuned", None, None, "bfloat16")
    with pytest.raises(TypeError, match="int8 gives C as float32 or float16 or bfloat16 through the epilogue"):
        checks.checked(a, b, None, None, "tuned", None, None, "int32", scales)
