"""numgemm.gemm under fuzzing: every registered kernel, and gemm()'s own
choice, at random shapes against the exact product.

M, N and K are drawn from [1, 3000], often from the shapes that break
kernels: 1, primes, a tile's size plus or minus one, a k-tile plus or minus
one; the batch from 1 to 3, B batched or shared; NumPy inputs, and torch
inputs with a poisoned out (where torch is installed). The product's volume
is capped so that the float64 reference stays quick: integer products are
exact in float64 here (|sum| <= 3000 * 128 * 128 < 2**53). Every failure
names its seed: NUMGEMM_FUZZ_SEED=<seed> draws the same cases again.
"""

import os

import numpy as np
import pytest

from numgemm import operands, registry
from numgemm.precision import NARROW, PRECISIONS

REGISTERED = [(p, n) for p in registry.PRESETS for n in registry.names(p)]
CASES_PER_KERNEL = 3
MAX_VOLUME = 2**29                  # batch * M * N * K
PRIMES = (2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 2999)


@pytest.fixture
def seeded(request):
    seed = int(os.environ.get("NUMGEMM_FUZZ_SEED", np.random.SeedSequence().entropy % 2**32))
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed), seed


def draw(rng, cfg=None):
    """(batch, M, N, K, B shared): one case, its sizes often at a tile's edges."""
    bm, bn, bk = (cfg.bm, cfg.bn, cfg.bk) if cfg is not None else (128, 128, 64)
    edges = {"M": (bm - 1, bm + 1, 2 * bm + 1), "N": (bn - 1, bn + 1, 2 * bn + 1), "K": (bk - 1, bk + 1, 3 * bk + 1)}

    def size(axis):
        r = rng.random()
        if r < 0.2:
            return 1
        if r < 0.4:
            return int(rng.choice(PRIMES))
        if r < 0.6:
            return max(1, int(rng.choice(edges[axis])))
        return int(rng.integers(1, 3001))
    batch, M, N, K = int(rng.integers(1, 4)), size("M"), size("N"), size("K")
    while batch * M * N * K > MAX_VOLUME:           # halve the largest until it is quick to check
        dims = [M, N, K]
        i = int(np.argmax(dims))
        dims[i] = max(1, dims[i] // 2)
        M, N, K = dims
    return batch, M, N, K, bool(rng.integers(0, 2))


def reference(precision, a, bt):
    """float64 product (int64 for the integers) of values()' operands."""
    prec = PRECISIONS[precision]
    return np.matmul(prec.decode(a), prec.decode(np.swapaxes(bt, -1, -2) if prec.exact else bt))


def run_case(precision, cfg, kernel, preset, case, rng, use_torch):
    """Why gemm() differs from the reference on this case, or None."""
    batch, M, N, K, shared = case
    a, b = operands.values(precision, batch, M, N, K, rng)
    if shared:
        b = b[:1]
    ref = reference(precision, a, b)
    if batch == 1:                  # 2-D operands and product
        a, b, ref = a[0], b[0], ref[0]
    layout = cfg.b_layout if cfg is not None else registry.choice_layout(precision)
    x, y = operands.in_layout(precision, layout, a, b[0] if shared and b.ndim == 3 else b)
    use_torch = use_torch and y.dtype != np.uint16      # torch has no uint16 on the GPU to speak of
    kw = dict(precision=precision, kernel=kernel, preset=preset, k=K if precision == "int4" else None)
    acc = cfg.acc if cfg is not None else ""
    import numgemm

    if use_torch:
        import torch

        def dev(v):     # a device tensor with v's values and strides (B transposed stays a view)
            t = torch.from_numpy(np.ascontiguousarray(v) if v.flags.c_contiguous or v.ndim < 2 else
                                 np.ascontiguousarray(np.swapaxes(v, -1, -2))).cuda()
            return t if v.flags.c_contiguous or v.ndim < 2 else t.transpose(-1, -2)
        c = np.dtype(cfg.c_dtype if cfg is not None else PRECISIONS[precision].out_dtype)
        bits = c == np.uint16                   # a bfloat16 C: torch's bfloat16, compared as its bits
        dtype = torch.bfloat16 if bits else getattr(torch, c.name)
        poison = float("nan") if bits or c.kind == "f" else -(2**31)
        out = torch.full(ref.shape, poison, dtype=dtype, device="cuda")
        numgemm.gemm(dev(x), dev(y), out=out, **kw)
        got = out.view(torch.int16).cpu().numpy().view(np.uint16) if bits else out.cpu().numpy()
    else:
        got = numgemm.gemm(x, y, **kw)
    got = np.asarray(got)
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}"
    return operands.mismatch(got, ref, precision, acc)


def fuzz(precision, cfg, kernel, preset, seeded, cases):
    rng, seed = seeded
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
    for i in range(cases):
        case = draw(rng, cfg)
        why = run_case(precision, cfg, kernel, preset, case, rng, have_torch and i % 2 == 1)
        assert why is None, (f"{kernel or 'default'} ({preset}) at batch, M, N, K, B shared = {case}: {why}; "
                             f"NUMGEMM_FUZZ_SEED={seed}")


@pytest.mark.gpu
@pytest.mark.parametrize("preset,name", REGISTERED)
def test_fuzz_kernel(preset, name, seeded):
    from numba import cuda

    cfg = registry.get(name, preset)
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    fuzz(cfg.precision, cfg, name, preset, seeded, CASES_PER_KERNEL)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "e4m3", "e5m2", "int8", "int4"])
def test_fuzz_default_choice(precision, seeded):
    """gemm()'s own choice per shape (tuned winners, split-K, small-M tiles)."""
    fuzz(precision, None, None, "tuned", seeded, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "bf16", "e4m3", "int8"])
def test_fuzz_epilogue(precision, seeded):
    """gemm()'s own choice through a random epilogue each case (scales per
    tensor, row or column, a bias, an activation; NumPy vectors, or a scale as
    a number), C in float32 or a narrow format the precision has (INT8: any),
    against float64."""
    import numgemm

    rng, seed = seeded
    prec = PRECISIONS[precision]
    for _ in range(12):
        batch, M, N, K, _ = draw(rng)
        fields = {"scale_a": ("", "tensor", "row")[rng.integers(3)], "scale_b": ("", "tensor", "col")[rng.integers(3)],
                  "bias": bool(rng.integers(2)), "act": ("", "relu", "gelu", "silu")[rng.integers(4)]}
        sa, sb, bias = operands.epilogue_vectors(fields, M, N, rng)
        if sa is not None and sa.size == 1 and rng.random() < 0.5:
            sa = float(sa[0])
        a, b = operands.values(precision, batch, M, N, K, rng)
        want = operands.through_epilogue(reference(precision, a, b), sa, sb, bias, fields["act"] or None)
        x, y = operands.in_layout(precision, registry.choice_layout(precision), a, b)
        # INT8's sums reach 2**24 here, past float16's range once scaled: its C is float32 or bfloat16
        formats = [None, *(("float32", "bfloat16") if prec.exact else (NARROW[n].dtype_name for n in prec.narrows))]
        if prec.exact and not any(fields.values()):
            formats = [None]            # no epilogue: its exact int32 sums
        out_dtype = formats[rng.integers(len(formats))]
        got = numgemm.gemm(x, y, precision=precision, scale_a=sa, scale_b=sb, bias=bias,
                           activation=fields["act"] or None, out_dtype=out_dtype)
        why = operands.mismatch(got, want, precision)
        assert why is None, (f"{fields} at {(batch, M, N, K)}, C {out_dtype or 'default'}: {why}; "
                             f"NUMGEMM_FUZZ_SEED={seed}")
