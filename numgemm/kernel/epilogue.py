"""The epilogue seam: what happens to the f32 sums between the k loop and the store.

    C = act(scale_a * scale_b * (A @ B) + bias)

computed in f32, then stored as the kernel stores C (out= rounds it to f16
or bf16 there). It is chosen once, from the config's fields: scale_a
"tensor" (one value) or "row" (one a row of C), scale_b "tensor" or "col"
(one a column), bias (one a column), act "relu", "gelu" (its tanh form, as
torch's approximate="tanh") or "silu". A kernel without them has none of
this code. The vectors reach the kernel beside C, its argument being the
tuple (C, scale_a, scale_b, bias) of float32 vectors; one it does not read
is a one-element array of the plan's.

Where a block's sums are whole, the warp routine's store is wrapped
(around): each thread applies the epilogue to its accumulators where the
fragment puts them (_cells), each row's and column's factors loaded once,
then the store runs as it does without one, so every store path (from
registers, staged, by TMA) rounds the result. Split-K's slices are partial
sums: the sum kernel applies it to each whole sum (element). An integer
precision's exact s32 sums are converted to f32 first (W8A8: C =
s_a[m] s_b[n] (A @ B) + bias in float32, bfloat16 or float16); the store
then writes f32 (KernelConfig.stored).
"""

import functools
import math

import numpy as np
from numba import cuda, types

from .. import primitives as P
from ..tiles import wgmma_acc_arrays
from .regs import device, generated, inlined, u8, u32, u64
from .warp_wgmma import c_buffer, c_buffer_line

#: The fields of KernelConfig that make the epilogue (split_k.SplitSum carries them too), and their
#: values where there is none.
NONE = {"scale_a": "", "scale_b": "", "bias": False, "act": ""}
FIELDS = tuple(NONE)

_ZERO, _ONE = np.float32(0), np.float32(1)
# SiLU and GELU's tanh form are each v * sigmoid(x) = v / (1 + 2^(-x log2 e)): for GELU
# x = 2 sqrt(2/pi) (v + 0.044715 v^3), since (1 + tanh(u)) / 2 = sigmoid(2u).
_SILU_K = np.float32(-math.log2(math.e))
_GELU_K, _GELU_B = np.float32(-2 * math.sqrt(2 / math.pi) * math.log2(math.e)), np.float32(0.044715)


@device
def _relu(v):
    return max(v, _ZERO)


@functools.cache
def activations(linkage="inline"):
    """The activations, by KernelConfig.act, on the special-function unit
    (ptx_asm/approx.ptx in the kernel's linkage): 2^x and a reciprocal,
    without the IEEE division's branch per element. The reference's are in
    numgemm.operands."""
    ptx = P.routines(linkage)
    ex2, rcp = ptx.ex2_approx_f32, ptx.rcp_approx_f32

    def silu(v):
        return v * rcp(_ONE + ex2(_SILU_K * v))

    def gelu(v):
        return v * rcp(_ONE + ex2(_GELU_K * v * (_ONE + _GELU_B * v * v)))
    return {"relu": _relu, "gelu": device(gelu), "silu": device(silu)}


#: Numba type of an epilogue vector: float32, any stride (torch's (M, 1) scales).
VECTOR = types.Array(types.float32, 1, "A")


def argtype(c):
    """The kernel's C argument with an epilogue: (C, scale_a, scale_b, bias)."""
    return types.Tuple((c, VECTOR, VECTOR, VECTOR))


def _formula(ep, v, row, col, read=None):
    """The source of one output's value: sum v, its C row index row and
    column index col (sources); read(kind, expr) gives the source of a
    row's ("a") or column's ("b", "c": bias) factor where they are not read
    from the vectors themselves (staged)."""
    read = read or (lambda kind, i: f"{dict(a='sa', b='sb', c='bias')[kind]}[{i}]")
    factors = [read("a", row) if ep.scale_a == "row" else "sa[0]"] if ep.scale_a else []
    factors += [read("b", col) if ep.scale_b == "col" else "sb[0]"] if ep.scale_b else []
    x = " * ".join([v] + factors)
    if ep.bias:
        x = f"{x} + {read('c', col)}"
    return f"{ep.act}({x})" if ep.act else x


def _cells(cfg):
    """(accumulator, rows, columns) of each of a thread's sums, relative to
    (row0 + g, col0 + 2t) for lane (g, t) of a warp storing rows from row0,
    columns from col0: the m16n8 fragment's layout, in which the mma
    kernels hold their warp tile and the wgmma ones a warp's 16 rows (two
    instructions side by side: an array each, the second's columns after
    the first's; pingpong: 16 rows of each 64-row half, an array each)."""
    if cfg.op == "wgmma":
        arrays = wgmma_acc_arrays(cfg.bn, cfg.pingpong)
        pick = (lambda i, e: f"acc[{i}][{e}]") if len(arrays) > 1 else (lambda i, e: f"acc[{e}]")
        # array i's first row and column: its 64-row half's (pingpong), or its instruction's columns
        first = [(64 * i, 0) if cfg.pingpong else (0, sum(arrays[:i])) for i in range(len(arrays))]
        return [(pick(i, e), first[i][0] + 8 * ((e >> 1) & 1), first[i][1] + 8 * (e // 4) + (e & 1))
                for i, n in enumerate(arrays) for e in range(n // 2)]
    wm, wn = cfg.warp_tile
    mi, nj = wm // 16, wn // 8
    return [(f"acc[{(i * nj + j) * 4 + 2 * h + p}]", 16 * i + 8 * h, 8 * j + p)
            for i in range(mi) for j in range(nj) for h in range(2) for p in range(2)]


def _apply(cfg):
    """apply(acc, sa, sb, bias, m0, n0, wr0, wc0, M, N, tid): the epilogue on
    a warp's accumulators, in place. Written out, as the stores are: an
    accumulator indexed in a loop would live in local memory. A factor of a
    row or column past C is read at C's last (that sum is not stored). With
    swap the kernel's tile is of C^T: its rows are C's columns. Where the
    factors are staged (prefetch), they are read from the warp's C buffer."""
    if staged(cfg):
        return _apply_staged(cfg)
    lines = ["lane = tid & 31", "r0 = m0 + wr0 + (lane >> 2)", "c0 = n0 + wc0 + 2 * (lane & 3)"]
    loaded = {}

    def index(expr, bound):             # a clamped index, once per distinct row or column
        if expr not in loaded:
            loaded[expr] = f"i{len(loaded)}"
            lines.append(f"{loaded[expr]} = u32(min({expr}, {bound} - 1))")
        return loaded[expr]

    for acc, dr, dc in _cells(cfg):
        r, c = (f"r0 + {dr}", "M"), (f"c0 + {dc}", "N")
        if cfg.swap:
            r, c = c, r
        row = index(*r) if cfg.scale_a == "row" else None
        col = index(*c) if cfg.scale_b == "col" or cfg.bias else None
        lines.append(f"{acc} = {_formula(cfg, acc, row, col)}")
    return generated("apply", "acc, sa, sb, bias, m0, n0, wr0, wc0, M, N, tid", lines,
                     {"u32": u32, **activations(cfg.linkage)})


def _rows(cfg):
    """The rows whose scale_a a consumer warp stages, first in its C buffer (the
    tile's bn columns' scale_b, then their bias, after them): its 16, in each
    half of the tile with pingpong."""
    return 32 if cfg.pingpong else 16


def staged(cfg):
    """Whether the row and column factors reach the epilogue through the
    consumer warp's C buffer (stage_c's, idle while the k loop runs), copied
    as the tile starts (prefetch): in the warp-specialised wgmma kernels'
    tiles of C (not C^T) where a warp's 16 row and 2 bn column factors fit
    its buffer. Loaded in the epilogue instead, with the accumulators
    holding most registers, they go out a few at a time, each batch waiting
    for L2."""
    if not (cfg.epilogue and cfg.op == "wgmma" and cfg.stage_c and not cfg.swap and cfg.split_k == 1):
        return False
    return bool(cfg.scale_a == "row" or cfg.scale_b == "col" or cfg.bias) and \
        4 * (_rows(cfg) + 2 * cfg.bn) <= c_buffer(cfg)[1]


def prefetch(cfg):
    """prefetch(CE, m0, n0, wr0, M, N, tid), or None where the factors are
    not staged: as a tile starts, the consumer warp's factors (scale_a of
    its 16 rows, scale_b and bias of the tile's columns) into its C buffer,
    by 4-byte cp.async (any stride), one commit group that the epilogue
    waits for; a factor past C is C's last."""
    if not staged(cfg):
        return None
    ptx = P.routines(cfg.linkage)
    lines = ["lane = tid & 31", c_buffer_line(cfg), "cuda.syncwarp()"]    # the last tile's reads are done
    if cfg.c_tma:                                                          # and its TMA stores' too
        lines += ["if lane == 0:", "    wait_read_0()", "cuda.syncwarp()"]
    rows = _rows(cfg)
    row = "wr0 + lane + (lane >> 4) * 48" if cfg.pingpong else "wr0 + lane"     # pingpong: 16 - 31 the second half's
    if cfg.scale_a == "row":
        lines += [f"if lane < {rows}:", f"    cp4(buf + u32(4 * lane), at(CE[1], min(m0 + {row}, M - 1)))"]
    for arg, first, on in ((2, rows, cfg.scale_b == "col"), (3, rows + cfg.bn, cfg.bias)):
        if on:
            lines += [f"for j in range(lane, {cfg.bn}, 32):",
                      f"    cp4(buf + u32(4 * ({first} + j)), at(CE[{arg}], min(n0 + j, N - 1)))"]
    lines.append("commit()")
    at = device(lambda v, i: P.global_addr(v, 0) + u64(i * v.strides[0]))      # any stride
    return generated("prefetch", "CE, m0, n0, wr0, M, N, tid", lines,
                     {"cuda": cuda, "u8": u8, "u32": u32, "shared_addr": P.shared_addr, "at": at,
                      "cp4": ptx.cp_async_ca_4, "commit": ptx.cp_async_commit, "wait_read_0": ptx.bulk_wait_read_0})


def _apply_staged(cfg):
    """_apply's function on factors staged by prefetch: once they have
    landed, each row's and each column pair's read from the buffer once
    (LDS, LDS.64); then the warp's reads are done before its store writes
    the buffer."""
    ptx = P.routines(cfg.linkage)
    lines = ["lane = tid & 31", "wait_0()", "cuda.syncwarp()", c_buffer_line(cfg),
             "rb = buf + u32(4 * (lane >> 2))", "cb = buf + u32(8 * (lane & 3) + 4 * wc0)"]
    loaded = {}

    def factor(kind, d):
        """The variable holding row dr's factor (kind "a"), or column dc's scale_b or bias ("b", "c")."""
        key = (kind, d - (d & 1) if kind != "a" else d)
        if key not in loaded:
            name = loaded[key] = f"{kind}{key[1]}"
            if kind == "a":         # pingpong: the second half's rows (64 on) staged after the first's 16
                lines.append(f"{name} = ld1(rb + u32({4 * (d - 48 if d >= 64 else d)}))")
            else:
                first = _rows(cfg) + (cfg.bn if kind == "c" else 0)
                lines.append(f"{name} = ld2(cb + u32({4 * (first + key[1])}))")
        return loaded[key] if kind == "a" else f"{loaded[key]}[{d & 1}]"

    for acc, dr, dc in _cells(cfg):
        lines.append(f"{acc} = {_formula(cfg, acc, dr, dc, factor)}")
    lines.append("cuda.syncwarp()")
    return generated("apply", "acc, sa, sb, bias, m0, n0, wr0, wc0, M, N, tid", lines,
                     {"cuda": cuda, "u8": u8, "u32": u32, "shared_addr": P.shared_addr, "wait_0": ptx.cp_async_wait_0,
                      "ld1": ptx.ld_shared_f32, "ld2": ptx.ld_shared_v2_f32, **activations(cfg.linkage)})


def around(cfg, store):
    """The warp routine's store with the epilogue first: store(acc, (C, sa,
    sb, bias), ...), as the skeletons call a store; s32 sums converted to
    f32 first, into new arrays (the store is built for cfg.stored, f32)."""
    apply = _apply(cfg)
    if cfg.acc == "f32":
        def store_ep(acc, CE, z, m0, n0, wr0, wc0, M, N, tid, c_aligned):
            apply(acc, CE[1], CE[2], CE[3], m0, n0, wr0, wc0, M, N, tid)
            store(acc, CE[0], z, m0, n0, wr0, wc0, M, N, tid, c_aligned)
        return device(store_ep)
    to_f32 = _to_f32(cfg)

    def store_sums(acc, CE, z, m0, n0, wr0, wc0, M, N, tid, c_aligned):
        f = to_f32(acc)
        apply(f, CE[1], CE[2], CE[3], m0, n0, wr0, wc0, M, N, tid)
        store(f, CE[0], z, m0, n0, wr0, wc0, M, N, tid, c_aligned)
    return inlined(store_sums)


def _to_f32(cfg):
    """convert(acc): the accumulators (an array, or a pair of arrays side by
    side) as new f32 arrays of the same shape."""
    def one(n):
        def convert(acc):
            f = cuda.local.array(n, types.float32)
            for e in range(n):
                f[e] = acc[e]
            return f
        return inlined(convert)
    parts = wgmma_acc_arrays(cfg.bn, cfg.pingpong) if cfg.op == "wgmma" else ()
    if len(parts) < 2:
        return one(len(_cells(cfg)))
    first, second = (one(n // 2) for n in parts)
    return inlined(lambda acc: (first(acc[0]), second(acc[1])))


def element(ep):
    """element(v, sa, sb, bias, r, c): the epilogue on one whole sum v of C's
    row r, column c (ep: the fields, of a config or a split_k.SplitSum), in
    f32 (an s32 sum converted)."""
    return generated("element", "v, sa, sb, bias, r, c", [f"return {_formula(ep, 'f32(v)', 'r', 'c')}"],
                     {"f32": types.float32, **activations()})


def rules(cfg):
    """What the epilogue needs: whole f32 or s32 sums (not f16 ones, nor
    the 256-fold sums of a scaled INT4 widening, which its store shifts
    back), and a kernel whose store it wraps or whose slices the sum kernel
    adds (mma or wgmma; split-K summed by its own kernel)."""
    if not cfg.epilogue:
        return []
    err = []
    if cfg.acc == "f16" or cfg.scaled:
        err.append("the epilogue (scales, bias, activation) runs on f32 or exact s32 sums, not "
                   + ("f16 ones" if cfg.acc == "f16" else "a scaled widening's (unpack=scaled, tile_scaled)"))
    if cfg.op not in ("mma", "wgmma"):
        err.append(f"the epilogue runs on the mma and wgmma kernels' accumulators, not op={cfg.op}'s")
    if cfg.split_sum == "last" or cfg.stream_k:
        err.append("the epilogue runs on whole sums: split-K summed by its own kernel (no split_sum=last "
                   "or stream_k)")
    return err


def host(p):
    """The plan's side (plans.Parts, the last step: the others read C
    itself): C as the kernel takes it, (C, scale_a, scale_b, bias), each
    vector given (p.vectors, Numba views) or a one-element array of the
    plan's that the kernel does not read."""
    if p.cfg.epilogue:
        spare = None
        vectors = []
        for v in p.vectors:
            if v is None:
                spare = p.new((1,), np.float32) if spare is None else spare
            vectors.append(spare if v is None else v)
        p.C = (p.C, *vectors)
