"""numgemm.gemm(): C = A @ B on the GPU with a registered or given kernel.

Inputs are NumPy arrays (copied to the GPU, the result copied back) or any
object with __cuda_array_interface__ (Numba device arrays, CuPy, PyTorch):
those are used in place. B's layout is read from its strides: a row-major
K x N array is "kn"; the transpose of a row-major N x K array ("B
transposed", b = bt.T) is "nk", the layout of the INT8/INT4 kernels.

INT4 operands are packed two per byte along K (numgemm.pack_int4): A as
(M, ceil(K/2)) uint8, B as (ceil(K/2), N), i.e. the transpose of a packed
(N, ceil(K/2)) array.
"""

import collections
import functools
import sys

import numpy as np

from . import checks, driver, frameworks, plans, views, weight_only
from .checks import with_c_dtype
from .repeats import Repeat
from .plans import GemmPlan, NotOnThisGPU
from .quant import PackedW4
from .views import transposed

__all__ = ["GemmPlan", "NotOnThisGPU", "gemm", "plan_gemm", "transposed", "with_c_dtype"]


def gemm(a, b, *, precision=None, kernel=None, preset="tuned", out=None, out_dtype=None, k=None, stream=None,
         scale_a=None, scale_b=None, bias=None, activation=None):
    """C = A @ B, or with an epilogue C = activation(scale_a * scale_b * (A @ B) + bias).

    a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N), or (K, N) shared by
    every batch. precision: "fp16" (float16 in, float32 out), "bf16"
    (bfloat16 of torch or ml_dtypes, or uint16 bit patterns, in; float32
    out), "int8" (int8 in, int32 out) or "int4" (packed uint8 in, int32 out);
    inferred from a's dtype except for int4 and bf16's bits. kernel: a registered name (numgemm.registry), a
    KernelConfig, or None for the preset's default. out: optional output of
    shape (batch, M, N) / (M, N). out_dtype: C's dtype; FP16 may have float16
    (the f32 sums rounded to half as they are stored, as torch.matmul returns
    them); None: out's dtype, else the kernel's (float32, int32). k: the true
    K of INT4 operands when it is odd. stream: None (the current stream of
    the operands' framework: numgemm.frameworks), a raw handle, or a stream
    of torch, CuPy or Numba. Returns out, or a new C in the operands'
    framework (a NumPy array when a and b are NumPy).

    The epilogue (in the kernel, on the f32 sums, or INT8's and INT4's
    exact sums converted to f32 (W8A8: C then float32, or out_dtype bfloat16
    or float16), before C is rounded to out_dtype): scale_a a number or float32 array of
    one element, or one a row of C ((M,) or (M, 1), torch._scaled_mm's
    row-wise form); scale_b one element, or one a column ((N,) or (1, N));
    bias (N,) float32; activation "relu", "gelu" (tanh form) or "silu".
    Arrays live where a and b do.

    W4A16: b a numgemm.quant.PackedW4 (prepack_w4 of an N x K INT4 weight
    with a scale per 128 k): a (..., K) float16 or bfloat16, C (..., N) in
    a's format or out_dtype float32 (numgemm.weight_only).
    """
    if isinstance(b, PackedW4):                 # W4A16: its own kernel (numgemm.weight_only)
        return weight_only.gemm(a, b, out, out_dtype, stream, precision=precision, kernel=kernel, k=k,
                                scale_a=scale_a, scale_b=scale_b, bias=bias, activation=activation)
    given = (scale_a, scale_b, bias, activation)
    call = _call(a, b, out, stream, (precision, kernel, preset, k, str(out_dtype)), given)
    if call is not None:
        key, addresses, handle, fw, device = call
        try:
            repeat = _REPEATS.get(key)
        except TypeError:                       # an unhashable argument, which the checks will refuse
            repeat = call = None
        if repeat is not None:                  # the same call as before, on these arrays
            _REPEATS.move_to_end(key)
            if repeat.new_c is None:
                repeat(addresses, handle)
                return out
            c, c_address = repeat.new_c(fw, device, handle, stream is None)
            if c_address is not None:
                repeat((*addresses[:2], c_address, *addresses[3:]), handle)
                return c
    shape = checks.checked(a, b, precision, kernel, preset, k, out, out_dtype, given)
    if 0 in shape.mnk:                          # as NumPy answers: empty, or zeros for K = 0
        if shape.mnk[2] == 0 and (bias is not None or activation is not None) and shape.mnk[0] * shape.mnk[1]:
            raise ValueError("K = 0 with a bias or activation: C would be activation(bias) in every row, which "
                             "gemm() does not compute; leave the bias and activation to the caller")
        return _empty_product(a, b, shape, out)
    plan = plans.make(a, b, shape, preset, out, stream)
    plan.launch()
    result = plan.result()
    if call is not None:
        new_c = None
        if out is None:
            new_c = _NewC(result, shape.c_dtype)
            addresses = (*addresses[:2], new_c.address_of(result), *addresses[3:])
        _REPEATS[key] = Repeat(plan.prepared, addresses, plan.maps, new_c, (fw, device), plan.stateful)
        if len(_REPEATS) > _REPEATS_MAX:
            _REPEATS.popitem(last=False)
    return result


#: gemm()'s recent calls on device arrays, prepared (repeats.Repeat), most
#: recent last, by everything about the call but the arrays' addresses (see
#: _call): a call like one of them costs its key, C's allocation where it
#: returns a new C, and the driver's launches. Each holds its launches' raw
#: arguments and the state of numgemm's own that they read (workspaces,
#: tensor maps), no caller's array. Calls on NumPy inputs (copied to the GPU)
#: are not kept.
_REPEATS = collections.OrderedDict()
_REPEATS_MAX = 256


def _call(a, b, out, stream, options, epilogue):
    """(key, the arrays' addresses (a, b, out or None, then the epilogue's
    scale_a, scale_b and bias, or 0), the stream's raw handle, the result's
    framework, its torch device) of a call on device arrays, or None where
    no Repeat can serve it (a host array, no CUDA context yet). The key is
    everything a prepared call depends on but the addresses: the arrays'
    descriptions (frameworks.describe), which of them share an address, the
    options (a scale given as a number among them), the context and the
    stream (a Repeat's workspaces are used by one stream at a time)."""
    da, db = frameworks.describe(a), frameworks.describe(b)
    dc = frameworks.describe(out) if out is not None else (None, None)
    dv = [(0, x) if x is None or isinstance(x, str) or checks.is_number(x) else frameworks.describe(x)
          for x in epilogue]
    if da is None or db is None or dc is None or None in dv:
        return None
    ctx = driver.current_context()
    if not ctx:                                 # no context yet: the first call makes one
        return None
    kinds = (da[1][0], db[1][0], dc[1][0] if out is not None else None)
    fw = next(k for k in frameworks.ORDER if k in kinds)
    device = next((d[1][4] for d in (da, db, dc) if d[1] is not None and d[1][0] == "torch"), None)
    handle = frameworks.handle(stream) if stream is not None else frameworks.current_stream(fw, device)
    addresses = (da[0], db[0], dc[0], *(d[0] for d in dv[:3]))
    shared = tuple(addresses.index(p) if p else -1 for p in addresses)     # each one's first place
    return ((da[1], db[1], dc[1], *(d[1] for d in dv), shared, options, ctx, handle), addresses, handle, fw,
            device)


class _NewC:
    """How a repeated call that returns a new C makes it: of C's shape and
    dtype, from the framework's allocator, at an address aligned as the
    first C was (its low byte: allocators align to 256 bytes and more), else
    (None, None) and the call takes the whole path."""

    def __init__(self, first, dtype):
        self.shape, self.dtype, self.low = tuple(first.shape), dtype, self.address_of(first) & 255
        torch = sys.modules.get("torch")
        # torch's allocator on the current stream, as empty_like of a template: one
        # element of C's dtype and device, expanded to C's shape (overlapping, so
        # the copy is contiguous). It parses no shape, dtype or device: 1.8 us a C
        # on the H200 against torch.empty's 3.4 (results/2026-12-03-h200-steady-ladder).
        self._torch = None
        if torch is not None and isinstance(first, torch.Tensor):
            template = torch.empty(1, dtype=first.dtype, device=first.device).expand(self.shape)
            self._torch = functools.partial(torch.empty_like, template)

    @staticmethod
    def address_of(c):
        return frameworks.describe(c)[0]

    def __call__(self, fw, device, handle, follow):
        """(C, its address) for a call on stream `handle`; follow: the
        framework's current stream, on which torch allocates by default."""
        if self._torch is not None and follow:
            c = self._torch()
            address = c.data_ptr()
        else:
            c = frameworks.Allocator(fw, device, handle).new(self.shape, self.dtype)
            address = self.address_of(c)
        return (c, address) if address & 255 == self.low else (None, None)


def _empty_product(a, b, shape, out):
    """The product of a GEMM with M, N or K zero, as NumPy gives it: an empty
    array, or zeros for K = 0; into out where it is given."""
    batch, M, N, K = shape.bmnk
    dtype = shape.c_dtype
    batched = len(a.shape) == 3 or len(b.shape) == 3
    if out is not None:                 # checked as a launch's out is, then zeroed
        C, _, result = views.output(out, batched, batch, M, N, dtype, False)
        if C.size:
            C.copy_to_device(np.zeros(C.shape, C.dtype))
        return result
    zeros = np.zeros((batch, M, N) if batched else (M, N), dtype)
    fw = frameworks.of(a, b)
    if fw == "numpy":
        return zeros
    result, view = frameworks.Allocator(fw, frameworks.device_of(fw, a, b)).empty(zeros.shape, dtype)
    if view.size:
        view.copy_to_device(zeros)
    return result


def plan_gemm(a, b, *, precision=None, kernel=None, preset="tuned", out=None, out_dtype=None, k=None, stream=None,
              scale_a=None, scale_b=None, bias=None, activation=None):
    """Validate the operands, pick and compile the kernel: a GemmPlan (the
    arguments as gemm()'s). With stream=None its launches follow the
    framework's current stream."""
    shape = checks.checked(a, b, precision, kernel, preset, k, out, out_dtype, (scale_a, scale_b, bias, activation))
    if 0 in shape.mnk:
        raise ValueError(f"plan_gemm needs M, N and K of at least 1, got {shape.mnk}; gemm() answers empty "
                         "shapes as NumPy does")
    return plans.make(a, b, shape, preset, out, stream)
