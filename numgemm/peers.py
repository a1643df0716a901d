"""Library GEMMs timed beside numgemm's kernels, when installed: cuBLAS fp16
and bf16 through PyTorch (fp16 also through CuPy), C in the operands' dtype
and (torch.mm's out_dtype, where there is one) as float32, the C numgemm's
16-bit float kernels store by default;
cuBLASLt int8 through torch._int_mm with B column-major (its fast layout);
cuBLASLt FP8 through torch._scaled_mm (B column-major, per-tensor scales
of 1, C in bfloat16 and in float32); Triton's int8, bf16 and FP8 GEMMs
(numgemm.peers_triton) on the same operands. All are optional; a missing
one is skipped. With an epilogue (the bench's --epilogue), each applies it
after its GEMM in torch, unfused, as a model without a fused kernel would
(FP8: torch._scaled_mm takes the scales itself; the bias and activation
follow)."""

import functools

import numpy as np

from . import operands
from .operands import sample_expected, values
from .precision import PRECISIONS


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


@functools.cache
def _mm_f32_out(torch):
    """Whether torch.mm takes out_dtype (PyTorch 2.9 on): float16 operands,
    float32 C from cuBLAS itself, not C rounded to half and widened."""
    try:
        one = torch.ones((1, 1), dtype=torch.float16, device="cuda")
        return torch.mm(one, one, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError):
        return False


def _cupy():
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def peer_runs(precision, M, N, K, batch, rng, sets=1, b_layout=None, out_dtype="float32", epilogue=None):
    """[(name, run(i), check())] for the libraries that can do this GEMM.
    FP16 with b_layout "nk": B kept as an N x K weight, multiplied as
    torch.nn.functional.linear does (x @ w.t()). FP8: C in out_dtype's
    format first (the bench's --out-dtype: the ratio to the library is to
    the first), then the other. epilogue: KernelConfig's epilogue fields,
    applied after the GEMM with fresh vectors (torch's peers only).

    run(i) enqueues one product (without synchronizing) on operand set
    i % sets: as many sets as numgemm's kernels rotate over (operand_sets),
    so that a library reads its inputs from where they do (DRAM, where the
    sets overflow L2), not from L2. check() compares the last result with
    exact dot products on a sample of entries (numgemm.operands)."""
    torch = _torch()
    library = PRECISIONS[precision].wide
    if epilogue and any(epilogue.values()):
        return _epilogue_runs(torch, precision, M, N, K, batch, rng, sets, out_dtype, epilogue) if torch else []
    if library.library == "scaled_mm":
        return _scaled_mm_runs(torch, precision, M, N, K, batch, rng, sets, out_dtype) if torch is not None else []
    if library.library == "cublas":
        host = [values(precision, batch, M, N, K, rng) for _ in range(sets)]
        tensor = functools.partial(_tensor, torch, library)
        if torch is not None and b_layout == "nk":      # an nn.Linear weight, N x K rows
            weights = [np.ascontiguousarray(np.swapaxes(b, -1, -2)) for _, b in host]
            ops = _Sets(host, [(tensor(a), tensor(w)) for (a, _), w in zip(host, weights)])
            out = {}

            def run_linear(i):
                x, w = ops.pick(i)
                out["c"] = torch.matmul(x, w.transpose(-1, -2))
            return [(f"cublas_{precision} B N x K (torch, as F.linear)", run_linear,
                     lambda: _ok(out["c"].float().cpu().numpy(), *ops.last_host, precision))] + \
                _triton_runs(torch, ops, batch, M, N, ops.dev[0][0].dtype, precision, weight=True)
        if torch is not None:
            ops = _Sets(host, [(tensor(a), tensor(b)) for a, b in host])
            out = {}

            def run(i):
                out["c"] = torch.matmul(*ops.pick(i))
            peers = [(f"cublas_{precision} (torch)", run,
                      lambda: _ok(out["c"].float().cpu().numpy(), *ops.last_host, precision))]
            if batch == 1 and _mm_f32_out(torch):
                def run_f32(i):         # C as numgemm's FP16 kernels store it by default
                    ta, tb = ops.pick(i)
                    out["c"] = torch.mm(ta[0], tb[0], out_dtype=torch.float32)
                peers.append((f"cublas_{precision} f32 C (torch.mm out_dtype)", run_f32,
                              lambda: _ok(out["c"].cpu().numpy()[None], *ops.last_host, precision)))
            return peers + _triton_runs(torch, ops, batch, M, N, ops.dev[0][0].dtype, precision)
        cupy = _cupy() if not library.encoding else None        # (CuPy has no bfloat16)
        if cupy is not None:
            ops = _Sets(host, [(cupy.asarray(a), cupy.asarray(b)) for a, b in host])
            out = {}

            def run(i):
                out["c"] = cupy.matmul(*ops.pick(i))
            return [("cublas_fp16 (cupy)", run,
                     lambda: _ok(cupy.asnumpy(out["c"]).astype(np.float32), *ops.last_host, precision))]
        return []
    if torch is None or M <= 16 or library.library != "cublaslt":
        return []                   # torch._int_mm needs M > 16 (FP8's torch._scaled_mm: not yet a peer)
    # Every batch's own operands, rotated as numgemm's are; B column-major (its fast layout).
    host = [values(library.name, batch, M, N, K, rng) for _ in range(sets)]
    ops = _Sets(host, [(torch.from_numpy(a).cuda(), torch.from_numpy(bt).cuda().transpose(-1, -2)) for a, bt in host])
    out = {}

    def run(i):
        ta, tb = ops.pick(i)
        out["c"] = [torch._int_mm(ta[z], tb[z]) for z in range(batch)]
    return [("cublaslt_int8 (torch._int_mm)", run,
             lambda: _ok(torch.stack(out["c"]).cpu().numpy(), *ops.last_host, library.name))] + \
        _triton_runs(torch, ops, batch, M, N, torch.int32, library.name)


def _triton_runs(torch, ops, batch, M, N, c_dtype, precision, weight=False):
    """[(name, run, check)] of Triton's GEMM on a library's operand sets (B as
    K x N, or weight: as an N x K weight, transposed by its strides), C in
    c_dtype; [] without Triton or a tiling for the operands' dtype."""
    triton = _triton()
    dtype = str(ops.dev[0][0].dtype).removeprefix("torch.")
    if triton is None or dtype not in triton.TILINGS:
        return []
    tc = torch.empty((batch, M, N), dtype=c_dtype, device="cuda")

    def run(i):
        ta, tb = ops.pick(i)
        for z in range(batch):
            triton.mm(ta[z], tb[z].t() if weight else tb[z], tc[z])
    exact = not c_dtype.is_floating_point
    return [(triton.name(dtype), run,
             lambda: _ok((tc if exact else tc.float()).cpu().numpy(), *ops.last_host, precision))]


def _tensor(torch, prec, x):
    """A host operand as a CUDA tensor of prec's dtype (an encoding's bit
    patterns viewed as torch's type of that name: BF16's as bfloat16)."""
    if not prec.encoding:
        return torch.from_numpy(x).cuda()
    return torch.from_numpy(x.view(np.int16) if x.itemsize == 2 else x).view(getattr(torch, prec.encoding)).cuda()


def _scaled_mm_runs(torch, precision, M, N, K, batch, rng, sets, out_dtype):
    """cuBLASLt's FP8 GEMM (torch._scaled_mm): A row-major, B column-major (an
    N x K weight transposed, as it requires), per-tensor scales of 1, C in
    bfloat16 and float32 (out_dtype's first); none where it refuses the shape
    (its dimensions must be multiples of 16). Then Triton's, where installed."""
    prec = PRECISIONS[precision]
    host = [values(precision, batch, M, N, K, rng) for _ in range(sets)]
    tensor = functools.partial(_tensor, torch, prec)
    ops = _Sets(host, [(tensor(a), tensor(np.ascontiguousarray(np.swapaxes(b, -1, -2))).transpose(-1, -2))
                       for a, b in host])
    one = torch.ones((), dtype=torch.float32, device="cuda")
    try:
        torch._scaled_mm(ops.dev[0][0][0], ops.dev[0][1][0], scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except (RuntimeError, ValueError):     # (e5m2 x e5m2: ValueError)
        return _triton_runs(torch, ops, batch, M, N, torch.bfloat16, precision)
    out, peers = {}, []
    for name in ("float32", "bfloat16") if out_dtype == "float32" else ("bfloat16", "float32"):
        dtype = getattr(torch, name)

        def run(i, dtype=dtype):
            ta, tb = ops.pick(i)
            out["c"] = [torch._scaled_mm(ta[z], tb[z], scale_a=one, scale_b=one, out_dtype=dtype) for z in range(batch)]
        peers.append((f"cublaslt_{precision} {name} C (torch._scaled_mm)", run,
                      lambda: _ok(torch.stack(out["c"]).float().cpu().numpy(), *ops.last_host, precision)))
    return peers + _triton_runs(torch, ops, batch, M, N, torch.bfloat16, precision)


class _Sets:
    """The operand sets a library's runs rotate over, host and device, and the
    one the last run read (what check() compares against)."""

    def __init__(self, host, dev):
        self.host, self.dev, self.last = host, dev, 0

    def pick(self, i):
        """Set i % sets, on the device, as the run's operands."""
        self.last = i % len(self.dev)
        return self.dev[self.last]

    @property
    def last_host(self):
        return self.host[self.last]


def _triton():
    try:
        from . import peers_triton
    except ImportError:
        return None
    return peers_triton


def _epilogue_runs(torch, precision, M, N, K, batch, rng, sets, out_dtype, fields):
    """The library GEMM with the epilogue after it in torch, unfused, as a
    model without a fused kernel runs it: cuBLAS (torch.matmul), cuBLASLt
    int8 (torch._int_mm, its int32 C widened), or cuBLASLt FP8
    (torch._scaled_mm, which takes the scales itself: per tensor, or (M, 1)
    and (1, N) row-wise); then the scales, bias and activation. Fresh
    vectors; C in bfloat16 where out_dtype asks a narrow C, else float32 (the
    16-bit floats' GEMM: their own dtype). [] where the library refuses."""
    prec = PRECISIONS[precision]
    host = [values(precision, batch, M, N, K, rng) for _ in range(sets)]
    vectors = operands.epilogue_vectors(fields, M, N, rng)
    sa, sb, bias = (None if v is None else torch.from_numpy(v.reshape(s if v.size > 1 else ())).cuda()
                    for v, s in zip(vectors, ((M, 1), (1, N), (N,))))
    narrow = torch.bfloat16 if out_dtype in ("bfloat16", "narrow") else torch.float32
    act = {"relu": torch.relu, "silu": torch.nn.functional.silu, "": None,
           "gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}[fields["act"]]
    tensor = functools.partial(_tensor, torch, prec)
    rows = [(tensor(a), tensor(np.ascontiguousarray(b if prec.exact else np.swapaxes(b, -1, -2)))) for a, b in host]
    ops = _Sets(host, [(a, w.transpose(-1, -2)) for a, w in rows])        # B column-major: a weight's rows
    one = torch.ones((), dtype=torch.float32, device="cuda")
    if prec.library == "scaled_mm":
        name = f"cublaslt_{precision} (torch._scaled_mm)"
        scales = dict(scale_a=one if sa is None else sa.float(), scale_b=one if sb is None else sb.float())

        def gemm(x, y):
            return torch._scaled_mm(x, y, **scales, out_dtype=torch.bfloat16)
    elif prec.exact:
        if M <= 16:
            return []                   # torch._int_mm needs M > 16
        name = "cublaslt_int8 (torch._int_mm)"
        gemm = torch._int_mm
    else:
        name = f"cublas_{precision} (torch)"
        gemm = torch.matmul
    try:
        gemm(ops.dev[0][0][0], ops.dev[0][1][0])
    except RuntimeError:
        return []
    out = {}

    def run(i):
        ta, tb = ops.pick(i)
        c = torch.stack([gemm(ta[z], tb[z]) for z in range(batch)])
        if prec.exact:
            c = c.float()
        for v in (sa, sb) if prec.library != "scaled_mm" else ():
            if v is not None:
                c = c * v
        if bias is not None:
            c = c + bias
        c = act(c) if act else c
        out["c"] = c.to(narrow) if c.dtype == torch.float32 and narrow != torch.float32 else c
    done = "+".join(k for k, v in fields.items() if v)
    return [(f"{name} + torch {done} (unfused)", run,
             lambda: _ok(out["c"].float().cpu().numpy(), *ops.last_host, precision, (vectors, fields["act"] or None)))]


def _ok(c, a, b, precision, epilogue=None):
    # FP16 libraries may accumulate otherwise than numgemm: a looser tolerance than Precision's.
    at, ref = sample_expected(a, b, precision, np.random.default_rng(0), c.shape, 64)
    if epilogue is not None:
        ref = operands.through_epilogue(ref, *epilogue[0], epilogue[1], at=at)
    got = c[at].astype(np.float64)
    if PRECISIONS[precision].exact and epilogue is None:
        return bool(np.array_equal(got, ref))
    return bool(np.linalg.norm(got - ref) <= 1e-2 * np.linalg.norm(ref))
