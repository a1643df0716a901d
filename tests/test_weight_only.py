"""numgemm.weight_only: W4A16, gemm(x, prepack_w4(...)), against float64;
its checks without a GPU, and its kernels built offline."""

import dataclasses

import numpy as np
import pytest

import numgemm
from numgemm import operands
from numgemm.precision import PRECISIONS
from numgemm.quant import dequantize_w4, prepack_w4


def layer(rng, n, k, precision="fp16", zeros=False):
    """(PackedW4, its float64 N x K weight) of fresh random weights, scales and zero points."""
    w = rng.integers(0, 16, (n, k)) if zeros else rng.integers(-8, 8, (n, k))
    s = rng.uniform(0.005, 0.02, (n, k // 128)).astype(np.float32)
    z = rng.integers(0, 16, (n, k // 128)) if zeros else None
    p = prepack_w4(w, s, z, precision=precision)
    bits = p.scales.T if precision == "bf16" else p.scales.T.view(np.float16)   # the scales as rounded
    return p, dequantize_w4(w, bits, z)


def activations(rng, shape, precision):
    x = rng.standard_normal(shape).astype(np.float32)
    return PRECISIONS[precision].encode(x)          # float16, or bfloat16's bits


def test_a_kernel_that_cannot_be_built_is_refused_by_name():
    from numgemm.kernel.w4a16 import W4A16

    with pytest.raises(ValueError, match="65536 bytes of shared memory"):
        W4A16(mtiles=4, n8s=4)
    with pytest.raises(ValueError, match="1 with half"):
        W4A16(mtiles=2, half=True)


def test_the_checks_refuse_bad_calls_before_a_gpu(rng):
    p, _ = layer(rng, 16, 256)
    x = np.ones((3, 256), np.float16)
    with pytest.raises(ValueError, match="takes a, out, out_dtype and stream only; got scale_a, bias"):
        numgemm.gemm(x, p, scale_a=2.0, bias=np.ones(16, np.float32))
    with pytest.raises(TypeError, match="a must be float16 for this weight .*got dtype float32"):
        numgemm.gemm(x.astype(np.float32), p)
    with pytest.raises(ValueError, match=r"K = 256 \(the weight's\), got shape \(3, 128\)"):
        numgemm.gemm(x[:, :128], p)
    with pytest.raises(ValueError, match="out_dtype must be float16 .* or float32"):
        numgemm.gemm(x, p, out_dtype="bfloat16")
    from numgemm.weight_only import checked
    assert checked(x, p, None, np.float32, {}) == (3, "f32") and checked(x, p, None, None, {}) == (3, "f16")
    pb, _ = layer(rng, 16, 256, "bf16")
    with pytest.raises(TypeError, match="a must be bfloat16 or uint16"):
        numgemm.gemm(x, pb)


@pytest.mark.builds
@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90"])
def test_the_kernels_build_offline_without_local_memory(target):
    from numgemm.kernel.w4a16 import W4A16, choose
    from numgemm.sass import build_many

    specs = {choose(1, 8192, 132), choose(16, 8192, 132), choose(64, 4096, 132),
             W4A16("bf16", "bf16", zeros=True, n8s=2), W4A16(out="f32", n8s=2, mtiles=4, min_blocks=1), W4A16(ring=4)}
    for spec in specs:
        b = build_many(spec.function(), spec.argtypes(), [target], name=spec.name,
                       launch_bounds=(spec.threads, spec.min_blocks))[target]
        steps = spec.n8s * spec.mtiles * 8               # mma.sync m16n8k16 a group
        assert b.sass.count("HMMA.16816.F32") == steps, spec.name
        assert b.local_bytes == 0 and "LDL" not in b.sass, spec.name


CASES = [("fp16", False, 1, 8, 128), ("fp16", True, 5, 136, 640), ("fp16", False, 16, 1032, 256),
         ("fp16", True, 37, 264, 384), ("fp16", False, 100, 520, 1024), ("bf16", False, 1, 264, 512),
         ("bf16", True, 16, 40, 256), ("bf16", False, 70, 1024, 384)]


@pytest.mark.gpu
@pytest.mark.parametrize("precision, zeros, M, N, K", CASES)
def test_w4a16_matches_the_dequantised_product(rng, precision, zeros, M, N, K):
    from numba import cuda

    p, w = layer(rng, N, K, precision, zeros)
    x = activations(rng, (M, K), precision)
    want = PRECISIONS[precision].decode(x) @ w.T
    got = numgemm.gemm(x, p)                                         # NumPy in, NumPy out
    assert got.shape == (M, N) and got.dtype == PRECISIONS[precision].narrow_out
    assert operands.mismatch(got, want, precision) is None
    out = cuda.to_device(np.full((M, N), np.nan, np.float32))        # poisoned, then float32 C
    assert numgemm.gemm(cuda.to_device(x), p, out=out) is out
    assert operands.mismatch(out.copy_to_host(), want, precision) is None


@pytest.mark.gpu
@pytest.mark.parametrize("fields", [dict(ring=2), dict(ring=3, swap=True, n8s=2), dict(ring=5, n8s=2),
                                    dict(swap=True, n8s=2), dict(swap=True, n8s=4)], ids=str)
def test_w4a16_variants_match_the_dequantised_product(rng, monkeypatch, fields):
    """gemm()'s kernel with fields changed (numgemm.kernel.w4a16's variants, as
    scripts/w4a16.py runs them); swap where the kernel takes it (M <= 8: the
    others keep their kernel), its pairs of column blocks past N where N is
    no multiple of 16 or 32."""
    from numgemm.kernel import w4a16

    chosen = w4a16.choose

    def variant(*args, **kw):
        spec = chosen(*args, **kw)
        if "swap" in fields and not spec.half:
            return spec
        return dataclasses.replace(spec, **fields)
    monkeypatch.setattr(w4a16, "choose", variant)
    for precision, zeros, M, N, K in CASES:
        p, w = layer(rng, N, K, precision, zeros)
        x = activations(rng, (M, K), precision)
        got = numgemm.gemm(x, p)
        assert operands.mismatch(got, PRECISIONS[precision].decode(x) @ w.T, precision) is None, (M, N, K)


@pytest.mark.gpu
def test_w4a16_batched_torch_in_torch_out_on_torchs_stream(rng):
    torch = pytest.importorskip("torch")
    p, w = layer(rng, 264, 512, "fp16", True)
    x = activations(rng, (2, 3, 512), "fp16")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        xt = torch.from_numpy(x).cuda()
        c = numgemm.gemm(xt, p)
        c2 = numgemm.gemm(xt, p, out_dtype="float32")
    s.synchronize()
    assert isinstance(c, torch.Tensor) and c.shape == (2, 3, 264) and c.dtype == torch.float16
    want = x.astype(np.float64) @ w.T
    assert operands.mismatch(c.cpu().numpy(), want, "fp16") is None
    assert c2.dtype == torch.float32 and operands.mismatch(c2.cpu().numpy(), want, "fp16") is None


@pytest.mark.gpu
def test_w4a16_layers_in_turn_stay_right(rng):
    """Weights of several layers, called in turn as a model's forward does:
    each weight's device copy is its own."""
    layers = [layer(rng, 8 * int(rng.integers(1, 40)), 128 * int(rng.integers(1, 6)), "fp16",
                    bool(rng.integers(2))) for _ in range(6)]
    p, _ = layers[0]
    assert numgemm.gemm(np.zeros((0, p.k), np.float16), p).shape == (0, p.n)       # no rows: an empty C
    for _ in range(3):
        for p, w in layers:
            M = int(rng.integers(1, 40))
            x = activations(rng, (M, p.k), "fp16")
            assert operands.mismatch(numgemm.gemm(x, p), x.astype(np.float64) @ w.T, "fp16") is None
