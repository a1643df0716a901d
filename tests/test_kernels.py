"""numgemm.kernels: every registered kernel, offline (SASS) and on the GPU (exact)."""

import numpy as np
import pytest

from numgemm import registry
from numgemm.kernels import build_config, expected_sass
from numgemm.quant import pack_int4, unpack_int4

REGISTERED = [(p, n) for p in registry.PRESETS for n in registry.names(p)]


@pytest.mark.parametrize("target", ["sm_89", "sm_90"])
@pytest.mark.parametrize("preset,name", REGISTERED)
def test_sass(preset, name, target):
    cfg = registry.get(name, preset)
    b = build_config(cfg, target)
    opcode, calls_expected = expected_sass(cfg, target)
    assert b.count(opcode) >= 1, f"{cfg.name} on {target}: no {opcode}"
    assert b.local_bytes == 0 and b.count("LDL") == 0 and b.count("STL") == 0, b.summary()
    if not calls_expected:
        assert b.calls == 0, f"{cfg.name} on {target} calls a function"
    if cfg.op == "mma":
        assert b.count("LDSM") >= 1 and b.count("LDGSTS") >= 1


def test_s4_on_hopper_is_emulated_not_native():
    cfg = registry.get("int4_ptx_mma_k64")
    hopper, ada = build_config(cfg, "sm_90"), build_config(cfg, "sm_89")
    assert hopper.count("IMMA.16864.S4") == 0 and hopper.calls > 0
    assert ada.count("IMMA.16864.S4.S4") > 0 and ada.calls == 0


def test_link_linkage_calls_the_ptx():
    cfg = registry.get("int8_ptx_mma_k32", "paper").replace(linkage="link")
    assert build_config(cfg, "sm_89").calls > 0


# --- on the GPU --------------------------------------------------------------------

SHAPES = [(2, 520, 1000, 776), (1, 64, 48, 128), (3, 17, 300, 96)]


def operands(precision, batch, M, N, K, rng):
    """Host a, b (b in the kernel's layout: fp16 K x N; int8/int4 a transposed N x K)
    and the exact reference."""
    if precision == "fp16":
        a = rng.standard_normal((batch, M, K)).astype(np.float16)
        b = rng.standard_normal((batch, K, N)).astype(np.float16)
        return a, b, a.astype(np.float64) @ b.astype(np.float64)
    lo = -128 if precision == "int8" else -8
    a = rng.integers(lo, -lo, (batch, M, K))
    bt = rng.integers(lo, -lo, (batch, N, K))
    ref = a @ np.swapaxes(bt, 1, 2)
    if precision == "int4":
        a, bt = pack_int4(a), pack_int4(bt)
        assert np.array_equal(unpack_int4(a, K), a_ := unpack_int4(a, K)) and a_.shape[-1] == K
    else:
        a, bt = a.astype(np.int8), bt.astype(np.int8)
    return a, np.swapaxes(bt, 1, 2), ref


def assert_matches(got, ref, precision):
    if precision == "fp16":
        assert np.all(np.isfinite(got))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-3
    else:
        np.testing.assert_array_equal(got.astype(np.int64), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("preset,name", REGISTERED)
def test_kernel_gpu(preset, name, shape, rng):
    from numba import cuda

    import numgemm

    cfg = registry.get(name, preset)
    batch, M, N, K = shape
    if cfg.precision == "int4":
        K -= 1                                           # odd K: a padded nibble
    a, b, ref = operands(cfg.precision, batch, M, N, K, rng)
    poison = np.nan if cfg.precision == "fp16" else -(2**31)
    out = cuda.to_device(np.full((batch, M, N), poison, np.dtype(cfg.prec.out_dtype)))
    numgemm.gemm(a, b, precision=cfg.precision, kernel=name, preset=preset, out=out, k=K)
    assert_matches(out.copy_to_host(), ref, cfg.precision)
