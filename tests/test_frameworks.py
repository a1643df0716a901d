"""numgemm.frameworks: stream handles, the result's framework (offline); torch,
CuPy and Numba arrays in and out, torch's current stream, CUDA graphs (GPU)."""

import numpy as np
import pytest

from numgemm import frameworks


class _Protocol:
    def __cuda_stream__(self):
        return 0, 1234


class _Torchish:
    cuda_stream = 77


class _Cupyish:
    ptr = 99


@pytest.mark.parametrize("stream,handle", [(0, 0), (np.int64(5), 5), (_Protocol(), 1234), (_Torchish(), 77),
                                           (_Cupyish(), 99)])
def test_a_stream_is_its_raw_handle(stream, handle):
    assert frameworks.handle(stream) == handle


@pytest.mark.parametrize("bad", ["0", 1.0, True, object()])
def test_anything_else_is_refused_by_name(bad):
    with pytest.raises(TypeError, match="stream must be None, a raw stream handle"):
        frameworks.handle(bad)


def test_numpy_in_numpy_out():
    a = np.zeros((2, 2), np.float16)
    assert frameworks.of(a, a) == "numpy" and frameworks.kind(a) == "numpy"
    assert frameworks.kind([1]) is None


def test_the_result_follows_torch_then_cupy_then_numba():
    class CAI:                                  # any holder of the interface, as Numba's arrays
        __cuda_array_interface__ = {}
    a = np.zeros((2, 2), np.float16)
    assert frameworks.of(a, CAI()) == "numba"
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 2)
    assert frameworks.kind(t) == "torch" and frameworks.of(CAI(), t) == "torch" and frameworks.of(a, t) == "torch"


def _int8(rng, M, N, K):
    return rng.integers(-128, 128, (M, K), dtype=np.int8), rng.integers(-128, 128, (N, K), dtype=np.int8)


@pytest.mark.gpu
def test_each_framework_gets_its_own_arrays_back(rng):
    """torch in, torch out (from torch's allocator, on the inputs' device);
    CuPy in, CuPy out; Numba in, Numba out; torch with Numba: torch."""
    from numba import cuda
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    import numgemm

    a, bt = _int8(rng, 64, 48, 96)
    ref = a.astype(np.int64) @ bt.T.astype(np.int64)
    c = numgemm.gemm(cuda.to_device(a), numgemm.transposed(cuda.to_device(bt)))
    assert isinstance(c, DeviceNDArray) and np.array_equal(c.copy_to_host(), ref)
    torch = pytest.importorskip("torch")
    ta, tbt = torch.from_numpy(a).cuda(), torch.from_numpy(bt).cuda()
    c = numgemm.gemm(ta, tbt.t())
    assert isinstance(c, torch.Tensor) and c.device == ta.device and c.dtype == torch.int32
    assert np.array_equal(c.cpu().numpy(), ref)
    c = numgemm.gemm(cuda.to_device(a), tbt.t())
    assert isinstance(c, torch.Tensor) and np.array_equal(c.cpu().numpy(), ref)
    half = numgemm.gemm(ta.half(), ta.half().t()[:, :48].contiguous(), out_dtype=torch.float16)
    assert half.dtype == torch.float16
    try:
        import cupy
    except ImportError:
        return
    c = numgemm.gemm(cupy.asarray(a), cupy.asarray(bt).T)
    assert isinstance(c, cupy.ndarray) and np.array_equal(cupy.asnumpy(c), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [None, 3])
def test_a_repeated_calls_new_c_is_a_tensor_of_its_own(batch, rng):
    """A repeated call returning a new C (made from a template, not by
    torch.empty) gives a contiguous tensor of C's shape, dtype and device,
    with storage of its own, and leaves the Cs before it as they were."""
    torch = pytest.importorskip("torch")
    import numgemm

    shape_a = (64, 96) if batch is None else (batch, 64, 96)
    cs, refs = [], []
    tbt = torch.from_numpy(_int8(rng, 1, 48, 96)[1]).cuda()
    for _ in range(3):
        a = rng.integers(-128, 128, shape_a, dtype=np.int8)
        cs.append(numgemm.gemm(torch.from_numpy(a).cuda(), tbt.t()))
        refs.append(a.astype(np.int64) @ tbt.cpu().numpy().T.astype(np.int64))
    for c, ref in zip(cs, refs):
        assert c.shape == ref.shape and c.is_contiguous() and c.dtype == torch.int32 and c._base is None
        assert c.untyped_storage().nbytes() == ref.size * 4
        np.testing.assert_array_equal(c.cpu().numpy(), ref)
    assert len({c.data_ptr() for c in cs}) == 3


@pytest.mark.gpu
def test_a_call_goes_on_torchs_current_stream(rng):
    """Inside `with torch.cuda.stream(s)`, behind 50 ms of work on s and a copy
    of new values on s: numgemm's GEMM is ordered after them, and torch's
    work after it on s reads C."""
    torch = pytest.importorskip("torch")
    import numgemm

    a, bt = _int8(rng, 200, 136, 256)
    a2, _ = _int8(rng, 200, 136, 256)
    ta, tbt = torch.from_numpy(a).cuda(), torch.from_numpy(bt).cuda()
    numgemm.gemm(ta, tbt.t())                   # built and warm
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(100_000_000)
        ta.copy_(torch.from_numpy(a2).cuda(non_blocking=True))
        c = numgemm.gemm(ta, tbt.t())
        d = c * 1
    s.synchronize()
    np.testing.assert_array_equal(d.cpu().numpy(), a2.astype(np.int64) @ bt.T.astype(np.int64))


@pytest.mark.gpu
def test_a_named_stream_owns_the_calls_workspaces(rng):
    """gemm(stream=s) on torch tensors with s not torch's current stream: the
    plan's workspaces (INT4's widened B, padded rows) are allocated on s, so
    that torch reuses them only after s's work; behind 50 ms of work on s,
    with calls on the current stream between, each C is exact. (The
    operands are kept alive until s is done, as a caller must.)"""
    torch = pytest.importorskip("torch")
    import numgemm
    from numgemm.quant import pack_int4

    s = torch.cuda.Stream()
    outs = []
    for i in range(3):
        a, bt = rng.integers(-8, 8, (200, 260)), rng.integers(-8, 8, (136, 260))      # K = 260: rows padded
        ta, tbt = torch.from_numpy(pack_int4(a)).cuda(), torch.from_numpy(pack_int4(bt)).cuda()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)
        c = numgemm.gemm(ta, tbt.t(), precision="int4", k=260, stream=s)
        numgemm.gemm(ta, tbt.t(), precision="int4", k=260)          # on the current stream, meanwhile
        outs.append((c, a.astype(np.int64) @ bt.T.astype(np.int64), ta, tbt))
    s.synchronize()
    for c, ref, *_ in outs:
        np.testing.assert_array_equal(c.cpu().numpy(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_calls_and_plans_are_captured_in_a_cuda_graph(explicit, precision, rng):
    """gemm(out=), a gemm() returning C and plan.launch(), each made once
    before the capture (as torch's docs warm up), captured by
    torch.cuda.graph on torch's capture stream (stream=None) or on a stream
    named to the call; replayed with new values copied into the inputs:
    every C is the new product."""
    torch = pytest.importorskip("torch")
    import numgemm
    from numgemm import operands

    M, N, K = 200, 136, 256
    a, b = operands.values(precision, 1, M, N, K, rng)
    ta = torch.from_numpy(a[0]).cuda()
    tb = torch.from_numpy(b[0]).cuda()
    b_arg = tb.t() if precision == "int8" else tb      # INT8: b is N x K rows, taken transposed
    c_out = torch.empty((M, N), dtype=torch.int32 if precision == "int8" else torch.float32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):               # warm-up: kernels built, maps and launches prepared
        numgemm.gemm(ta, b_arg, out=c_out)
        numgemm.gemm(ta, b_arg)
        plan_out = torch.empty_like(c_out)
        plan = numgemm.plan_gemm(ta, b_arg, out=plan_out)
        plan.launch()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g, cap = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(g, stream=cap if explicit else None):
        named = dict(stream=cap) if explicit else {}
        numgemm.gemm(ta, b_arg, out=c_out, **named)
        c_new = numgemm.gemm(ta, b_arg, **named)
        plan.launch(**named)
    for _ in range(2):
        a, b = operands.values(precision, 1, M, N, K, rng)
        ta.copy_(torch.from_numpy(a[0]))
        tb.copy_(torch.from_numpy(b[0]))
        for c in (c_out, c_new, plan_out):
            c.fill_(-1)
        g.replay()
        torch.cuda.synchronize()
        ref = operands.expected(precision, a, b)[0]
        for what, c in (("gemm(out=)", c_out), ("gemm()", c_new), ("plan.launch()", plan_out)):
            why = operands.mismatch(c.cpu().numpy(), ref, precision)
            assert why is None, f"{what}: {why}"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["int8_wgmma", "fp16_wgmma_c16", "int8_ptx_tma"])
def test_operands_new_inside_a_capture_have_their_maps_written_by_the_graph(name, rng):
    """A model's activations are allocated inside the capture: a TMA
    kernel's maps of them (and of a new C: c16 stores by TMA) are written by
    the graph, before the GEMM, at every replay; replayed with new values,
    exact. The same call made after the capture on the capture's stream,
    before any replay, reads maps written outside the graph: exact."""
    torch = pytest.importorskip("torch")
    from numba import cuda

    import numgemm
    from numgemm.soak import Call

    cfg = numgemm.registry.get(name)
    why = cfg.unsupported(tuple(cuda.get_current_device().compute_capability))
    if why:
        pytest.skip(why)
    call = Call.new(cfg.precision, cfg, (1, 200, 144, 256), rng, lib="torch", out=False)
    assert call.check(call.run()) is None                  # built, and prepared, outside the capture
    cap, g = torch.cuda.Stream(), torch.cuda.CUDAGraph()
    cap.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=cap):
        x = call.a * 1                                      # from the capture's pool, at a new address
        c = numgemm.gemm(x, call.b, kernel=cfg)
    with torch.cuda.stream(cap):                         # x holds nothing until a replay: fill it
        x.copy_(call.a)
        again = numgemm.gemm(x, call.b, kernel=cfg)
    torch.cuda.synchronize()
    why = call.check(again.cpu().numpy().reshape(1, 200, 144))
    assert why is None, f"after the capture, before a replay: {why}"
    for _ in range(2):
        call.write(rng)
        c.fill_(-1)
        g.replay()
        torch.cuda.synchronize()
        why = call.check(c.cpu().numpy().reshape(1, 200, 144))
        assert why is None, f"replay: {why}"

@pytest.mark.gpu
def test_maps_of_new_addresses_are_written_on_the_calls_stream(rng):
    """A repeated call at new addresses on a side stream, behind 20 ms of
    work there: the new addresses' maps are written by a kernel on that
    stream, ahead of the GEMM that reads them (no host copy that would wait
    for the GPU): exact."""
    torch = pytest.importorskip("torch")
    from numba import cuda

    import numgemm
    from numgemm.soak import Call

    cfg = numgemm.registry.get("int8_wgmma")
    if cfg.unsupported(tuple(cuda.get_current_device().compute_capability)):
        pytest.skip(cfg.unsupported(tuple(cuda.get_current_device().compute_capability)))
    call = Call.new("int8", cfg, (1, 200, 144, 256), rng, lib="torch", out=False)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        numgemm.gemm(call.a, call.b, kernel=cfg)           # prepared for s
    s.synchronize()
    results = []
    for _ in range(3):
        x = call.a.clone()                                  # a new address, kept alive
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)
            results.append((x, numgemm.gemm(x, call.b, kernel=cfg)))
    s.synchronize()
    for i, (_, c) in enumerate(results):
        why = call.check(c.cpu().numpy().reshape(1, 200, 144))
        assert why is None, f"call {i}: {why}"


@pytest.mark.gpu
def test_bf16_comes_as_torch_bfloat16_as_bits_or_as_ml_dtypes(rng):
    """BF16 operands: torch.bfloat16 tensors (an nn.Linear weight as w.t()),
    NumPy uint16 bit patterns with precision="bf16" (uint16 alone names no
    precision), ml_dtypes' bfloat16 where installed; C in float32, against
    the float64 product of the operands' values, or in bfloat16 (NumPy: its
    bits; torch: a bfloat16 tensor), the float32 C rounded."""
    import numgemm
    from numgemm import operands
    from numgemm.precision import PRECISIONS

    bf16 = PRECISIONS["bf16"]
    a = bf16.encode(rng.standard_normal((300, 136), dtype=np.float32))
    w = bf16.encode(rng.standard_normal((520, 136), dtype=np.float32))     # N x K
    ref = bf16.decode(a) @ bf16.decode(w).T
    c = numgemm.gemm(a, np.ascontiguousarray(w.T), precision="bf16")
    assert c.dtype == np.float32 and operands.matches(c, ref, "bf16")
    c16 = numgemm.gemm(a, np.ascontiguousarray(w.T), precision="bf16", out_dtype="bfloat16")
    assert c16.dtype == np.uint16 and np.array_equal(c16, bf16.encode(c))
    with pytest.raises(TypeError, match="cannot infer the precision from dtype uint16"):
        numgemm.gemm(a, np.ascontiguousarray(w.T))
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None:
        assert operands.matches(numgemm.gemm(a.view(ml_dtypes.bfloat16), w.view(ml_dtypes.bfloat16).T), ref, "bf16")
    torch = pytest.importorskip("torch")
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    tw = torch.from_numpy(w.view(np.int16)).view(torch.bfloat16).cuda()
    tc = numgemm.gemm(ta, tw.t())
    assert isinstance(tc, torch.Tensor) and tc.dtype == torch.float32
    assert operands.matches(tc.cpu().numpy(), ref, "bf16")
    assert operands.matches((ta.float() @ tw.float().t()).cpu().numpy(), ref, "bf16")     # the reference's values
    t16 = numgemm.gemm(ta, tw.t(), out_dtype=torch.bfloat16)
    assert t16.dtype == torch.bfloat16 and torch.equal(t16, tc.to(torch.bfloat16))


@pytest.mark.gpu
@pytest.mark.parametrize("name,encoding", [("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")])
def test_fp8_comes_as_torch_float8_or_as_bits(name, encoding, rng):
    """FP8 operands: torch's float8 tensors (a weight as w.t()), NumPy uint8
    bit patterns with precision=, ml_dtypes' float8 where installed; C in
    float32 against the float64 product of the operands' values."""
    import numgemm
    from numgemm import operands
    from numgemm.precision import PRECISIONS

    prec = PRECISIONS[name]
    a = prec.encode(rng.standard_normal((300, 136), dtype=np.float32))
    w = prec.encode(rng.standard_normal((520, 136), dtype=np.float32))     # N x K: FP8's B is K-major
    ref = prec.decode(a) @ prec.decode(w).T
    c = numgemm.gemm(a, w.T, precision=name)
    assert c.dtype == np.float32 and operands.matches(c, ref, name)
    try:
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None:
        dtype = getattr(ml_dtypes, encoding)
        assert operands.matches(numgemm.gemm(a.view(dtype), w.view(dtype).T), ref, name)
    torch = pytest.importorskip("torch")
    ta, tw = (torch.from_numpy(x).cuda().view(getattr(torch, encoding)) for x in (a, w))
    tc = numgemm.gemm(ta, tw.t())
    assert tc.dtype == torch.float32 and operands.matches(tc.cpu().numpy(), ref, name)
