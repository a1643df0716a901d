"""Library GEMMs timed beside numgemm's kernels, when installed: cuBLAS fp16
through PyTorch (or CuPy), cuBLASLt int8 through torch._int_mm with B
column-major (its fast layout). Both are optional; a missing one is skipped."""

import numpy as np


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def peer_runs(precision, M, N, K, batch, rng):
    """[(name, run(i), check())] for the libraries that can do this GEMM.

    run(i) enqueues one product (without synchronizing); check() compares the
    last result with NumPy on a sample of entries and returns True/False."""
    torch = _torch()
    if precision == "fp16":
        a = rng.standard_normal((batch, M, K), dtype=np.float32).astype(np.float16)
        b = rng.standard_normal((batch, K, N), dtype=np.float32).astype(np.float16)
        if torch is not None:
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            out = {}

            def run(i):
                out["c"] = torch.matmul(ta, tb)
            return [("cublas_fp16 (torch)", run, lambda: _sample_ok(a, b, out["c"].float().cpu().numpy(), 1e-2))]
        cupy = _cupy()
        if cupy is not None:
            ca, cb = cupy.asarray(a), cupy.asarray(b)
            out = {}

            def run(i):
                out["c"] = cupy.matmul(ca, cb)
            return [("cublas_fp16 (cupy)", run, lambda: _sample_ok(a, b, cupy.asnumpy(out["c"]).astype(np.float32), 1e-2))]
        return []
    if torch is None or M <= 16:
        return []                   # torch._int_mm needs M > 16
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    bt = rng.integers(-128, 128, (N, K), dtype=np.int8)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(bt).cuda().t()     # B column-major
    out = {}

    def run(i):
        for _ in range(batch):
            out["c"] = torch._int_mm(ta, tb)
    return [("cublaslt_int8 (torch._int_mm)", run,
             lambda: _sample_ok(a[None], bt.T[None], out["c"].cpu().numpy()[None], 0))]


def _sample_ok(a, b, c, rtol):
    rng = np.random.default_rng(0)
    z = rng.integers(0, c.shape[0], 64)
    i = rng.integers(0, c.shape[1], 64)
    j = rng.integers(0, c.shape[2], 64)
    wide = np.float64 if rtol else np.int64
    ref = np.einsum("sk,sk->s", a[z, i, :].astype(wide), b[z, :, j].astype(wide))
    if rtol == 0:
        return bool(np.array_equal(c[z, i, j].astype(np.int64), ref))
    return bool(np.linalg.norm(c[z, i, j] - ref) <= rtol * np.linalg.norm(ref))
