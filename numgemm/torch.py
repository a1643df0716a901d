"""numgemm's GEMM as PyTorch operators, which torch.compile sees and traces.

    import numgemm.torch
    y = torch.ops.numgemm.linear(x, layer.weight, layer.bias)   # nn.Linear's layout
    c = torch.ops.numgemm.gemm(a, b)                            # a @ b, as numgemm.gemm
    c = torch.ops.numgemm.gemm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)   # FP8
    layer = numgemm.torch.W4Linear(numgemm.prepack_w4(w4, scales)).cuda()      # W4A16: numgemm::w4a16

Each is a torch.library custom operator with fake implementations (the
output's shape and dtype, without a GPU), so that torch.compile(fullgraph=True)
of a function calling them compiles, and a graph break does not hide them.
Each launches on torch's current stream and returns a tensor from torch's
allocator, so CUDA graphs capture it. Forward only: no autograd formula is
registered (run them under torch.no_grad() or inference_mode()).
"""

from typing import Optional

import numpy as np
import torch

from . import api
from .precision import PRECISIONS

#: torch's dtypes of the precisions a dtype names, and each precision's C
_PRECISION = {getattr(torch, name): p.name for p in PRECISIONS.values()
              for name in ((np.dtype(p.host_dtype).name,) if p.dtype_names else ()) + p.dtype_aliases}
_C_DTYPE = {p.name: getattr(torch, np.dtype(p.out_dtype).name) for p in PRECISIONS.values()}


@torch.library.custom_op("numgemm::gemm", mutates_args=())
def gemm(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype] = None,
         kernel: Optional[str] = None, precision: Optional[str] = None, scale_a: Optional[torch.Tensor] = None,
         scale_b: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
         activation: Optional[str] = None) -> torch.Tensor:
    """C = a @ b, as numgemm.gemm() computes it (B K x N, or the transpose of
    an N x K weight: b = w.t()); out_dtype: C's dtype (FP16: float32 by
    default, or float16); scale_a, scale_b, bias (float32) and activation:
    gemm()'s epilogue."""
    return api.gemm(a, b, kernel=kernel, precision=precision, out_dtype=out_dtype, scale_a=scale_a,
                    scale_b=scale_b, bias=bias, activation=activation)


@gemm.register_fake
def _(a, b, out_dtype=None, kernel=None, precision=None, scale_a=None, scale_b=None, bias=None, activation=None):
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    dtype = out_dtype or _c_dtype(a, kernel, precision)
    if out_dtype is None and dtype == torch.int32 and any(x is not None for x in (scale_a, scale_b, bias, activation)):
        dtype = torch.float32           # an integer precision's sums through the epilogue (W8A8)
    return a.new_empty((*batch, a.shape[-2], b.shape[-1]), dtype=dtype)


@torch.library.custom_op("numgemm::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           activation: Optional[str] = None) -> torch.Tensor:
    """nn.Linear's product: x (..., K) @ weight.t() (weight N x K, as nn.Linear
    stores it: read in place, no copy) + bias, then activation ("relu",
    "gelu" in its tanh form, "silu"), in x's dtype (float16 or bfloat16 in,
    the same out, as F.linear gives). The bias is added to the f32 sums in
    the GEMM's epilogue (a bias in x's dtype is widened to float32 first),
    and C is rounded once."""
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"numgemm.torch.linear takes x as float16 or bfloat16; got {x.dtype}")
    rows = x.reshape(-1, x.shape[-1])
    if bias is not None and bias.dtype != torch.float32:
        bias = bias.float()
    y = api.gemm(rows, weight.t(), out_dtype=x.dtype, bias=bias, activation=activation)
    return y.reshape(*x.shape[:-1], weight.shape[0])


@linear.register_fake
def _(x, weight, bias=None, activation=None):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.custom_op("numgemm::w4a16", mutates_args=())
def w4a16(x: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, zeros: Optional[torch.Tensor],
          precision: str, wgmma_words: Optional[torch.Tensor] = None) -> torch.Tensor:
    """W4A16: x (..., K) times the INT4 weight whose prepack_w4 arrays these
    are (PackedW4's words, scales, zeros and precision: "fp16" or "bf16",
    x's format, and optionally its wgmma_words()), on x's GPU (W4Linear holds
    them); C in x's dtype, as numgemm.gemm(x, packed) computes it."""
    from .weight_only import Resident
    from .weight_only import gemm as w4_gemm

    return w4_gemm(x, Resident(words, scales, zeros, precision, wgmma_words))


@w4a16.register_fake
def _(x, words, scales, zeros, precision, wgmma_words=None):
    return x.new_empty((*x.shape[:-1], 8 * words.shape[0]))


class W4Linear(torch.nn.Module):
    """An nn.Linear whose weight is INT4 (a numgemm.quant.PackedW4): its
    arrays as buffers (moved by .to() / .cuda() with the module, saved in
    its state_dict), the wgmma kernel's layout of the weight among them
    (PackedW4.wgmma_words: the INT4 bytes twice, for mma.sync at few rows and
    wgmma at many), forward through numgemm::w4a16, plus the bias where there
    is one (in torch, after)."""

    def __init__(self, packed, bias=None):
        super().__init__()
        self.in_features, self.out_features, self.precision = packed.k, packed.n, packed.precision
        self.register_buffer("words", torch.from_numpy(packed.words.view(np.int32)))
        self.register_buffer("scales", torch.from_numpy(packed.scales.view(np.int16)))
        self.register_buffer("zeros", None if packed.zeros is None else torch.from_numpy(packed.zeros))
        self.register_buffer("wgmma_words", torch.from_numpy(packed.wgmma_words().view(np.int32)))
        self.bias = None if bias is None else torch.nn.Parameter(torch.as_tensor(bias), requires_grad=False)

    def forward(self, x):
        y = torch.ops.numgemm.w4a16(x, self.words, self.scales, self.zeros, self.precision, self.wgmma_words)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.precision} activations, " \
               f"zero points: {self.zeros is not None}, bias: {self.bias is not None}"


def _c_dtype(a, kernel, precision):
    """C's default dtype: the precision's (named, the kernel's, or a's dtype's)."""
    if precision is None and kernel is not None:
        from . import registry

        precision = registry.get(kernel).precision
    precision = precision or _PRECISION.get(a.dtype)
    if precision is None:
        raise TypeError(f"cannot infer the precision from dtype {a.dtype}: pass precision= or kernel=")
    return _C_DTYPE[precision]
