"""numgemm.torch: the custom operators' registration and fake implementations
(on meta tensors, no GPU), and torch.compile(fullgraph=True) of a function
calling them against eager (GPU)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import numgemm.torch  # noqa: E402 - registers the operators


def test_the_operators_are_registered():
    assert all(hasattr(torch.ops.numgemm, op) for op in ("gemm", "linear", "w4a16"))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("x_shape", [(5, 64), (2, 3, 64)])
def test_linear_fakes_nn_linears_shape(x_shape, dtype):
    x = torch.empty(x_shape, dtype=dtype, device="meta")
    w = torch.empty((48, 64), dtype=dtype, device="meta")
    y = torch.ops.numgemm.linear(x, w, torch.empty(48, dtype=dtype, device="meta"))
    assert y.shape == (*x_shape[:-1], 48) and y.dtype == dtype and y.device.type == "meta"


def test_gemm_fakes_cs_shape_and_dtype():
    a = torch.empty((3, 10, 32), dtype=torch.int8, device="meta")
    b = torch.empty((32, 7), dtype=torch.int8, device="meta")
    c = torch.ops.numgemm.gemm(a, b)
    assert c.shape == (3, 10, 7) and c.dtype == torch.int32
    h = torch.empty((10, 32), dtype=torch.float16, device="meta")
    assert torch.ops.numgemm.gemm(h, h.t()).dtype == torch.float32
    assert torch.ops.numgemm.gemm(h, h.t(), out_dtype=torch.float16).dtype == torch.float16
    bf = torch.empty((10, 32), dtype=torch.bfloat16, device="meta")
    assert torch.ops.numgemm.gemm(bf, bf.t()).dtype == torch.float32
    packed = torch.empty((10, 16), dtype=torch.uint8, device="meta")
    assert torch.ops.numgemm.gemm(packed, packed.t(), kernel="int4_wgmma_unpack_s8").dtype == torch.int32
    with pytest.raises(TypeError, match="cannot infer the precision"):
        torch.ops.numgemm.gemm(packed, packed.t())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_torch_compile_of_a_linear_layer_matches_eager(dtype):
    """A Linear's forward through numgemm::linear (its N x K weight read in
    place), compiled with fullgraph=True, as a model serves it (no autograd:
    the operators have no backward): eager's result, and torch's own."""
    lin = torch.nn.Linear(256, 136, dtype=dtype, device="cuda")
    x = torch.randn(3, 40, 256, dtype=dtype, device="cuda")

    def f(x):
        return torch.relu(torch.ops.numgemm.linear(x, lin.weight, lin.bias))
    with torch.no_grad():
        eager = f(x)
        compiled = torch.compile(f, fullgraph=True)(x)
        ref = torch.relu(lin(x).float())
    np.testing.assert_array_equal(compiled.float().cpu().numpy(), eager.float().cpu().numpy())   # (bf16: exactly)
    err = (eager.float() - ref).norm() / ref.norm()
    assert eager.dtype == dtype and err < (2e-3 if dtype == torch.float16 else 1e-2), err    # bf16: 8 bits of mantissa


def test_the_fake_gemm_of_int8_through_an_epilogue_is_float32():
    """W8A8 under torch.compile's tracing: C float32 by default, or the dtype asked."""
    a = torch.empty(16, 64, dtype=torch.int8, device="meta")
    s = torch.empty(16, 1, dtype=torch.float32, device="meta")
    assert torch.ops.numgemm.gemm(a, a.t(), scale_a=s).dtype == torch.float32
    assert torch.ops.numgemm.gemm(a, a.t(), scale_a=s, out_dtype=torch.bfloat16).dtype == torch.bfloat16
    assert torch.ops.numgemm.gemm(a, a.t()).dtype == torch.int32


def w4_layer(rng, n, k, precision, zeros):
    """(a W4Linear of fresh INT4 weights, its float64 N x K weight)."""
    from numgemm.quant import dequantize_w4, prepack_w4

    w = rng.integers(0, 16, (n, k)) if zeros else rng.integers(-8, 8, (n, k))
    z = rng.integers(0, 16, (n, k // 128)) if zeros else None
    p = prepack_w4(w, rng.uniform(0.005, 0.02, (n, k // 128)).astype(np.float32), z, precision=precision)
    bits = p.scales.T if precision == "bf16" else p.scales.T.view(np.float16)
    return numgemm.torch.W4Linear(p), dequantize_w4(w, bits, z)


def test_the_w4a16_operator_fakes_cs_shape_and_the_layer_holds_buffers(rng):
    layer, _ = w4_layer(rng, 40, 256, "bf16", True)
    assert {name for name, _ in layer.named_buffers()} == {"words", "scales", "zeros", "wgmma_words"}
    assert layer.words.shape == (5, 2, 32, 4) and layer.scales.shape == (2, 40) and layer.zeros.shape == (2, 40)
    assert layer.wgmma_words.shape == (3, 2, 2, 32, 4)
    x = torch.empty((3, 7, 256), dtype=torch.bfloat16, device="meta")
    y = torch.ops.numgemm.w4a16(x, layer.words.to("meta"), layer.scales.to("meta"), None, "bf16")
    assert y.shape == (3, 7, 40) and y.dtype == torch.bfloat16


@pytest.mark.gpu
@pytest.mark.parametrize("precision, zeros", [("fp16", False), ("bf16", True)])
@pytest.mark.parametrize("tokens", [9, 40])
def test_torch_compile_of_a_w4_linear_matches_eager(rng, precision, zeros, tokens):
    """W4Linear (its weight's arrays as buffers, moved with .cuda()) compiled
    with fullgraph=True: eager's result exactly, and the dequantised product;
    18 rows on mma.sync, 80 on Hopper's wgmma (its layout a buffer too)."""
    from numgemm import operands

    layer, w = w4_layer(rng, 264, 512, precision, zeros)
    layer = layer.cuda()
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    x = torch.randn(2, tokens, 512, dtype=dtype, device="cuda")
    with torch.no_grad():
        eager = layer(x)
        compiled = torch.compile(layer, fullgraph=True)(x)
    assert eager.dtype == dtype and eager.shape == (2, tokens, 264)
    np.testing.assert_array_equal(compiled.float().cpu().numpy(), eager.float().cpu().numpy())
    want = x.double().cpu().numpy() @ w.T
    got = eager.view(torch.int16).cpu().numpy().view(np.uint16) if dtype == torch.bfloat16 else eager.cpu().numpy()
    assert operands.mismatch(got, want, precision) is None
    with pytest.raises(TypeError, match="a must be"):
        layer(x.float())
