"""Split-K's second kernel: the partial sums of a split_k kernel added into C.

A kernel with KernelConfig.split_k = S runs S blocks on each output tile,
block s over the s-th run of k-tiles (skeleton.split_k_part), and stores its
partial sum where batch z's slice z * S + s of a (batch * S, M, N)
workspace lies; this kernel adds the S slices of each batch into C, one
thread an element, in the workspace's dtype (f32 or s32), and (out="f16")
rounds the f32 sum to half as it stores it, after the epilogue where the
config has one (epilogue.element: scales, bias, activation on each whole
sum). Integer sums wrap in s32 as one
sum would, so the result is exact wherever the whole K is within the
precision's bound (Precision.max_k).
"""

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda, types

from .. import primitives as P
from ..config import field_suffix
from . import epilogue as ep
from .regs import OUT, device, divmod32, i32, inlined

THREADS = 256


def _slices_sum(W, z, S, r, c):
    """Batch z's S slices of W at (r, c), added in slice order."""
    total = W[z * S, r, c]
    for s in range(1, S):
        total += W[z * S + s, r, c]
    return total


#: The sum of one element's slices, as this kernel and a split_sum="last"
#: kernel's last block (skeleton._sum_last) both add them.
slices_sum = device(_slices_sum)


@dataclass(frozen=True)
class SplitSum:
    """The split-sum kernel of one accumulator type and C, as numgemm's kernel
    cache keys it (cache.key reads describe())."""

    acc: str                    # f32 | s32
    out: str = ""               # KernelConfig.out: "" C in acc | f16, bf16 (f32 sums rounded to it)
    scale_a: str = ""           # the epilogue, as KernelConfig's fields (epilogue.FIELDS)
    scale_b: str = ""
    bias: bool = False
    act: str = ""
    threads = THREADS

    @classmethod
    def of(cls, cfg):
        """The sum that a split_k config's slices need."""
        return cls(cfg.acc, cfg.out, *(getattr(cfg, f) for f in ep.FIELDS))

    @property
    def epilogue(self):
        return bool(self.scale_a or self.scale_b or self.bias or self.act)

    @property
    def name(self):
        fields = [field_suffix(f, getattr(self, f)) for f in (*ep.FIELDS, "out") if getattr(self, f)]
        return "_".join([f"split_sum_{self.acc}", *fields])

    def describe(self):
        return {"kernel": self.name, "acc": self.acc, "out": self.out, **{f: getattr(self, f) for f in ep.FIELDS}}

    def argtypes(self):
        """W (batch * S, M, N), contiguous; C (batch, M, N), any strides (f16:
        its 16-bit patterns), with an epilogue (C, scale_a, scale_b, bias); S."""
        c = types.Array(OUT[self.out or ("f32" if self.epilogue else self.acc)], 3, "A")
        return types.Array(OUT[self.acc], 3, "C"), ep.argtype(c) if self.epilogue else c, i32

    def function(self):
        """The kernel's Python function."""
        return _kernel(self.out, self if self.epilogue else None)

    def grid(self, batch, M, N):
        return -(-batch * M * N // THREADS), 1, 1


@functools.cache
def _kernel(out, epilogue):
    """The sum kernel: C = the slices' sum, or (out: f16, bf16) its bits in
    that format; epilogue: a SplitSum whose epilogue each sum passes first
    (its C argument then (C, scale_a, scale_b, bias))."""
    if out:
        to_bits = getattr(P.routines("inline"), f"cvt_{out}x2_f32")
        value = device(lambda total: to_bits(total, 0.0) & 0xFFFF)
    else:
        value = device(lambda total: total)
    if epilogue is None:
        c_of, finish = inlined(lambda C: C), device(lambda v, C, r, c: v)
    else:
        element = ep.element(epilogue)
        c_of, finish = inlined(lambda C: C[0]), device(lambda v, C, r, c: element(v, C[1], C[2], C[3], r, c))

    def split_sum(W, CE, S):
        C = c_of(CE)
        i = cuda.grid(1)
        M, N = C.shape[1], C.shape[2]
        if i < C.shape[0] * M * N:
            z, rc = divmod32(i, M * N)
            r, c = divmod32(rc, N)
            C[z, r, c] = value(finish(slices_sum(W, z, S, r, c), CE, r, c))
    return split_sum


def rules(cfg):
    """Split-K: f32/s32 slices; split_sum="last" in the block skeleton."""
    err = []
    if cfg.split_k > 1 and cfg.acc == "f16":
        err.append("split_k > 1 is for the mma, WMMA and wgmma kernels with f32/s32 sums (the workspace's)")
    if cfg.split_sum == "last" and (cfg.split_k == 1 or cfg.op not in ("mma", "wmma")):
        err.append("split_sum=last adds a split tile's slices in its last block: split_k > 1, the block "
                   "skeleton's kernels (op=mma or wmma)")
    return err


def host(p):
    """The plan's side (plans.Parts): split-K's workspace of partial sums,
    whose slices are aligned and packed (C's own alignment no longer
    matters to the kernel), and split_sum="last"'s arrival counts, zeroed
    once (each launch's last blocks set their tile's back to 0)."""
    if p.cfg.split_k > 1:
        p.work = p.new((p.batch * p.cfg.split_k, p.M, p.N), p.sums)
        p.c_aligned = int(p.N % 8 == 0)
    if p.cfg.split_sum == "last":
        p.counts = p.zeros(p.batch * p.tiles(), np.int32)
