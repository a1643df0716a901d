"""numgemm.weight_only: W4A16, gemm(x, prepack_w4(...)), against float64;
its checks without a GPU, and its kernels built offline."""

import dataclasses

import numpy as np
import pytest

import numgemm
from numgemm import operands
from numgemm.precision import NARROW, PRECISIONS
from numgemm.quant import dequantize_w4, prepack_w4
from tests.conftest import Shaped


def layer(rng, n, k, precision="fp16", zeros=False, rows=None):
    """(PackedW4, its float64 N x K weight) of fresh random weights, scales and
    zero points; rows: the M of the calls it is the reference of, each weight
    rounded as gemm() rounds it for so many rows (weight_only.rounds)."""
    w = rng.integers(0, 16, (n, k)) if zeros else rng.integers(-8, 8, (n, k))
    s = rng.uniform(0.005, 0.02, (n, k // 128)).astype(np.float32)
    z = rng.integers(0, 16, (n, k // 128)) if zeros else None
    p = prepack_w4(w, s, z, precision=precision)
    bits = p.scales.T if precision == "bf16" else p.scales.T.view(np.float16)   # the scales as rounded
    from numgemm.weight_only import rounds
    return p, dequantize_w4(w, bits, z, None if rows is None else rounds(rows, p))



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
    with pytest.raises(TypeError, match="out must be a device array"):
        numgemm.gemm(x, p, out=np.empty((3, 16), np.float16))
    with pytest.raises(ValueError, match=r"out has shape \(16, 3\); expected \(3, 16\)"):
        numgemm.gemm(x, p, out=Shaped((16, 3)))
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


@pytest.mark.builds
def test_the_wgmma_kernels_build_offline_for_sm_90a_without_local_memory():
    """Every tile, both formats, zero points, C in float32, a k-tile in one
    commit group and in two; ptxas's serialised wgmmas refused (strict): a
    k-tile is four wgmmas, the A registers of each group widened before its
    fence."""
    from numgemm.kernel.w4a16_wgmma import W4A16Wgmma, choose
    from numgemm.sass import build_many

    specs = {choose(64, 8192), choose(256, 8192), W4A16Wgmma("bf16", "bf16", zeros=True, bn=64, wgs=1, stages=5),
             W4A16Wgmma(out="f32", bn=256, wgs=1, stages=4), W4A16Wgmma(groups=1), W4A16Wgmma(groups=2),
             W4A16Wgmma("bf16", "bf16", zeros=True, bn=64, wgs=1, stages=5, copy="tma"),
             W4A16Wgmma(bn=256, wgs=1, stages=4, copy="tma")}
    for spec in specs:
        b = build_many(spec.function(), spec.argtypes(), ["sm_90a"], name=spec.name,
                       launch_bounds=(spec.threads, 1), strict_ptxas=True)["sm_90a"]
        kind = "F32.BF16" if spec.act == "bf16" else "F32"
        mmas = [ln for ln in b.sass.splitlines() if "HGMMA." in ln]
        assert len(mmas) == 8 and all(f"HGMMA.64x{spec.bn}x16.{kind} " in ln for ln in mmas), spec.name
        assert b.local_bytes == 0 and "LDL" not in b.sass, spec.name
        tma = spec.copy == "tma"            # one thread's TMA box and bulk copies, no thread's cp.async
        assert ("UTMALDG" in b.sass and "UBLKCP" in b.sass) == tma and ("LDGSTS" in b.sass) != tma, spec.name


@pytest.mark.builds
@pytest.mark.parametrize("act, out", [("fp16", "f16"), ("bf16", "bf16")])
def test_the_wgmma_kernels_round_c_only_after_staging_it(act, out):
    """16-bit C is rounded from the staged f32 values after the barrier: every
    F2FP follows the last wgmma wait and the last staging store. Rounded as
    accumulators, the H100 image's ptxas put them above the wait, and C's
    rows missed their last k16 steps."""
    import re

    from numgemm.kernel.w4a16_wgmma import W4A16Wgmma
    from numgemm.sass import build_many

    spec = W4A16Wgmma(act=act, out=out, bn=128, wgs=2, stages=6)
    b = build_many(spec.function(), spec.argtypes(), ["sm_90a"], name=spec.name,
                   launch_bounds=(spec.threads, 1), strict_ptxas=True)["sm_90a"]
    lines = b.sass.splitlines()

    def at(pattern):
        return [i for i, ln in enumerate(lines) if re.search(pattern, ln)]

    f2fp, stores, waits = at(r"\bF2FP\."), at(r"\bSTS\b"), at(r"WARPGROUP\.DEPBAR")
    assert len(f2fp) == spec.cols * spec.bn // spec.threads // 2 and stores and waits, spec.name
    assert min(f2fp) > max(stores) > max(waits), spec.name


def test_tma_copies_only_whole_aligned_pieces_else_cp_async():
    """A weight's pieces go by bulk copy only where each starts at a 16-byte
    boundary and is a multiple of 16 bytes (zero points: N a multiple of 16);
    weight_only.gemm runs cp.async's kernel otherwise."""
    from types import SimpleNamespace

    from numgemm.weight_only import _bulk_copies

    def at(address):
        return SimpleNamespace(device_ctypes_pointer=SimpleNamespace(value=address))
    assert _bulk_copies(at(256), at(1024), None, 8) and _bulk_copies(at(256), at(1024), at(512), 32)
    assert not _bulk_copies(at(256), at(1032), None, 8) and not _bulk_copies(at(264), at(1024), None, 8)
    assert not _bulk_copies(at(256), at(1024), at(512), 40) and not _bulk_copies(at(256), at(1024), at(520), 32)


def test_wgmma_runs_from_its_rows_on_hopper_with_one_group_of_k_at_least(rng):
    """The wgmma kernel's k loop makes one pass at least: a weight of no K
    (a call of no products) goes to mma.sync, whose loop may make none."""
    from types import SimpleNamespace

    from numgemm.weight_only import WGMMA_ROWS, _on_wgmma
    hopper, ada = SimpleNamespace(compute_capability=(9, 0)), SimpleNamespace(compute_capability=(8, 9))
    p, _ = layer(rng, 16, 256)
    assert _on_wgmma(WGMMA_ROWS, p, hopper)
    assert not _on_wgmma(WGMMA_ROWS - 1, p, hopper) and not _on_wgmma(WGMMA_ROWS, p, ada)
    assert not _on_wgmma(WGMMA_ROWS, SimpleNamespace(k=0, wgmma_words=p.words), hopper)
    with pytest.raises(ValueError, match=r"K of 128 \(its groups\), got \(16, 0\)"):
        prepack_w4(np.zeros((16, 0), np.int8), np.zeros((16, 0), np.float32))


def test_a_variant_changes_the_chosen_kernel_and_then_gives_the_choice_back(rng):
    """weight_only.variant: inside it choose() gives its kernel with the
    fields changed (rows: WGMMA_ROWS), a field the chosen kernel lacks is a
    TypeError at the call, and on leaving, even by an exception, choose()
    and WGMMA_ROWS are as they were."""
    from types import SimpleNamespace

    from numgemm import weight_only
    from numgemm.kernel.w4a16 import W4A16
    from numgemm.kernel.w4a16_wgmma import W4A16Wgmma
    hopper = SimpleNamespace(compute_capability=(9, 0), MULTIPROCESSOR_COUNT=132)
    c = SimpleNamespace(device_ctypes_pointer=SimpleNamespace(value=256), strides=(512, 2))
    p, _ = layer(rng, 256, 256)
    before = weight_only.choose, weight_only.WGMMA_ROWS
    assert isinstance(weight_only.choose(1, 256, p, "f16", hopper, c), W4A16)
    with weight_only.variant(rows=1, copy="tma", stages=5):
        spec = weight_only.choose(1, 256, p, "f16", hopper, c)
        assert isinstance(spec, W4A16Wgmma) and (spec.copy, spec.stages) == ("tma", 5)
    with pytest.raises(TypeError, match="copy"), weight_only.variant(copy="tma"):
        weight_only.choose(1, 256, p, "f16", hopper, c)         # M = 1: mma.sync's kernel, no copy field
    assert (weight_only.choose, weight_only.WGMMA_ROWS) == before


def test_a_wgmma_tile_that_cannot_be_built_is_refused_by_name():
    from numgemm.kernel.w4a16_wgmma import W4A16Wgmma

    with pytest.raises(ValueError, match="bn one of"):
        W4A16Wgmma(bn=96)
    with pytest.raises(ValueError, match="groups=3"):
        W4A16Wgmma(groups=3)
    with pytest.raises(ValueError, match="groups=1, bn=256"):
        W4A16Wgmma(groups=1, bn=256, wgs=1, stages=4)
    with pytest.raises(ValueError, match="stages 4..8"):
        W4A16Wgmma(stages=9)
    with pytest.raises(ValueError, match="more than the 227 KiB"):
        W4A16Wgmma(bn=256, wgs=2, stages=8)


CASES = [("fp16", False, 1, 8, 128), ("fp16", True, 5, 136, 640), ("fp16", False, 16, 1032, 256),
         ("fp16", True, 37, 264, 384), ("fp16", False, 100, 520, 1024), ("bf16", False, 1, 264, 512),
         ("bf16", True, 16, 40, 256), ("bf16", False, 70, 1024, 384)]


@pytest.mark.gpu
@pytest.mark.parametrize("precision, zeros, M, N, K", CASES)
def test_w4a16_matches_the_dequantised_product(rng, precision, zeros, M, N, K):
    from numba import cuda

    p, w = layer(rng, N, K, precision, zeros, rows=M)
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
        p, w = layer(rng, N, K, precision, zeros, rows=M)
        x = activations(rng, (M, K), precision)
        got = numgemm.gemm(x, p)
        assert operands.mismatch(got, PRECISIONS[precision].decode(x) @ w.T, precision) is None, (M, N, K)


# (zero points where N is not a multiple of 16 leave TMA's bulk copies for cp.async)
WGMMA_CASES = [("fp16", False, 1, 8, 128), ("fp16", True, 70, 136, 640), ("fp16", False, 256, 1032, 256),
               ("bf16", False, 129, 264, 512), ("bf16", True, 64, 40, 1024), ("fp16", False, 300, 2048, 768),
               ("fp16", True, 100, 272, 384)]


@pytest.mark.gpu
@pytest.mark.parametrize("fields", [{}, dict(bn=64, wgs=1, stages=4), dict(bn=256, wgs=1, stages=4, groups=2),
                                    dict(bn=128, wgs=1, stages=5), dict(out="f32"), dict(groups=2, bn=128),
                                    dict(copy="tma"), dict(copy="tma", bn=64, wgs=1, stages=4),
                                    dict(copy="tma", bn=256, wgs=1, stages=4, groups=2)],
                         ids=str)
def test_w4a16_wgmma_matches_the_rounded_weights(rng, fields):
    """The wgmma kernel at every M (WGMMA_ROWS = 1), its tiles and C in
    float32: against the product with each weight rounded to the activations'
    format at f32 sums' tolerance, and against the unrounded one at the
    format's own rounding; rows past M and N and one group of K among them."""
    from numba import cuda

    from numgemm import weight_only
    from numgemm.kernel.w4a16_wgmma import W4A16Wgmma
    if cuda.get_current_device().compute_capability < (9, 0):
        pytest.skip("wgmma is sm_90a's")
    for precision, zeros, M, N, K in WGMMA_CASES:
        seed = int(rng.integers(1 << 30))
        (p, rounded), (_, exact) = (layer(np.random.default_rng(seed), N, K, precision, zeros, rows)
                                    for rows in (M, None))             # (WGMMA_ROWS = 1: rounded at every M)
        x = activations(rng, (M, K), precision)
        c_type = np.float32 if fields.get("out") == "f32" else PRECISIONS[precision].narrow_out
        out = cuda.to_device(np.full((M, N), np.nan, np.float32).astype(c_type) if c_type != np.uint16
                             else np.full((M, N), 0x7FC0, np.uint16))       # poisoned: NaN in either format
        with weight_only.variant(rows=1, **fields):
            chosen, picked = weight_only.choose, []         # the kernel gemm() runs (variant puts choose back)
            weight_only.choose = lambda *args: picked.append(chosen(*args)) or picked[-1]
            numgemm.gemm(cuda.to_device(x), p, out=out)
        assert isinstance(picked[-1], W4A16Wgmma), picked[-1]
        got, a = out.copy_to_host(), PRECISIONS[precision].decode(x)
        assert operands.mismatch(got, a @ rounded.T, precision) is None, (M, N, K)
        err = np.linalg.norm(PRECISIONS[precision].decode(got) - a @ exact.T) / np.linalg.norm(a @ exact.T)
        assert err < 2.0 ** -NARROW[PRECISIONS[precision].narrow].digits, (M, N, K, err)


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
            M = int(rng.integers(1, 100))                 # mma.sync, and from 64 rows wgmma on Hopper
            x = activations(rng, (M, p.k), "fp16")
            assert operands.mismatch(numgemm.gemm(x, p), x.astype(np.float64) @ w.T, "fp16") is None
