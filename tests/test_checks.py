"""numgemm.checks: what gemm() checks before any GPU is needed (gemm()'s own
refusals, through the public call, are in test_api)."""

import numpy as np
import pytest

import numgemm
from numgemm import checks


def test_a_named_kernel_says_the_precision_a_dtype_leaves_open():
    """Packed INT4 is uint8, which names no precision: a named INT4 kernel does."""
    a, b = np.zeros((4, 16), np.uint8), np.zeros((8, 16), np.uint8).T
    assert checks.checked(a, b, None, "int4_wgmma_unpack_s8", "tuned", None).precision == "int4"
    assert checks.checked(a, b, None, numgemm.registry.get("int4_ptx_mma_k64"), "tuned", None).precision == "int4"
    with pytest.raises(ValueError, match="is int8; the operands are fp16"):
        checks.checked(np.zeros((4, 16), np.float16), np.zeros((16, 8), np.float16), None, "int8_wgmma", "tuned", None)
