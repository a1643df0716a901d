"""numgemm.api: gemm() checks its operands before it needs the GPU, and on a GPU
takes NumPy, Numba, CuPy and PyTorch arrays."""

import numpy as np
import pytest

import numgemm
from tests.conftest import HAVE_GPU

#: Bad inputs, each with its exception and message: all refused before a GPU is needed.
BAD_INPUTS = [
    (np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32), {}, TypeError, "cannot infer the precision"),
    (np.zeros((4, 4), np.int8), np.zeros((4, 4), np.float16), {}, TypeError, "int8 takes b as int8"),
    (np.zeros((4, 4), np.uint8), np.zeros((4, 4), np.uint8), {}, TypeError, "cannot infer"),
    (np.zeros((4, 4), np.int8), np.zeros((4, 4), np.uint8), dict(precision="int4"), TypeError, "int4 takes a as packed uint8"),
    (np.zeros((4, 6), np.float16), np.zeros((5, 3), np.float16), {}, ValueError, "inner dimensions differ"),
    (np.zeros((2, 4, 6), np.float16), np.zeros((3, 6, 3), np.float16), {}, ValueError, "batch 3 is neither"),
    (np.zeros(4, np.float16), np.zeros((4, 4), np.float16), {}, ValueError, "2-D or batched 3-D"),
    (np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16), dict(precision="fp8"), ValueError, "precision must be"),
    (np.zeros((4, 3), np.uint8), np.zeros((3, 4), np.uint8), dict(precision="int4", k=9), ValueError, "does not fit"),
    ([[1]], np.zeros((4, 4), np.float16), dict(precision="fp16"), TypeError, "NumPy array or have __cuda_array_interface__"),
    # the kernel and preset are checked before the GPU is needed, a typo with the nearest names
    (np.zeros((4, 16), np.int8), np.zeros((8, 16), np.int8).T, dict(kernel="int8_ptx_mma_k23"), KeyError,
     "did you mean 'int8_ptx_mma_k32'"),
    (np.zeros((4, 16), np.int8), np.zeros((8, 16), np.int8).T, dict(kernel="int8_ptx_tma", preset="paper"),
     KeyError, "it is in preset 'tuned'"),
    (np.zeros((4, 16), np.int8), np.zeros((8, 16), np.int8).T, dict(preset="fast"), ValueError, "preset must be"),
    (np.zeros((4, 16), np.int8), np.zeros((8, 16), np.int8).T, dict(kernel=3), TypeError, "registered name"),
    (np.zeros((4, 16), np.int8), np.zeros((8, 16), np.int8).T, dict(kernel="fp16_ptx_mma"), ValueError,
     "is fp16; the operands are int8"),
    (np.full((4, 140000), -128, np.int8), np.full((4, 140000), -128, np.int8).T, {}, ValueError,
     "K <= 131071 keeps the worst case"),
    # C's dtype: FP16 has float32 or float16; the integers int32; an f16-accumulating kernel float16
    (np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16), dict(out_dtype="float64"), TypeError,
     "out_dtype: fp16 gives C as float32 or float16; got float64"),
    (np.zeros((4, 16), np.int8), np.zeros((8, 16), np.int8).T, dict(out_dtype=np.float16), TypeError,
     "out_dtype: int8 gives C as int32; got float16"),
    (np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16), dict(out_dtype="half precision"), TypeError,
     "out_dtype must name a NumPy dtype"),
    (np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16), dict(kernel="fp16_ptx_fp16acc", out_dtype="float32"),
     ValueError, "accf16.* stores C as float16, not float32"),
    (np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16), dict(kernel="fp16_wmma", out_dtype="float16"),
     ValueError, "fp16_wmma_.* cannot store C as float16: .*out=f16 rounds f32 sums in the mma and wgmma"),
    # bit patterns: uint16 and uint8 name no precision; BF16 rounds C to bfloat16, FP8 gives float32 only
    (np.zeros((4, 16), np.uint16), np.zeros((16, 4), np.uint16), {}, TypeError,
     "cannot infer the precision from dtype uint16"),
    (np.zeros((4, 16), np.uint8), np.zeros((8, 16), np.uint8).T, dict(precision="e4m3", out_dtype="float8_e4m3fn"),
     TypeError, "out_dtype: e4m3 gives C as float32 or bfloat16 or float16; got float8_e4m3fn"),
    (np.zeros((4, 16), np.uint16), np.zeros((16, 4), np.uint16), dict(precision="bf16", out_dtype="float16"),
     TypeError, "out_dtype: bf16 gives C as float32 or bfloat16; got float16"),
]


@pytest.mark.parametrize("a,b,kw,error,message", BAD_INPUTS)
def test_bad_input_is_named(a, b, kw, error, message):
    with pytest.raises(error, match=message):
        numgemm.gemm(a, b, **kw)


#: ... and those refused where the GPU's path reads the operands' strides.
ON_THE_GPU = [
    (np.zeros((4, 16), np.int8), np.zeros((16, 8), np.int8), {}, ValueError, "take B as NK"),
]


@pytest.mark.gpu
def test_every_refused_call_leaves_the_gpu_usable(rng):
    """The bad inputs above, on the GPU machine (where the checks after the
    GPU's own run too), each refused with its message and followed by a
    correct GEMM in the same context."""
    for a, b, kw, error, message in BAD_INPUTS + ON_THE_GPU:
        with pytest.raises(error, match=message):
            numgemm.gemm(a, b, **kw)
        x, yt = (rng.integers(-128, 128, s, dtype=np.int8) for s in ((33, 48), (20, 48)))
        np.testing.assert_array_equal(numgemm.gemm(x, yt.T), x.astype(np.int64) @ yt.T.astype(np.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp16", "int8", "int4"])
@pytest.mark.parametrize("M,N,K", [(1, 1, 2), (5, 1, 64), (1, 7, 2), (3, 9, 1), (1, 1, 1)])
@pytest.mark.parametrize("on_device", [False, True])
def test_one_wide_dimensions(precision, M, N, K, on_device, rng):
    """M, N or K of one, in the documented forms (INT8 and INT4: b = bt.T,
    packed for INT4; FP16: K x N): a one-wide B has both layouts' strides,
    and the documented form decides."""
    from numba import cuda

    from numgemm import operands

    a, bt = operands.values(precision, 1, M, N, K, rng)
    ref = operands.expected(precision, a, bt)[0]
    x, y = operands.in_layout(precision, "kn" if precision == "fp16" else "nk", a[0], bt[0])
    if on_device:                   # as device arrays, B still a transposed view
        x, y = cuda.to_device(x), (numgemm.transposed(cuda.to_device(np.ascontiguousarray(y.T)))
                                   if precision != "fp16" else cuda.to_device(y))
    got = numgemm.gemm(x, y, precision=precision, k=K if precision == "int4" else None)
    got = got if isinstance(got, np.ndarray) else got.copy_to_host()
    assert got.shape == (M, N)
    assert operands.mismatch(got[None], ref[None], precision) is None


@pytest.mark.parametrize("a,b,kw,shape,dtype", [
    (np.ones((0, 16), np.int8), np.ones((8, 16), np.int8).T, {}, (0, 8), np.int32),
    (np.ones((4, 16), np.int8), np.ones((0, 16), np.int8).T, {}, (4, 0), np.int32),
    (np.ones((4, 0), np.float16), np.ones((0, 3), np.float16), {}, (4, 3), np.float32),
    (np.ones((2, 4, 0), np.float16), np.ones((0, 3), np.float16), {}, (2, 4, 3), np.float32),
    (np.ones((4, 0), np.float16), np.ones((0, 3), np.float16), dict(kernel="fp16_ptx_fp16acc"), (4, 3), np.float16),
    (np.ones((4, 0), np.float16), np.ones((0, 3), np.float16), dict(out_dtype="float16"), (4, 3), np.float16),
    (np.ones((4, 0), np.uint8), np.ones((0, 5), np.uint8), dict(precision="int4"), (4, 5), np.int32),
])
def test_empty_shapes_follow_numpy(a, b, kw, shape, dtype):
    """M = 0 or N = 0: an empty product; K = 0: zeros; no GPU needed for NumPy operands."""
    c = numgemm.gemm(a, b, **kw)
    assert c.shape == shape and c.dtype == dtype
    assert not c.any()


def test_a_plan_needs_a_kernel_to_run():
    with pytest.raises(ValueError, match="gemm\\(\\) answers empty shapes"):
        numgemm.plan_gemm(np.ones((0, 16), np.int8), np.ones((8, 16), np.int8).T)


@pytest.mark.skipif(HAVE_GPU, reason="checks the message given without a GPU")
def test_no_gpu_is_said():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        numgemm.gemm(np.zeros((4, 4), np.float16), np.zeros((4, 4), np.float16))


# --- on the GPU --------------------------------------------------------------------

@pytest.mark.gpu
def test_numpy_in_numpy_out(rng):
    a = rng.integers(-128, 128, (100, 64), dtype=np.int8)
    bt = rng.integers(-128, 128, (72, 64), dtype=np.int8)
    c = numgemm.gemm(a, bt.T)                          # B transposed: the int8 layout
    assert isinstance(c, np.ndarray) and c.dtype == np.int32
    assert np.array_equal(c, a.astype(np.int64) @ bt.T.astype(np.int64))


@pytest.mark.gpu
def test_device_arrays_in_place(rng):
    from numba import cuda

    a = rng.standard_normal((2, 96, 80)).astype(np.float16)
    b = rng.standard_normal((80, 40)).astype(np.float16)      # shared by the batch
    da, db = cuda.to_device(a), cuda.to_device(b)
    out = cuda.device_array((2, 96, 40), np.float32)
    assert numgemm.gemm(da, db, out=out) is out
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(out.copy_to_host() - ref) / np.linalg.norm(ref) < 1e-3


@pytest.mark.gpu
def test_half_c_as_asked(rng):
    """out_dtype="float16", or an out of float16: C is the f32 sums rounded to
    half, by whichever kernel gemm() chooses for the shape (the tuned winners
    at M = 1, 64 and 2048 differ)."""
    from numba import cuda

    for M, N, K in ((1, 512, 4096), (64, 4096, 512), (2048, 256, 256)):
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        wide = numgemm.gemm(a, b)
        c = numgemm.gemm(a, b, out_dtype="float16")
        assert c.dtype == np.float16
        np.testing.assert_array_equal(c, wide.astype(np.float16))
        out = cuda.to_device(np.full((M, N), np.nan, np.float16))
        assert numgemm.gemm(cuda.to_device(a), cuda.to_device(b), out=out) is out
        np.testing.assert_array_equal(out.copy_to_host(), c)
        assert numgemm.plan_gemm(a, b, out_dtype=np.float16).cfg.out == "f16"


@pytest.mark.gpu
def test_empty_shapes_on_device_arrays():
    """Device operands give a device result; out= is filled in place (zeros for K = 0)."""
    from numba import cuda

    a, bt = cuda.to_device(np.ones((0, 16), np.int8)), cuda.to_device(np.ones((8, 16), np.int8))
    c = numgemm.gemm(a, numgemm.transposed(bt))
    assert c.shape == (0, 8) and cuda.is_cuda_array(c)
    out = cuda.to_device(np.full((4, 3), 7.0, np.float32))
    zero_k = numgemm.gemm(cuda.to_device(np.ones((4, 0), np.float16)), cuda.to_device(np.ones((0, 3), np.float16)),
                          out=out)
    assert zero_k is out and not out.copy_to_host().any()


@pytest.mark.gpu
def test_wrong_layout_for_the_kernel(rng):
    a = np.zeros((32, 64), np.int8)
    with pytest.raises(ValueError, match=r"take B as NK .*numgemm\.transposed\(bt\)"):
        numgemm.gemm(a, np.zeros((64, 32), np.int8))          # row-major K x N int8
    with pytest.raises(ValueError, match="out has shape"):
        from numba import cuda
        numgemm.gemm(a, np.zeros((32, 64), np.int8).T, out=cuda.device_array((3, 3), np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_peer_arrays_without_copies(lib, rng):
    mod = pytest.importorskip(lib)
    a = rng.integers(-128, 128, (64, 96), dtype=np.int8)
    bt = rng.integers(-128, 128, (48, 96), dtype=np.int8)
    if lib == "torch":
        da, dbt = mod.from_numpy(a).cuda(), mod.from_numpy(bt).cuda()
        out = mod.empty((64, 48), dtype=mod.int32, device="cuda")
        numgemm.gemm(da, dbt.t(), out=out)
        got = out.cpu().numpy()
    else:
        da, dbt = mod.asarray(a), mod.asarray(bt)
        out = mod.empty((64, 48), dtype=mod.int32)
        numgemm.gemm(da, dbt.T, out=out)
        got = mod.asnumpy(out)
    assert np.array_equal(got, a.astype(np.int64) @ bt.T.astype(np.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("lib,k,split", [("numba", 96, 1), ("numba", 77, 1), ("torch", 96, 1), ("torch", 77, 1),
                                         ("numba", 1024, 4), ("numba", 1024, "4last")])
def test_a_repeated_call_reads_the_new_data(lib, k, split, rng):
    """gemm(..., out=) again on the same arrays takes its prepared launch,
    which, where a row had to be padded into a copy (K = 77), pads it again
    first; new data written into the same arrays, and a new array at another
    address, give the new product, never the last one. split:
    a split-K kernel, whose prepared launch is two (the partial sums, their
    sum), or one whose tiles' last blocks add them (its counts set back to 0
    by every launch)."""
    from numba import cuda

    from numgemm import api, registry

    last = split == "4last"
    split = 4 if last else split
    kernel = registry.get("int8_ptx_mma_k32_m16").replace(split_k=split, split_sum="last" if last else "kernel") \
        if split > 1 else None

    def fresh():
        return (rng.integers(-128, 128, (64, k), dtype=np.int8), rng.integers(-128, 128, (48, k), dtype=np.int8))

    if lib == "torch":
        torch = pytest.importorskip("torch")
        dev, host = (lambda x: torch.from_numpy(x).cuda()), (lambda x: x.cpu().numpy())
        out = torch.empty((64, 48), dtype=torch.int32, device="cuda")
        transpose = lambda x: x.t()             # noqa: E731
    else:
        dev, host = cuda.to_device, (lambda x: x.copy_to_host())
        out = cuda.device_array((64, 48), np.int32)
        transpose = numgemm.transposed
    a, bt = fresh()
    da, dbt = dev(a), dev(bt)
    numgemm.gemm(da, transpose(dbt), out=out, kernel=kernel)
    before = len(api._REPEATS)
    for _ in range(3):
        a, bt = fresh()
        if lib == "torch":
            da.copy_(torch.from_numpy(a)), dbt.copy_(torch.from_numpy(bt))
        else:
            da.copy_to_device(a), dbt.copy_to_device(bt)
        assert numgemm.gemm(da, transpose(dbt), out=out, kernel=kernel) is out
        np.testing.assert_array_equal(host(out), a.astype(np.int64) @ bt.T.astype(np.int64))
    assert len(api._REPEATS) == before      # nothing new to prepare: the same call, or never kept
    a2, bt2 = fresh()
    numgemm.gemm(dev(a2), transpose(dev(bt2)), out=out, kernel=kernel)   # other addresses, moved into it
    np.testing.assert_array_equal(host(out), a2.astype(np.int64) @ bt2.T.astype(np.int64))
    assert len(api._REPEATS) == before


@pytest.mark.gpu
def test_a_repeated_int4_call_widens_the_new_b(rng):
    """INT4 on sm_90: the prepared launch is two (B widened into the plan's
    workspace, then the GEMM), and both run on every call: new data written
    into the same B gives the new product. Calls of one shape share the
    prepared call's workspace on one stream, in the stream's order; on
    another stream they have a prepared call and a workspace of their own,
    so calls alternated on two streams stay apart."""
    from numba import cuda

    from numgemm import api, registry
    from numgemm.quant import pack_int4

    cfg = registry.get("int4_wgmma_unpack_s8")
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    a, bt = rng.integers(-8, 8, (300, 256)), rng.integers(-8, 8, (520, 256))
    da, dbt = cuda.to_device(pack_int4(a)), cuda.to_device(pack_int4(bt))
    out = cuda.device_array((300, 520), np.int32)
    for i in range(3):
        if i:
            a, bt = rng.integers(-8, 8, (300, 256)), rng.integers(-8, 8, (520, 256))
            da.copy_to_device(pack_int4(a)), dbt.copy_to_device(pack_int4(bt))
        numgemm.gemm(da, numgemm.transposed(dbt), precision="int4", out=out, kernel="int4_wgmma_unpack_s8", k=256)
        np.testing.assert_array_equal(out.copy_to_host(), a.astype(np.int64) @ bt.T.astype(np.int64))
    launch = next(reversed(api._REPEATS.values())).launch
    assert launch.name == "widen_pass_s4_s8" and launch.then.name == cfg.name
    # A second B of the same shape, on a stream of its own: the two calls,
    # alternated, each give their own product.
    bt2 = rng.integers(-8, 8, (520, 256))
    dbt2, out2 = cuda.to_device(pack_int4(bt2)), cuda.device_array((300, 520), np.int32)
    streams = cuda.stream(), cuda.stream()
    for _ in range(2):
        for b_dev, o, s in zip((dbt, dbt2), (out, out2), streams):
            numgemm.gemm(da, numgemm.transposed(b_dev), precision="int4", out=o, kernel="int4_wgmma_unpack_s8", k=256,
                         stream=s)
        for s in streams:
            s.synchronize()
        for o, ref in zip((out, out2), (bt, bt2)):
            np.testing.assert_array_equal(o.copy_to_host(), a.astype(np.int64) @ ref.T.astype(np.int64))
    first, second = list(api._REPEATS.values())[-2:]
    assert first.launch.keep is not second.launch.keep      # a workspace each


@pytest.mark.gpu
def test_unaligned_k_is_padded(rng):
    """K whose rows are not whole 16-byte copies: gemm pads a copy, and stays exact."""
    a = rng.integers(-128, 128, (33, 77), dtype=np.int8)
    bt = rng.integers(-128, 128, (29, 77), dtype=np.int8)
    assert np.array_equal(numgemm.gemm(a, bt.T), a.astype(np.int64) @ bt.T.astype(np.int64))


@pytest.mark.gpu
def test_a_new_process_runs_from_the_kernel_cache(tmp_path):
    """The first gemm() of a process builds its kernel into the cache; the
    next process's first gemm() loads it, builds nothing, and is exact."""
    import json
    import os
    import subprocess
    import sys

    script = ("import json, numpy as np, numgemm; from numgemm import cache; "
              "rng = np.random.default_rng(); a = rng.integers(-128, 128, (100, 64), dtype=np.int8); "
              "bt = rng.integers(-128, 128, (72, 64), dtype=np.int8); "
              "ok = np.array_equal(numgemm.gemm(a, bt.T, kernel='int8_ptx_mma_k32', preset='paper'), "
              "a.astype(np.int64) @ bt.T.astype(np.int64)); print(json.dumps([ok, cache.STATS]))")
    env = dict(os.environ, NUMGEMM_CACHE_DIR=str(tmp_path))
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for _ in range(2)]
    (ok1, first), (ok2, second) = runs
    assert ok1 and ok2
    assert first["builds"] == 1 and first["stores"] == 1
    assert second["builds"] == 0 and second["hits"] == 1


@pytest.mark.parametrize("precision,bound", [("int8", 131071), ("int4", 33554431)])
def test_k_past_the_int32_bound_is_refused(precision, bound):
    """Past the bound the worst case would wrap int32: refused, before any GPU is needed."""
    from numgemm.precision import PRECISIONS

    assert PRECISIONS[precision].max_k == bound and (bound + 1) * PRECISIONS[precision].values[0] ** 2 > 2**31 - 1
    assert bound * PRECISIONS[precision].values[0] ** 2 <= 2**31 - 1
    width = bound + 1 if precision == "int8" else (bound + 2) // 2
    a = np.zeros((1, width), np.int8 if precision == "int8" else np.uint8)
    kw = {"precision": precision} if precision == "int4" else {}
    with pytest.raises(ValueError, match=f"K <= {bound}"):
        numgemm.gemm(a, a.T, **kw)


#: Every kernel family whose launch reads device state of numgemm's own: TMA
#: maps (mma.sync and wgmma, swapped, C's map for c_tma), split-K's partial sums
#: and arrival counts, stream-K's slots and flags, INT4's widening workspace.
KEEPS_STATE = [("fp16_ptx_tma", {}), ("fp16_wgmma", {}), ("fp16_wgmma_c16", dict(c_tma=True)),
               ("fp16_ptx_mma_m16", dict(split_k=2)), ("int8_ptx_tma", {}), ("int8_wgmma", {}),
               ("int8_wgmma_swap", {}), ("int8_wgmma", dict(stream_k=True)),
               ("int8_ptx_mma_k32_m16", dict(split_k=4)), ("int8_ptx_mma_k32_m16", dict(split_k=4, split_sum="last")),
               ("int4_ptx_unpack_s8_tma", {}), ("int4_wgmma_unpack_s8", {}), ("int4_wgmma_unpack_s8_swap", {})]
KEPT_SHAPE = (1, 200, 144, 256)     # batch, M, N, K: C's rows whole 32-byte units, so c_tma stores by TMA
#: Each precision's TMA kernels of two box shapes: the other pairs alternate them.
OTHERS = {"fp16": ("fp16_ptx_tma", "fp16_wgmma"), "int8": ("int8_ptx_tma", "int8_wgmma"),
          "int4": ("int4_ptx_unpack_s8_tma", "int4_wgmma_unpack_s8")}


def _other_pairs(precision, shape, rng, between=None, every=100):
    """Operand pairs new to numgemm, through the precision's TMA kernels in
    turn (boxes of two shapes), of the kept call's shape: twice as many as
    numgemm's map cache holds, so that the pairs of either kernel alone
    overflow it (INT4's pass kernel maps the shape's one widening workspace
    as B: its maps differ by A alone), and that workspace rewritten. A pair
    is an A and a B of two pools, each gemm() returning a new C; every
    `every`-th C is checked, and between() is called there too."""
    from numgemm import tensormap
    from numgemm.soak import Call

    count = 2 * (tensormap._CACHED + 64)
    pool_a, pool_b = 64, -(-count // 64)
    cfgs = [_kernel(n) for n in OTHERS[precision]]
    calls = [Call.new(precision, cfgs[0], shape, rng, out=False) for _ in range(max(pool_a, pool_b))]
    for i in range(count):
        x, y = calls[i % pool_a], calls[i // pool_a]
        c = numgemm.gemm(x.a, y.b, precision=precision, kernel=cfgs[i % 2], k=shape[3])
        if i % every == every - 1:
            both = Call(precision, cfgs[i % 2], shape, values=(x.values[0], y.values[1]))
            assert both.check(c.copy_to_host().reshape(shape[0], *shape[1:3])) is None, f"other pair {i}"
            if between is not None:
                between()
    return count


def _kernel(name, **fields):
    from numgemm import registry

    return registry.get(name).replace(**fields)


@pytest.mark.gpu
@pytest.mark.parametrize("lib,out", [("numba", True), ("torch", False)])
@pytest.mark.parametrize("name,fields", KEEPS_STATE)
def test_a_prepared_call_moves_to_new_arrays(name, fields, lib, out, rng):
    """gemm() on other arrays of a prepared call's description, as a model's
    layers call it with activations at new addresses: the one prepared call
    serves them all, its addresses and tensor maps moved, exact every time,
    with a's and b's of different calls paired, and fresh values written."""
    from numba import cuda

    from numgemm import api
    from numgemm.soak import Call

    if lib == "torch":
        pytest.importorskip("torch")
    cfg = _kernel(name, **fields)
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    calls = [Call.new(cfg.precision, cfg, KEPT_SHAPE, rng, lib=lib, out=out) for _ in range(3)]
    assert calls[0].check(calls[0].run()) is None
    prepared = next(reversed(api._REPEATS.values()))
    for i in range(9):
        x, y = calls[i % 3], calls[(i + i // 3) % 3]        # each a with each b
        x.write(rng), y.write(rng)
        pair = Call(cfg.precision, cfg, KEPT_SHAPE, lib, x.a, y.b, x.out, values=(x.values[0], y.values[1]))
        why = pair.check(pair.run())
        assert why is None, f"{pair.describe()}, pair {i}: {why}"
        assert next(reversed(api._REPEATS.values())) is prepared


@pytest.mark.gpu
@pytest.mark.parametrize("name,fields", KEEPS_STATE)
def test_a_kept_plan_stays_right_after_many_other_pairs(name, fields, rng):
    """A plan kept, launched again after more than 1000 other operand pairs
    (repeated calls at new addresses: more maps than their cache holds) with
    fresh values in its arrays: exact, reading its own maps and workspaces."""
    from numba import cuda

    from numgemm import tensormap
    from numgemm.soak import Call

    cfg = _kernel(name, **fields)
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    shape = KEPT_SHAPE
    kept = Call.new(cfg.precision, cfg, shape, rng, plan=True)
    assert kept.check(kept.run("plan")) is None
    assert len(kept.plan.maps) == (cfg.copy == "tma") + cfg.c_tma
    assert _other_pairs(cfg.precision, shape, rng) >= 1000
    assert len(tensormap._ON_STREAM) == tensormap._CACHED          # the other pairs' maps overflowed it
    for _ in range(2):
        kept.write(rng)
        why = kept.check(kept.run("plan"))
        assert why is None, f"{cfg.name}: {why}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["int8_wgmma", "fp16_wgmma", "int4_wgmma_unpack_s8", None])
def test_a_repeated_call_stays_right_among_many_other_pairs(name, rng):
    """gemm(..., out=) repeated on the same arrays (its prepared launch) every
    100 of more than 1000 other operand pairs, fresh values each time: exact,
    and each repeat took the prepared launch."""
    from numba import cuda

    from numgemm import api
    from numgemm.soak import Call

    cfg = _kernel(name) if name else None
    precision = cfg.precision if cfg else "int8"
    if cfg is not None and cfg.unsupported(tuple(cuda.get_current_device().compute_capability)):
        pytest.skip(cfg.unsupported(tuple(cuda.get_current_device().compute_capability)))
    shape = KEPT_SHAPE
    repeated = Call.new(precision, cfg, shape, rng)
    assert repeated.check(repeated.run()) is None
    prepared = next(reversed(api._REPEATS.values()))

    def again():
        repeated.write(rng)
        why = repeated.check(repeated.run())
        assert why is None, f"{repeated.describe()}: {why}"
        assert next(reversed(api._REPEATS.values())) is prepared     # the same prepared call
    _other_pairs(precision, shape, rng, between=again)
